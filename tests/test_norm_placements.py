"""Where the norm goes, 2017 -> 2025 (blocklab.run.model): each placement, DyT, rotary positions and `bias: false`
checked against a plain reimplementation of its paper's equation, on the block's own parameters; the
combinations that make no sense refused naming both keys; the defaults' modules unchanged."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import yaml
from conftest import ROOT

from blocklab.params.problems import ParamsError

from blocklab.params.schema import load_params
from blocklab.run.model import Block, DyT, TinyLM, build_model
from blocklab.run.settings import ModelConfig

SMALL = {"d_model": 16, "n_heads": 2, "context": 8}


def _x(seed: int = 0) -> torch.Tensor:
    return torch.randn(3, 8, 16, generator=torch.Generator().manual_seed(seed))


def _both_sublayers(block: Block, x: torch.Tensor, sublayer) -> torch.Tensor:
    """Apply `sublayer(x, f, n_in, n_out)` for attention, then for the feed-forward network."""
    x = sublayer(x, block.attn, block.ln1, getattr(block, "ln1_out", None))
    return sublayer(x, block.ffn, block.ln2, getattr(block, "ln2_out", None))


EQUATIONS = {
    # Xiong et al. 2020
    "pre": lambda x, f, n, _: x + f(n(x)),
    # Vaswani et al. 2017
    "post": lambda x, f, n, _: n(x + f(x)),
    # Kim et al. 2025 (Peri-LN): x + Norm_out(f(Norm_in(x)))
    "peri": lambda x, f, n, n_out: x + n_out(f(n(x))),
    # OLMo 2 (2025): x + Norm(f(x))
    "reordered": lambda x, f, n, _: x + n(f(x)),
}


@pytest.mark.parametrize("norm", list(EQUATIONS))
@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm", "dyt"])
def test_each_placement_computes_its_papers_equation(norm, norm_type):
    torch.manual_seed(0)
    block = Block(ModelConfig(**SMALL, placement=norm, norm_type=norm_type))
    with torch.no_grad():
        for p in block.parameters():  # away from the norms' initial 1 and 0, so that a swapped norm shows
            p.add_(0.1 * torch.randn_like(p))
        x = _x()
        assert torch.allclose(block(x), _both_sublayers(block, x, EQUATIONS[norm]), atol=1e-6)


def test_layernorm_scaling_divides_the_normalised_input_of_block_l_by_sqrt_l():
    """Sun et al. 2025 ("The Curse of Depth"): x + f(LN(x) / sqrt(l)), l the 1-based layer."""
    cfg = ModelConfig(**SMALL, n_layers=4, norm_scaling=True)
    model = build_model(cfg, vocab_size=11, seed=0)
    x = _x()
    with torch.no_grad():
        for layer, block in enumerate(model.blocks, start=1):
            expected = _both_sublayers(block, x, lambda h, f, n, _: h + f(n(h) / math.sqrt(layer)))
            assert torch.allclose(block(x), expected, atol=1e-6)
        plain = build_model(ModelConfig(**SMALL, n_layers=4), vocab_size=11, seed=0)
        assert torch.equal(plain.blocks[0](x), model.blocks[0](x))  # l = 1: no change
        assert not torch.allclose(plain.blocks[3](x), model.blocks[3](x))


@pytest.mark.parametrize("n_layers, fraction, post", [(8, None, 2), (6, None, 1), (12, None, 3), (24, None, 6),
                                                      (8, 0.5, 4), (4, 0.0, 0)])
def test_mix_ln_is_post_norm_in_the_first_quarter_of_the_blocks_and_pre_norm_after(n_layers, fraction, post):
    """Li et al. 2025 (Mix-LN): post-LN in the first floor(alpha * L) layers, alpha = 0.25, pre-LN after."""
    model = TinyLM(ModelConfig(**SMALL, n_layers=n_layers, placement="mix", mix_fraction=fraction), vocab_size=11)
    assert [b.placement for b in model.blocks] == ["post"] * post + ["pre"] * (n_layers - post)
    x = _x()
    with torch.no_grad():
        for block in model.blocks:
            assert torch.allclose(block(x), _both_sublayers(block, x, EQUATIONS[block.placement]), atol=1e-6)
    assert model.cfg.has_final_norm  # its last blocks are pre-norm: a final norm before the head


def test_peri_ln_normalises_the_embeddings_and_has_a_final_norm():
    model = build_model(ModelConfig(**SMALL, n_layers=2, placement="peri"), vocab_size=11, seed=0)
    idx = torch.randint(0, 11, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        x = model.emb_norm(model.tok_emb(idx) + model.pos_emb(torch.arange(8)))
        assert torch.equal(model(idx), model.head(model.ln_f(model.blocks(x))))
    assert isinstance(model.ln_f, torch.nn.LayerNorm)


def test_dyt_is_gamma_tanh_alpha_x_plus_beta_with_alpha_starting_at_alpha0():
    """Zhu et al. 2025: DyT(x) = gamma * tanh(alpha * x) + beta, alpha a learned scalar, alpha0 0.5 by default."""
    assert DyT(16, 0.5).alpha.item() == 0.5
    cfg = ModelConfig(**SMALL, norm_type="dyt", dyt_alpha=0.8)
    block = Block(cfg)
    norm = block.ln1
    assert isinstance(norm, DyT) and norm.alpha.item() == pytest.approx(0.8) and norm.alpha.shape == ()
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 16))
        norm.bias.copy_(torch.linspace(-0.2, 0.2, 16))
        x = _x() * 3
        assert torch.allclose(norm(x), norm.weight * torch.tanh(0.8 * x) + norm.bias)
    model = build_model(ModelConfig(**SMALL, n_layers=2, norm_type="dyt"), vocab_size=11, seed=0)
    assert all(isinstance(m, DyT) for m in [model.blocks[0].ln1, model.blocks[1].ln2, model.ln_f])
    assert not any(isinstance(m, (torch.nn.LayerNorm, torch.nn.RMSNorm)) for m in model.modules())


def _rotation(m: int, head: int) -> torch.Tensor:
    """RoFormer's R^d_{Theta,m} (Su et al. 2021, eq. 15): block-diagonal 2x2 rotations by m * theta_i,
    theta_i = 10000^(-2(i-1)/d) for the channel pairs (2i-1, 2i)."""
    r = torch.zeros(head, head, dtype=torch.float64)
    for i in range(head // 2):
        angle = m * 10000 ** (-2 * i / head)
        c, s = math.cos(angle), math.sin(angle)
        r[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    return r


def test_rope_rotates_queries_and_keys_as_roformer_and_replaces_the_position_table():
    cfg = ModelConfig(**SMALL, rope=True)
    torch.manual_seed(0)
    block = Block(cfg)
    attn, head = block.attn, 8
    x = _x()
    with torch.no_grad():
        q, k, v = attn.qkv(x).split(16, dim=2)
        q, k, v = (t.view(3, 8, 2, head).transpose(1, 2).double() for t in (q, k, v))
        rot = torch.stack([_rotation(m, head) for m in range(8)])  # (T, head, head)
        q, k = torch.einsum("tij,bhtj->bhti", rot, q), torch.einsum("tij,bhtj->bhti", rot, k)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head)
        scores = scores.masked_fill(torch.ones(8, 8, dtype=torch.bool).triu(1), float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(3, 8, 16).float()
        assert torch.allclose(attn(x), attn.proj(y), atol=1e-5)
        # what rope is for: a query-key product depends on the positions only through their difference
        qv, kv = torch.randn(head, dtype=torch.float64), torch.randn(head, dtype=torch.float64)
        assert (_rotation(5, head) @ qv) @ (_rotation(2, head) @ kv) == pytest.approx(
            (_rotation(3, head) @ qv) @ (_rotation(0, head) @ kv))
    model = build_model(ModelConfig(**SMALL, n_layers=1, rope=True), vocab_size=11, seed=0)
    assert model.pos_emb is None and not any("pos_emb" in name for name, _ in model.named_parameters())


def test_bias_false_leaves_no_bias_anywhere_and_the_default_has_every_one():
    biased = build_model(ModelConfig(**SMALL, n_layers=2), vocab_size=11, seed=0)
    unbiased = build_model(ModelConfig(**SMALL, n_layers=2, bias=False, placement="peri"), vocab_size=11, seed=0)
    assert not [name for name, _ in unbiased.named_parameters() if name.endswith("bias")]
    assert {name for name, _ in biased.named_parameters() if name.endswith("bias")} >= {
        "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.bias", "blocks.0.ffn.widen.bias", "blocks.0.ln1.bias",
        "ln_f.bias", "head.bias"}


def test_the_default_models_modules_are_the_lessons():
    """Off by default: the lesson's model has exactly the parameters it had before these fields."""
    model = build_model(ModelConfig(), vocab_size=65, seed=0)
    names = [name for name, _ in model.named_parameters()]
    assert names[:2] == ["tok_emb.weight", "pos_emb.weight"] and names[-4:] == [
        "ln_f.weight", "ln_f.bias", "head.weight", "head.bias"]
    assert names[2:14] == [f"blocks.0.{n}" for n in ["ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias",
                                                     "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
                                                     "attn.proj.bias", "ffn.widen.weight", "ffn.widen.bias",
                                                     "ffn.narrow.weight", "ffn.narrow.bias"]]
    assert sum(p.numel() for p in model.parameters()) == 310_465  # the reference's 6-layer count


