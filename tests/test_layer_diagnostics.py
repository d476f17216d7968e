"""The residual stream's per-block diagnostics (blocklab.run.diagnostics): each value what a plain forward pass
through the blocks gives, recorded at every evaluation step of every run (layers.csv, metrics.json), and no
bit of training changed by reading them."""

from __future__ import annotations

import csv

import pytest
import torch
import torch.nn.functional as F

from blocklab.run.model import DyT, build_model
from blocklab.run.results import LAYER_COLUMNS, write_run
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.threads import torch_threads
from blocklab.run.training import evaluate_loss, train_run, validation_loss_and_probes

V = 11


def _windows(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    chunk = torch.randint(0, V, (40, 9), generator=torch.Generator().manual_seed(seed))
    return chunk[:, :-1], chunk[:, 1:]


@pytest.mark.parametrize("fields", [{"placement": "pre"}, {"placement": "post"}, {"placement": "peri"},
                                    {"norm_type": "dyt", "dyt_alpha": 4.0}])
def test_each_blocks_values_are_what_a_plain_forward_pass_gives(fields):
    model = build_model(ModelConfig(d_model=16, n_heads=2, n_layers=3, context=8, **fields), V, seed=0)
    x, y = _windows()
    rng = torch.random.get_rng_state()
    loss, _, layers = validation_loss_and_probes(model, x, y)
    assert torch.equal(torch.random.get_rng_state(), rng) and loss == evaluate_loss(model, x, y)
    with torch.no_grad():
        h = model.tok_emb(x) + model.pos_emb(torch.arange(8))
        h = h if model.emb_norm is None else model.emb_norm(h)
        for block, got in zip(model.blocks, layers, strict=True):
            dyts = [m for m in block.modules() if isinstance(m, DyT)]
            inputs = []
            handles = [m.register_forward_pre_hook(lambda m, i: inputs.append((m.alpha * i[0]).abs())) for m in dyts]
            out = block(h)
            for handle in handles:
                handle.remove()
            assert got["resid_rms"] == pytest.approx(out.pow(2).mean().sqrt().item(), rel=1e-5)
            assert got["resid_max_abs"] == pytest.approx(out.abs().max().item(), rel=1e-6)
            assert got["block_cos"] == pytest.approx(F.cosine_similarity(h, out, dim=-1).mean().item(), rel=1e-5)
            if dyts:
                saturated = sum((a > 2).sum().item() for a in inputs) / sum(a.numel() for a in inputs)
                assert got["dyt_saturated"] == pytest.approx(saturated) and 0 < saturated < 1
            else:
                assert got["dyt_saturated"] is None
            h = out


def test_every_run_records_each_blocks_values_at_each_evaluation_step(tmp_path):
    g = torch.Generator().manual_seed(1)
    train, val = torch.randint(0, V, (5000,), generator=g), torch.randint(0, V, (2000,), generator=g)
    with torch_threads(1):
        run = train_run(ModelConfig(d_model=16, n_heads=2, n_layers=3, context=8),
                        TrainConfig(steps=12, eval_interval=5, eval_windows=16, device="cpu"), 0, train, val, V)
    assert [(row["step"], row["layer"]) for row in run.layers] == [(s, l) for s in (4, 9, 11) for l in (1, 2, 3)]
    last = run.layers[-3:]
    assert run.metrics["resid_rms"] == [row["resid_rms"] for row in last]
    assert run.metrics["block_cos"] == [row["block_cos"] for row in last]
    assert run.metrics["resid_growth"] == pytest.approx(last[-1]["resid_rms"] / last[0]["resid_rms"])
    write_run(tmp_path, run, tokens_per_step=32)
    with open(tmp_path / "layers.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == LAYER_COLUMNS and len(rows) == 1 + 9 and rows[-1][-1] == ""  # no DyT: empty


@pytest.mark.parametrize("kind", ["bigram", "transformer"])
def test_mlflow_gets_each_blocks_history_and_a_blockless_model_none(tmp_path, kind):
    """A bigram has no blocks: its layers.csv is a header, and logging it to MLflow gives no metric (it once
    failed the whole run's logging)."""
    from blocklab.records import read_layers
    from blocklab.tools.tracking.payloads import layer_curve_metrics

    g = torch.Generator().manual_seed(1)
    train, val = torch.randint(0, V, (5000,), generator=g), torch.randint(0, V, (2000,), generator=g)
    with torch_threads(1):
        run = train_run(ModelConfig(kind=kind, d_model=16, n_heads=2, n_layers=2, context=8),
                        TrainConfig(steps=6, eval_interval=5, eval_windows=16, device="cpu"), 0, train, val, V)
    write_run(tmp_path, run, tokens_per_step=32)
    metrics = layer_curve_metrics(read_layers(tmp_path), 1_000, 2_000)
    if kind == "bigram":
        assert metrics == []
        return
    names = {m.key for m in metrics}
    assert {"resid_rms_l1", "resid_rms_l2", "block_cos_l2", "resid_max_abs_l1"} <= names
    assert not any(n.startswith("dyt_saturated") for n in names)  # no DyT, no empty values logged
    assert sorted({m.step for m in metrics}) == [4, 5] and all(1_000 <= m.timestamp <= 2_000 for m in metrics)


def test_a_skipped_blocks_loss_is_the_loss_of_the_model_without_it_and_reading_it_changes_no_bit(tmp_path):
    """layer_skip (Sun et al. 2025's fig. 1): per block, the validation loss with the block's output its input,
    less the whole model's, in metrics.json; the run's every other number is the one it has without it."""
    from blocklab.run.training import skipped_block_losses

    g = torch.Generator().manual_seed(1)
    train, val = torch.randint(0, V, (5000,), generator=g), torch.randint(0, V, (2000,), generator=g)
    cfg = ModelConfig(d_model=16, n_heads=2, n_layers=3, context=8)
    runs = {}
    with torch_threads(1):
        for skip in (False, True):
            runs[skip] = train_run(cfg, TrainConfig(steps=12, eval_interval=5, eval_windows=16, device="cpu",
                                                    layer_skip=skip), 0, train, val, V)
    without, measured = runs[False].metrics, runs[True].metrics
    deltas = measured.pop("skip_loss_delta")
    assert "skip_loss_delta" not in without and measured == without and runs[True].curve == runs[False].curve
    assert len(deltas) == 3 and all(isinstance(d, float) for d in deltas)

    model = build_model(cfg, V, seed=0)
    x, y = _windows()
    losses = skipped_block_losses(model, x, y)
    for skipped, loss in enumerate(losses):
        kept = torch.nn.Sequential(*(b for i, b in enumerate(model.blocks) if i != skipped))
        whole, model.blocks = model.blocks, kept
        assert loss == pytest.approx(evaluate_loss(model, x, y), rel=1e-6)
        model.blocks = whole
    assert evaluate_loss(model, x, y) not in losses  # the hooks are gone: the whole model again
