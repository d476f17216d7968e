"""The block's choices as config fields: each computes what its formula says, the lecture's ladder
builds and trains, and the modern variants (RMSNorm, SwiGLU, ReZero, DeepNorm) are what their papers say."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from blocklab.params.schema import load_params
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.model import MLP, Block, SwiGLU, TinyLM, build_model, parameter_counts
from blocklab.run.optimizer import AdamW
from blocklab.run.training import random_batches_loss, train_run

from conftest import ROOT

VOCAB = 65


def _block(**fields) -> Block:
    torch.manual_seed(0)
    block = Block(ModelConfig(**fields))
    with torch.no_grad():  # non-trivial affine maps, so that a mis-wired norm would show
        for norm in (block.ln1, block.ln2):
            if getattr(norm, "weight", None) is not None:
                norm.weight.uniform_(0.5, 1.5)
            if getattr(norm, "bias", None) is not None:
                norm.bias.uniform_(-0.5, 0.5)
    return block


def test_an_rmsnorm_block_divides_by_the_root_mean_square_without_recentring():
    block = _block(norm_type="rmsnorm")
    assert isinstance(block.ln1, nn.RMSNorm) and not hasattr(block.ln1, "bias")
    x = torch.randn(2, 8, 64)
    rms = lambda t, n: n.weight * t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5)  # noqa: E731
    h = x + block.attn(rms(x, block.ln1))
    torch.testing.assert_close(block(x), h + block.ffn(rms(h, block.ln2)))


def test_a_block_without_norms_adds_the_sublayers_to_the_stream():
    block = _block(norm_type="none")
    x = torch.randn(2, 8, 64)
    h = x + block.attn(x)
    torch.testing.assert_close(block(x), h + block.ffn(h))


def test_rezero_starts_as_the_identity_and_learns_its_scalars():
    block = _block(residual="rezero", norm_type="none")
    x = torch.randn(2, 8, 64)
    assert block.res1.alpha.item() == 0 and block.res2.alpha.item() == 0
    torch.testing.assert_close(block(x), x)  # alpha = 0: every block starts as the identity
    with torch.no_grad():
        block.res1.alpha.fill_(0.3)
        block.res2.alpha.fill_(-0.2)
    h = x + 0.3 * block.attn(x)
    torch.testing.assert_close(block(x), h - 0.2 * block.ffn(h))

    model = build_model(ModelConfig(n_layers=2, residual="rezero", norm_type="none"), VOCAB, seed=0)
    optimizer = AdamW(list(model.parameters()), lr=1e-2)
    idx = torch.randint(0, VOCAB, (4, 17))
    F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()).backward()
    optimizer.step()
    assert all(b.res1.alpha.item() != 0 and b.res2.alpha.item() != 0 for b in model.blocks)


@pytest.mark.parametrize("n_layers", [2, 12])
def test_deepnorm_scales_the_residual_by_2n_to_the_quarter_inside_the_post_norm(n_layers):
    block = _block(residual="deepnorm", placement="post", n_layers=n_layers)
    alpha = (2 * n_layers) ** 0.25
    assert block.res1.alpha == pytest.approx(alpha)
    x = torch.randn(2, 8, 64)
    h = block.ln1(alpha * x + block.attn(x))
    torch.testing.assert_close(block(x), block.ln2(alpha * h + block.ffn(h)))


@pytest.mark.parametrize("n_layers", [2, 12])
def test_deepnorm_initialises_values_and_projections_scaled_by_8n_to_the_minus_quarter(n_layers):
    plain = build_model(ModelConfig(placement="post", n_layers=n_layers), VOCAB, seed=3)
    deep = build_model(ModelConfig(placement="post", residual="deepnorm", n_layers=n_layers), VOCAB, seed=3)
    beta = (8 * n_layers) ** -0.25
    for p, d in zip(plain.blocks, deep.blocks):
        torch.testing.assert_close(d.attn.qkv.weight[:128], p.attn.qkv.weight[:128])  # queries, keys: as they were
        torch.testing.assert_close(d.attn.qkv.weight[128:], beta * p.attn.qkv.weight[128:])  # values
        for name in ("attn.proj", "ffn.widen", "ffn.narrow"):
            torch.testing.assert_close(d.get_submodule(name).weight, beta * p.get_submodule(name).weight)
    torch.testing.assert_close(deep.head.weight, plain.head.weight)


def test_deepnorm_needs_post_norm():
    with pytest.raises(ValueError, match="deepnorm is a post-norm scheme"):
        ModelConfig(residual="deepnorm", placement="pre")


def test_swiglu_is_w2_of_silu_w1_times_w3_and_matches_the_4x_mlp_within_2_percent():
    torch.manual_seed(0)
    cfg = ModelConfig(ffn="swiglu")
    ffn = SwiGLU(cfg)
    x = torch.randn(2, 8, 64)
    torch.testing.assert_close(ffn(x), ffn.w2(F.silu(ffn.w1(x)) * ffn.w3(x)))
    assert cfg.hidden_width == 171  # 2/3 of 4 x 64, rounded
    swiglu, mlp = (sum(p.numel() for p in f.parameters()) for f in (ffn, MLP(ModelConfig())))
    assert (swiglu, mlp) == (32_832, 33_088) and abs(swiglu - mlp) / mlp < 0.02
    whole = [parameter_counts(TinyLM(ModelConfig(ffn=kind), VOCAB))["total"] for kind in ("swiglu", "mlp")]
    assert abs(whole[0] - whole[1]) / whole[1] < 0.02


def test_an_mlp_without_its_projection_must_keep_the_width():
    with pytest.raises(ValueError, match="ffn_proj: false"):
        ModelConfig(ffn_proj=False, ffn_mult=4)
    x = torch.randn(3, 32)
    ffn = MLP(ModelConfig(d_model=32, ffn_mult=1, ffn_proj=False, activation="relu"))
    torch.testing.assert_close(ffn(x), torch.relu(ffn.widen(x)))


LADDER_PARAMETERS = {  # by hand, V = 65, width 32, context 8; q/k/v without bias
    "bigram": 65 * 65,
    "one_head": 65 * 32 + 8 * 32 + 32 * 96 + (32 * 65 + 65),
    "multi_head": 65 * 32 + 8 * 32 + 32 * 96 + (32 * 65 + 65),
    "ffn": 65 * 32 + 8 * 32 + 32 * 96 + (32 * 32 + 32) + (32 * 65 + 65),
    "blocks": 65 * 32 + 8 * 32 + 3 * (32 * 96 + 32 * 32 + 32) + (32 * 65 + 65),
    "residual": 65 * 32 + 8 * 32 + 3 * (32 * 96 + (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32)) + (32 * 65 + 65),
    "layernorm": 65 * 32 + 8 * 32 + 3 * (32 * 96 + (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32) + 2 * 64)
    + 64 + (32 * 65 + 65),
}


@pytest.fixture(scope="module")
def ladder():
    params = load_params(ROOT / "params.yaml")
    return {variant: params.spec("ladder", variant) for variant in params.ablations["ladder"].variants}


def test_the_ladder_has_the_lectures_rungs_with_their_parameter_counts(ladder):
    assert list(ladder) == list(LADDER_PARAMETERS)
    for rung, spec in ladder.items():
        assert parameter_counts(build_model(spec.model, VOCAB, seed=0))["total"] == LADDER_PARAMETERS[rung], rung
    heads = {rung: spec.model.n_heads for rung, spec in ladder.items() if rung != "bigram"}
    assert heads["one_head"] == 1 and all(n == 4 for rung, n in heads.items() if rung != "one_head")


def test_every_rung_builds_and_trains_a_few_steps_with_the_lecture_style_estimate(ladder):
    g = torch.Generator().manual_seed(0)
    train, val = torch.randint(0, VOCAB, (4000,), generator=g), torch.randint(0, VOCAB, (1000,), generator=g)
    for rung, spec in ladder.items():
        cfg = TrainConfig(**{**spec.train.__dict__, "steps": 3, "eval_interval": 3, "eval_windows": 16,
                             "eval_batches": 4})
        result = train_run(spec.model, cfg, 0, train, val, VOCAB)
        assert result.metrics["steps"] == 3 and result.metrics["val_loss_batches"] > 0, rung


def test_the_lecture_style_estimate_is_the_mean_of_the_batches_it_draws():
    model = build_model(ModelConfig(d_model=32, context=8, n_layers=1), VOCAB, seed=0)
    val = torch.randint(0, VOCAB, (500,), generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(7)
    losses = []
    with torch.no_grad():
        for _ in range(5):
            starts = torch.randint(0, len(val) - 8, (4,), generator=g)
            chunk = val[starts[:, None] + torch.arange(9)]
            losses.append(F.cross_entropy(model(chunk[:, :-1]).flatten(0, 1), chunk[:, 1:].flatten()).item())
    assert random_batches_loss(model, val, 8, 4, 5, seed=7) == pytest.approx(sum(losses) / 5, rel=1e-12)


def test_a_run_without_eval_batches_keeps_the_metrics_it_had():
    g = torch.Generator().manual_seed(0)
    train, val = torch.randint(0, VOCAB, (2000,), generator=g), torch.randint(0, VOCAB, (500,), generator=g)
    result = train_run(ModelConfig(d_model=32, context=8, n_layers=1), TrainConfig(steps=2, eval_windows=8), 0,
                       train, val, VOCAB)
    assert "val_loss_batches" not in result.metrics


def test_a_block_without_a_feed_forward_network_has_no_second_norm_or_residual():
    block = Block(ModelConfig(ffn="none"))
    assert block.ln2 is None and block.res2 is None
    assert sum(p.numel() for p in block.parameters()) == 16_640 + 128  # attention and one LayerNorm


def test_olmo2s_qk_norm_normalises_every_heads_queries_at_once_over_the_width():
    """OLMo 2's QK-norm: one RMSNorm over all heads' queries (and one over the keys), before they are split into
    heads; qk-layernorm's normalises each head's apart."""
    import torch

    from blocklab.run.model import CausalSelfAttention

    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    for over, normed in (("width", 16), ("head", 4)):
        attention = CausalSelfAttention(ModelConfig(d_model=16, n_heads=4, qk_norm="rmsnorm", qk_norm_over=over))
        assert attention.q_norm.weight.shape == (normed,)
        q, k, _ = attention.heads(x)
        joined = q.transpose(1, 2).reshape(2, 5, 16)
        rms_width = joined.pow(2).mean(-1).sqrt()
        rms_heads = q.pow(2).mean(-1).sqrt()
        if over == "width":
            assert torch.allclose(rms_width, torch.ones_like(rms_width), atol=1e-3)
            assert not torch.allclose(rms_heads, torch.ones_like(rms_heads), atol=1e-2)
        else:  # eps moves a 4-channel head's RMS by up to 1e-4
            assert torch.allclose(rms_heads, torch.ones_like(rms_heads), atol=2e-3)


def test_qk_norm_over_without_a_qk_norm_says_what_to_set():
    import pytest

    with pytest.raises(ValueError, match="with qk_norm: none there is none"):
        ModelConfig(qk_norm_over="width")
