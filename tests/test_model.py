import math

import pytest
import torch
import torch.nn as nn
from pydantic import ValidationError

from blocklab.config import ModelConfig
from blocklab.model import MLP, Block, TinyLM, build_model, parameter_counts

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
    pre = TinyLM(ModelConfig(norm="pre"), VOCAB)
    post = TinyLM(ModelConfig(norm="post"), VOCAB)
    assert isinstance(pre.ln_f, nn.LayerNorm)
    assert isinstance(post.ln_f, nn.Identity)
    assert parameter_counts(pre)["total"] - parameter_counts(post)["total"] == 128


def _block_with(norm: str, residual: bool) -> Block:
    torch.manual_seed(0)
    block = Block(ModelConfig(norm=norm, residual=residual))
    # Give the norms a non-trivial affine map so that a mis-wired norm would show.
    with torch.no_grad():
        for ln in (block.ln1, block.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    return block


@pytest.mark.parametrize("norm, residual", [("pre", True), ("pre", False), ("post", True), ("post", False)])
def test_block_wiring_is_the_lessons(norm, residual):
    block = _block_with(norm, residual)
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


def _gradients(model: TinyLM, threads: int) -> dict[str, torch.Tensor]:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        idx = torch.randint(0, VOCAB, (32, 33), generator=g)
        model.zero_grad(set_to_none=True)
        logits = model(idx[:, :-1])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten()).backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_one_thread_summing_as_two_threads_gives_the_two_thread_gradients_bitwise(norm):
    """By one of the recipes: the norms' gradients summed in two blocks (enough on an AMD EPYC), or the
    matrix products' weight gradients too (an AVX-512 Xeon, whose MKL splits their rows between threads)."""
    from blocklab.rounding import RoundLike

    model = build_model(ModelConfig(norm=norm), VOCAB, 0)
    two_threads = _gradients(model, 2)
    one_thread = _gradients(model, 1)
    norms = [name for name in two_threads if ".ln" in name]
    # What the emulation is for: ATen's LayerNorm sums these per thread, so one thread rounds otherwise.
    assert any(not torch.equal(one_thread[name], two_threads[name]) for name in norms)
    emulated = [_gradients(RoundLike(2, products).apply(build_model(ModelConfig(norm=norm), VOCAB, 0)), 1)
                for products in (False, True)]
    assert any(all(torch.equal(e[name], two_threads[name]) for name in two_threads) for e in emulated)


def test_a_product_summed_in_row_blocks_has_the_blocks_weight_gradient_and_the_same_output():
    from blocklab.rounding import BlockwiseLinear

    g = torch.Generator().manual_seed(0)
    linear = nn.Linear(8, 5)
    x = torch.randn(3, 6, 8, generator=g, requires_grad=True)
    dy = torch.randn(3, 6, 5, generator=g)
    plain = linear(x)
    plain.backward(dy)
    expected = {"x": x.grad.clone(), "bias": linear.bias.grad.clone(), "weight": linear.weight.grad.clone()}
    x.grad, linear.weight.grad, linear.bias.grad = None, None, None
    linear.__class__, linear.row_blocks = BlockwiseLinear, 2
    out = linear(x)
    out.backward(dy)
    assert torch.equal(out, plain)
    assert torch.equal(x.grad, expected["x"]) and torch.equal(linear.bias.grad, expected["bias"])
    rows, grads = x.detach().reshape(18, 8), dy.reshape(18, 5)
    assert torch.equal(linear.weight.grad, (rows[:9].t() @ grads[:9] + rows[9:].t() @ grads[9:]).t())
    assert torch.allclose(linear.weight.grad, expected["weight"], atol=1e-6)


def test_rezero_summed_in_blocks_has_the_blocks_alpha_gradient_and_the_same_output():
    from blocklab.model import Residual
    from blocklab.rounding import BlockwiseReZero

    g = torch.Generator().manual_seed(0)
    residual = Residual(ModelConfig(residual="rezero", norm_type="none"))
    with torch.no_grad():
        residual.alpha.fill_(0.3)
    x, y = torch.randn(2, 4, 8, generator=g), torch.randn(2, 4, 8, generator=g, requires_grad=True)
    dy = torch.randn(2, 4, 8, generator=g)
    plain = residual(x, y)
    plain.backward(dy)
    expected_y = y.grad.clone()
    y.grad, residual.alpha.grad = None, None
    residual.__class__, residual.row_blocks = BlockwiseReZero, 2
    out = residual(x, y)
    out.backward(dy)
    products = (dy * y.detach()).reshape(-1)
    assert torch.equal(out, plain) and torch.equal(y.grad, expected_y)
    assert torch.equal(residual.alpha.grad, products[:32].sum() + products[32:].sum())


def test_summing_norm_gradients_in_blocks_leaves_the_forward_pass_and_evaluation_unchanged():
    from blocklab.rounding import sum_norm_gradients_like

    model = build_model(ModelConfig(n_layers=2), VOCAB, 0)
    idx = torch.randint(0, VOCAB, (4, 32), generator=torch.Generator().manual_seed(1))
    plain = model(idx)
    with torch.no_grad():
        plain_eval = model(idx)
    sum_norm_gradients_like(model, 3)
    assert torch.equal(model(idx), plain)
    with torch.no_grad():
        assert torch.equal(model(idx), plain_eval)