@pytest.mark.parametrize("fields, both", [
    ({"mix_fraction": 0.5}, ("mix_fraction", "placement: pre")),
    ({"placement": "post", "norm_scaling": True}, ("norm_scaling", "placement: post")),
    ({"placement": "peri", "norm_type": "none"}, ("placement: peri", "norm_type: none")),
    ({"norm_scaling": True, "norm_type": "none"}, ("norm_scaling: true", "norm_type: none")),
    ({"dyt_alpha": 1.0}, ("dyt_alpha", "norm_type: layernorm")),
    ({"rope": True, "d_model": 12, "n_heads": 4}, ("rope", "d_model / n_heads = 3")),
])
def test_a_combination_that_makes_no_sense_is_refused_naming_both_keys(tmp_path, fields, both):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["ablations"]["placement"]["variants"]["pre"]["model"] = fields
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError) as refused:
        load_params(tmp_path / "params.yaml").specs()
    message = str(refused.value)
    assert "ablations.placement.variants.pre" in message and all(part in message for part in both), message


def test_every_placement_trains_a_step_and_its_gradients_reach_every_parameter():
    for fields in [{"placement": "peri"}, {"placement": "reordered", "qk_norm": "rmsnorm"}, {"placement": "mix", "n_layers": 4},
                   {"norm_scaling": True}, {"norm_type": "dyt"}, {"rope": True, "bias": False}]:
        model = build_model(ModelConfig(**SMALL, **{"n_layers": 2, **fields}), vocab_size=11, seed=0)
        idx = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(0))
        F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()).backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
        assert not missing, (fields, missing)
