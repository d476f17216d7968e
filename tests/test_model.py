
import pytest
import torch
import torch.nn as nn
from pydantic import ValidationError

from blocklab.run.settings import ModelConfig
from blocklab.run.model import MLP, Block, TinyLM, build_model, parameter_counts

VOCAB = 65


@pytest.mark.parametrize(
    "n_layers, expected", [(1, 60_545), (3, 160_513), (6, 310_465), (12, 610_369), (24, 1_210_177)]
)
def test_parameter_counts_by_depth_match_the_lesson(n_layers, expected):
    model = TinyLM(ModelConfig(n_layers=n_layers), VOCAB)
    assert parameter_counts(model)["total"] == expected


def test_one_block_has_49984_parameters_with_33088_in_the_feed_forward_network():
    block = Block(ModelConfig())
    total = sum(p.numel() for p in block.parameters())
    assert total == 49_984
    assert sum(p.numel() for p in block.ffn.parameters()) == 33_088
    assert sum(p.numel() for p in block.attn.parameters()) == 16_640
    assert sum(p.numel() for m in (block.ln1, block.ln2) for p in m.parameters()) == 256


def test_parameter_shares_add_up_and_feed_forward_dominates_at_4x():
    counts = parameter_counts(TinyLM(ModelConfig(n_layers=6), VOCAB))
    assert counts["attention"] + counts["feed_forward"] + counts["other"] == counts["total"]
    assert counts["feed_forward"] == 6 * 33_088 and counts["attention"] == 6 * 16_640
    assert counts["feed_forward"] / counts["total"] > 0.5


def test_post_norm_has_no_final_layernorm_and_pre_norm_has_one():
    pre = TinyLM(ModelConfig(placement="pre"), VOCAB)
    post = TinyLM(ModelConfig(placement="post"), VOCAB)
    assert isinstance(pre.ln_f, nn.LayerNorm)
    assert isinstance(post.ln_f, nn.Identity)
    assert parameter_counts(pre)["total"] - parameter_counts(post)["total"] == 128


def _block_with(norm: str, residual: str) -> Block:
    torch.manual_seed(0)
    block = Block(ModelConfig(placement=norm, residual=residual))
    # Give the norms a non-trivial affine map so that a mis-wired norm would show.
    with torch.no_grad():
        for ln in (block.ln1, block.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    return block


@pytest.mark.parametrize("norm, residual", [("pre", "plain"), ("pre", "none"), ("post", "plain"), ("post", "none")])
def test_block_wiring_is_the_lessons(norm, residual):
    block = _block_with(norm, residual)
    residual = residual == "plain"
    x = torch.randn(2, 8, 64)
    a, f, ln1, ln2 = block.attn, block.ffn, block.ln1, block.ln2
    if norm == "pre" and residual:
        h = x + a(ln1(x)); expected = h + f(ln2(h))
    elif norm == "pre":
        expected = f(ln2(a(ln1(x))))
    elif residual:
        h = ln1(x + a(x)); expected = ln2(h + f(h))
    else:
        expected = ln2(f(ln1(a(x))))
    torch.testing.assert_close(block(x), expected)


def test_attention_is_causal():
    model = TinyLM(ModelConfig(n_layers=2), VOCAB)
    idx = torch.randint(0, VOCAB, (1, 16))
    changed = idx.clone()
    changed[0, 10:] = (changed[0, 10:] + 1) % VOCAB
    torch.testing.assert_close(model(idx)[0, :10], model(changed)[0, :10])


def test_same_seed_builds_the_same_model_and_the_creation_order_is_the_lessons():
    a, b = build_model(ModelConfig(), VOCAB, seed=3), build_model(ModelConfig(), VOCAB, seed=3)
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), name
    names = [n for n, _ in a.named_parameters()]
    assert names[:2] == ["tok_emb.weight", "pos_emb.weight"]
    assert names[2:14] == [
        "blocks.0.ln1.weight", "blocks.0.ln1.bias", "blocks.0.ln2.weight", "blocks.0.ln2.bias",
        "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias",
        "blocks.0.ffn.widen.weight", "blocks.0.ffn.widen.bias", "blocks.0.ffn.narrow.weight", "blocks.0.ffn.narrow.bias",
    ]
    assert names[-4:] == ["ln_f.weight", "ln_f.bias", "head.weight", "head.bias"]


def test_layernorm_of_2_minus1_4_3_is_the_lessons():
    out = nn.functional.layer_norm(torch.tensor([2.0, -1.0, 4.0, 3.0]), (4,))
    torch.testing.assert_close(out, torch.tensor([0.0, -1.6036, 1.069, 0.5345]), atol=1e-4, rtol=0)


def test_gelu_of_minus_one_is_minus_0_1587_and_relu_is_zero():
    assert nn.GELU()(torch.tensor(-1.0)).item() == pytest.approx(-0.1587, abs=1e-4)
    assert nn.ReLU()(torch.tensor(-1.0)).item() == 0.0


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_feed_forward_gives_the_same_result_token_by_token_as_on_the_whole_sequence(activation):
    torch.manual_seed(0)
    ffn = MLP(ModelConfig(activation=activation))
    x = torch.randn(2, 12, 64)
    token_by_token = torch.stack([ffn(x[:, t]) for t in range(12)], dim=1)
    torch.testing.assert_close(ffn(x), token_by_token)


def test_heads_must_divide_the_width():
    with pytest.raises(ValidationError, match="n_heads=5 must divide d_model=64"):
        ModelConfig(n_heads=5)


def test_feed_forward_multiplier_sets_the_hidden_width():
    ffn = MLP(ModelConfig(d_model=32, ffn_mult=8))
    assert ffn.widen.out_features == 256 and ffn.narrow.in_features == 256
    assert sum(p.numel() for p in ffn.parameters()) == 2 * 32 * 256 + 256 + 32
