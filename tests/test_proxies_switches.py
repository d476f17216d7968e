"""Wortsman et al.'s switches (qk-layernorm, z-loss, weight decay coupled or independent, mup) and the
diagnostics every run records: each does what its paper says, and off, changes nothing."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.model import CausalSelfAttention, build_model, learning_rate_multipliers
from blocklab.run.optimizer import AdamW
from blocklab.run.threads import torch_threads
from blocklab.run.training import evaluate_loss, loss_and_gradients, train_run, validation_loss_and_probes

V = 65


def _batch(seed: int = 0, batch: int = 8, context: int = 32) -> torch.Tensor:
    return torch.randint(0, V, (batch, context + 1), generator=torch.Generator().manual_seed(seed))


def test_the_diagnostics_draw_no_random_numbers_and_change_no_bit_of_the_validation_loss():
    model = build_model(ModelConfig(n_layers=2), V, seed=0)
    chunk = _batch(batch=64)
    x, y = chunk[:, :-1], chunk[:, 1:]
    rng = torch.random.get_rng_state()
    plain = evaluate_loss(model, x, y)
    loss, probes, _ = validation_loss_and_probes(model, x, y)
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert loss == plain  # the same bits
    with torch.no_grad():  # the largest attention logit, by hand: q.k / sqrt(d_head) under the causal mask
        h, largest = model.tok_emb(x) + model.pos_emb(torch.arange(32)), -math.inf
        for block in model.blocks:
            q, k, _ = block.attn.qkv(block.ln1(h)).split(64, dim=2)
            q, k = (t.view(64, 32, 4, 16).transpose(1, 2) for t in (q, k))
            scores = (q @ k.transpose(-2, -1)) / 4.0
            largest = max(largest, scores.masked_fill(torch.ones(32, 32).triu(1).bool(), -math.inf).max().item())
            h = block(h)
        log_z = torch.logsumexp(model(x).double(), dim=-1).mean().item()
    assert probes["attn_logit_max"] == pytest.approx(largest, rel=1e-6)
    assert probes["logit_log_z"] == pytest.approx(log_z, rel=1e-9)


def test_every_run_records_the_diagnostics_at_its_evaluation_steps_only():
    g = torch.Generator().manual_seed(1)
    train, val = torch.randint(0, V, (5000,), generator=g), torch.randint(0, V, (2000,), generator=g)
    with torch_threads(1):
        run = train_run(ModelConfig(n_layers=1), TrainConfig(steps=12, eval_interval=5, device="cpu"), 0, train, val, V)
    evaluated = [row["step"] for row in run.curve if row["attn_logit_max"] is not None]
    assert evaluated == [row["step"] for row in run.curve if row["val_loss"] is not None] == [4, 9, 11]
    assert run.metrics["attn_logit_max"] == run.curve[-1]["attn_logit_max"] > 0
    assert run.metrics["logit_log_z"] == run.curve[-1]["logit_log_z"]


def test_qk_layernorm_bounds_every_attention_logit_by_the_square_root_of_the_head_size():
    """A LayerNorm with unit gain gives each head's query and key the norm sqrt(d_head): |q.k| / sqrt(d_head)
    <= sqrt(d_head), however large the projections grow (Dehghani et al. 2023). Without it, they grow with them."""
    x = torch.randn(4, 16, 64)
    for qk_norm, bound in (("layernorm", 4.0), ("rmsnorm", 4.0)):
        attention = CausalSelfAttention(ModelConfig(qk_norm=qk_norm))
        with torch.no_grad():
            attention.qkv.weight.mul_(100)
            assert attention.logits(x).max().item() <= bound + 1e-4
    plain = CausalSelfAttention(ModelConfig())
    with torch.no_grad():
        small = plain.logits(x).max().item()
        plain.qkv.weight.mul_(100)
        assert plain.logits(x).max().item() > 1000 * small


def test_qk_norm_off_creates_no_module_and_mup_at_the_base_width_is_the_standard_model():
    standard = build_model(ModelConfig(n_layers=2), V, seed=3)
    assert not any("q_norm" in name or "k_norm" in name for name, _ in standard.named_parameters())
    mup = build_model(ModelConfig(n_layers=2, parametrization="mup"), V, seed=3)  # base_width 64 = d_model
    assert [n for n, _ in mup.named_parameters()] == [n for n, _ in standard.named_parameters()]
    assert all(torch.equal(a, b) for a, b in zip(mup.parameters(), standard.parameters()))
    x = _batch()[:, :-1]
    assert torch.allclose(mup(x), standard(x), atol=1e-6, rtol=0)
    assert learning_rate_multipliers(mup) is None or set(learning_rate_multipliers(mup)) == {1.0}


def test_mup_scales_the_hidden_matrices_learning_rate_and_the_logits_by_the_width_multiplier():
    model = build_model(ModelConfig(d_model=256, n_layers=1, parametrization="mup"), V, seed=0)  # m = 4
    multipliers = dict(zip((n for n, _ in model.named_parameters()), learning_rate_multipliers(model)))
    hidden = {n for n in multipliers if n.startswith("blocks.") and n.endswith(".weight") and ("attn." in n or "ffn." in n)}
    assert hidden == {"blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight", "blocks.0.ffn.widen.weight",
                      "blocks.0.ffn.narrow.weight"}
    assert all(multipliers[n] == 0.25 for n in hidden)
    assert all(m == 1.0 for n, m in multipliers.items() if n not in hidden)  # embeddings, biases, norms, readout
    h = torch.randn(2, 5, 256)
    assert torch.allclose(model.head(h), F.linear(h, model.head.weight, model.head.bias) / 4)
    assert model.blocks[0].attn.scale == pytest.approx(16 ** 0.5 / 64)  # sqrt(d_head at width 64) / d_head


def _coordinates_change(width: int, parametrization: str, steps: int = 5, lr: float = 0.01) -> list[float]:
    """The coordinate check: after a few Adam steps, the mean |change| of each block's output and of the output
    logits on a fixed batch."""
    model = build_model(ModelConfig(d_model=width, n_layers=2, n_heads=4, parametrization=parametrization), V, 0)
    params = list(model.parameters())
    optimizer = AdamW(params, lr=lr, lr_multipliers=learning_rate_multipliers(model))
    probe = _batch(seed=99)[:, :-1]

    @torch.no_grad()
    def coordinates() -> list[torch.Tensor]:
        h, seen = model.tok_emb(probe) + model.pos_emb(torch.arange(probe.shape[1])), []
        for block in model.blocks:
            h = block(h)
            seen.append(h)
        return seen + [model(probe)]

    before = coordinates()
    for step in range(steps):
        optimizer.zero_grad()
        loss_and_gradients(model, params, _batch(seed=step))
        optimizer.step()
    return [(after - then).abs().mean().item() for after, then in zip(coordinates(), before)]


def test_coordinate_check_activations_change_grows_with_width_under_standard_and_not_under_mup():
    """Yang et al.'s coordinate check: after a few steps at one learning rate, how far each block's output and
    the logits moved, at widths 64 to 512. Under the standard parametrisation Adam moves every weight by
    about the learning rate whatever the width, so activations move more the wider the model; under mup each
    block's output moves alike at every width (the logits settle as the readout's initial share fades)."""
    widths = [64, 128, 256, 512]
    with torch_threads(1):
        standard = [_coordinates_change(w, "standard") for w in widths]
        mup = [_coordinates_change(w, "mup") for w in widths]
    print(f"\nchange after 5 steps (block 1, block 2, logits), widths {widths}:\n  standard "
          f"{[[round(v, 3) for v in c] for c in standard]}\n  mup {[[round(v, 3) for v in c] for c in mup]}")
    for layer in (0, 1):
        assert standard[-1][layer] / standard[0][layer] > 10  # grows with width (8x the width)
        assert all(0.8 < c[layer] / mup[0][layer] < 1.25 for c in mup)  # flat
    assert standard[-1][2] / standard[0][2] > 3 and mup[-1][2] / mup[0][2] < 1.25


def test_z_loss_adds_palms_term_to_the_gradients_and_nothing_to_the_reported_loss():
    chunk = _batch()
    plain = build_model(ModelConfig(n_layers=1), V, seed=0)
    zed = build_model(ModelConfig(n_layers=1), V, seed=0)
    loss, _ = loss_and_gradients(plain, list(plain.parameters()), chunk)
    z_loss, _ = loss_and_gradients(zed, list(zed.parameters()), chunk, z_loss=0.5)
    assert z_loss == loss
    by_hand = build_model(ModelConfig(n_layers=1), V, seed=0)
    logits = by_hand(chunk[:, :-1])
    total = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten()) + 0.5 * torch.logsumexp(logits, -1).pow(2).mean()
    total.backward()
    assert all(torch.allclose(a.grad, b.grad, atol=1e-6) for a, b in zip(zed.parameters(), by_hand.parameters()))
    assert not all(torch.allclose(a.grad, b.grad) for a, b in zip(zed.parameters(), plain.parameters()))


@pytest.mark.parametrize("independent", [False, True], ids=["coupled", "independent"])
def test_weight_decay_is_coupled_to_the_learning_rate_or_independent_of_it(independent):
    """With zero gradients Adam's update is zero and only the decay moves a weight: by lr x wd (AdamW), or
    by wd times the schedule's ramp lr / peak_lr, whatever the rate's size (independent)."""
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = AdamW([weight], lr=0.5, weight_decay=0.1, independent_weight_decay=independent, peak_lr=2.0)
    weight.grad = torch.zeros(3)
    optimizer.step()
    expected = 1 - (0.1 * 0.5 / 2.0 if independent else 0.5 * 0.1)
    assert torch.equal(weight.detach(), torch.full((3,), expected))


def test_the_switches_are_validated_fields_off_by_default():
    from blocklab.params.problems import ParamsError
    from blocklab.params.schema import _replace_checked

    assert (ModelConfig().qk_norm, ModelConfig().parametrization, TrainConfig().z_loss) == ("none", "standard", 0.0)
    assert (TrainConfig().weight_decay, TrainConfig().independent_weight_decay) == (0.01, False)
    with pytest.raises(ParamsError, match="qk_norm"):
        _replace_checked(ModelConfig(), {"qk_norm": "batchnorm"}, "maps.proxies")
    with pytest.raises(ParamsError, match="z_loss"):
        _replace_checked(TrainConfig(), {"z_loss": -1e-4}, "maps.proxies")
    with pytest.raises(ParamsError, match="base_width"):
        _replace_checked(ModelConfig(), {"parametrization": "mup", "base_width": 30}, "maps.proxies")
    assert replace(ModelConfig(d_model=128, parametrization="mup"), base_width=32).width_multiplier == 4
