import json
import math

import pytest
import torch

from blocklab.errors import BlocklabError
from blocklab.run.model import planned_flops_per_token
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.training import learning_rate, train_run, validation_windows

SMALL_MODEL = ModelConfig(d_model=16, n_heads=2, n_layers=1, context=8)


def corpus(n: int = 4000, vocab: int = 11):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (n,), generator=g), torch.randint(0, vocab, (n // 4,), generator=g), vocab


def test_linear_warmup_reaches_the_full_rate_at_the_warmup_step_and_stays():
    cfg = TrainConfig(lr=1e-2, warmup=100)
    assert learning_rate(cfg, 0) == pytest.approx(1e-4)
    assert learning_rate(cfg, 49) == pytest.approx(5e-3)
    assert learning_rate(cfg, 99) == pytest.approx(1e-2)
    assert learning_rate(cfg, 200) == pytest.approx(1e-2)


def test_no_warmup_means_a_constant_rate():
    cfg = TrainConfig(lr=3e-3, warmup=0)
    assert {learning_rate(cfg, s) for s in range(50)} == {3e-3}


def test_same_seed_gives_an_identical_curve_and_another_seed_does_not():
    train, val, vocab = corpus()
    cfg = TrainConfig(steps=30, lr=1e-2, batch_size=4, eval_interval=10, eval_windows=8, device="cpu")
    a = train_run(SMALL_MODEL, cfg, 0, train, val, vocab)
    b = train_run(SMALL_MODEL, cfg, 0, train, val, vocab)
    c = train_run(SMALL_MODEL, cfg, 1, train, val, vocab)
    assert a.curve == b.curve and a.metrics == b.metrics
    assert a.curve != c.curve


def test_curve_has_a_row_per_step_with_validation_at_evaluation_steps():
    train, val, vocab = corpus()
    cfg = TrainConfig(steps=25, lr=1e-2, batch_size=4, warmup=10, eval_interval=10, eval_windows=8, device="cpu")
    result = train_run(SMALL_MODEL, cfg, 0, train, val, vocab)
    assert [r["step"] for r in result.curve] == list(range(25))
    assert [r["step"] for r in result.curve if r["val_loss"] is not None] == [9, 19, 24]
    assert [r["lr"] for r in result.curve[:3]] == pytest.approx([1e-3, 2e-3, 3e-3])
    last = [r["loss"] for r in result.curve[-25:]]
    assert result.metrics["train_loss_last25"] == pytest.approx(sum(last) / 25)
    assert result.metrics["val_loss"] == result.curve[-1]["val_loss"]
    assert result.metrics["max_grad_norm"] == max(r["grad_norm"] for r in result.curve)


def test_learning_lowers_the_loss_below_uniform():
    train, val, vocab = corpus()
    # A learnable sequence: the next id is the current one plus one.
    train = torch.arange(4000) % vocab
    cfg = TrainConfig(steps=60, lr=1e-2, batch_size=8, eval_interval=60, eval_windows=8, device="cpu")
    result = train_run(SMALL_MODEL, cfg, 0, train, train[:500], vocab)
    assert result.curve[0]["loss"] > 2.0 and result.metrics["train_loss_last25"] < 0.5


def test_validation_sample_is_fixed_and_spread_over_the_split():
    val = torch.arange(1000)
    x, y = validation_windows(val, context=10, count=5)
    assert x[:, 0].tolist() == [0, 247, 494, 741, 989]
    assert torch.equal(y, x + 1)


def test_validation_split_shorter_than_the_context_is_a_clear_error():
    with pytest.raises(BlocklabError, match="validation split has 8 characters, fewer than context"):
        validation_windows(torch.arange(8), context=16, count=4)


def test_an_absurd_learning_rate_diverges_and_the_run_stops_there_with_finite_metrics():
    train, val, vocab = corpus()
    cfg = TrainConfig(steps=200, lr=1e6, batch_size=4, eval_interval=50, eval_windows=8, device="cpu")
    result = train_run(ModelConfig(d_model=16, n_heads=2, n_layers=2, context=8, placement="post"), cfg, 0, train, val,
                       vocab)
    m = result.metrics
    assert m["diverged"] is True and m["diverged_at_step"] is not None
    assert m["steps"] == m["diverged_at_step"] + 1 == len(result.curve) < 200
    assert all(v is None or math.isfinite(v) for v in (m["train_loss_last25"], m["val_loss"], m["max_grad_norm"]))
    json.dumps(m, allow_nan=False)  # valid JSON: no NaN
    per_token = planned_flops_per_token(ModelConfig(d_model=16, n_heads=2, n_layers=2, context=8, placement="post"), vocab)
    assert m["training_flops"] == per_token * cfg.batch_size * 8 * m["steps"]  # the steps it trained, not the plan's


def test_a_healthy_run_is_not_marked_diverged():
    train, val, vocab = corpus()
    cfg = TrainConfig(steps=10, lr=1e-3, batch_size=4, eval_interval=5, eval_windows=8, device="cpu")
    m = train_run(SMALL_MODEL, cfg, 0, train, val, vocab).metrics
    assert m["diverged"] is False and m["diverged_at_step"] is None and m["steps"] == 10
    assert m["training_flops"] == planned_flops_per_token(SMALL_MODEL, vocab) * 10 * cfg.batch_size * SMALL_MODEL.context


def test_an_interrupted_long_run_resumes_from_its_checkpoint_to_the_uninterrupted_curve(tmp_path, monkeypatch):
    from blocklab.run import training

    train, val, vocab = corpus()
    cfg = TrainConfig(steps=30, lr=1e-2, batch_size=4, eval_interval=5, eval_windows=8, device="cpu",
                      checkpoint_every=10)
    uninterrupted = train_run(SMALL_MODEL, cfg, 0, train, val, vocab)
    checkpoint = tmp_path / "seed0.pt"
    save = training.Checkpoints.save

    def save_then_crash(self, step, *state):  # the process dies right after its second checkpoint
        save(self, step, *state)
        if step == 20:
            raise KeyboardInterrupt

    monkeypatch.setattr(training.Checkpoints, "save", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        train_run(SMALL_MODEL, cfg, 0, train, val, vocab, checkpoint=checkpoint)
    monkeypatch.undo()
    assert torch.load(checkpoint, weights_only=False)["step"] == 20

    resumed = train_run(SMALL_MODEL, cfg, 0, train, val, vocab, checkpoint=checkpoint)
    assert resumed.resumed_from == 20  # not a restart from step 0 that happens to give the same curve
    assert resumed.curve == uninterrupted.curve and resumed.metrics == uninterrupted.metrics
    assert not checkpoint.exists()
    assert uninterrupted.resumed_from == 0


def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path):
    train, val, vocab = corpus()
    checkpoint = tmp_path / "seed0.pt"
    cfg = TrainConfig(steps=30, lr=1e-2, batch_size=4, eval_interval=5, eval_windows=8, device="cpu",
                      checkpoint_every=10)
    other = TrainConfig(steps=30, lr=5e-3, batch_size=4, eval_interval=5, eval_windows=8, device="cpu",
                        checkpoint_every=10)
    torch.save({"fingerprint": {"other": True}, "step": 20}, checkpoint)
    fresh = train_run(SMALL_MODEL, cfg, 0, train, val, vocab, checkpoint=checkpoint)
    assert fresh.resumed_from == 0
    assert fresh.curve == train_run(SMALL_MODEL, cfg, 0, train, val, vocab).curve
    assert fresh.curve != train_run(SMALL_MODEL, other, 0, train, val, vocab).curve


def test_a_written_run_reads_back_with_its_curve_and_metrics(tmp_path):
    from blocklab.records import read_curve, read_metrics, read_timing
    from blocklab.run.results import write_run

    train, val, vocab = corpus()
    cfg = TrainConfig(steps=12, batch_size=4, eval_interval=5, eval_windows=8, device="cpu")
    result = train_run(SMALL_MODEL, cfg, 0, train, val, vocab)
    write_run(tmp_path / "seed0", result, tokens_per_step=4 * SMALL_MODEL.context)
    curve = read_curve(tmp_path / "seed0")
    assert list(curve.columns) == ["step", "loss", "grad_norm", "lr", "val_loss", "attn_logit_max", "logit_log_z"]
    assert curve["loss"].tolist() == [row["loss"] for row in result.curve]  # floats survive exactly
    assert curve["val_loss"].notna().tolist() == [row["val_loss"] is not None for row in result.curve]
    assert curve["attn_logit_max"].notna().tolist() == [row["val_loss"] is not None for row in result.curve]
    assert read_metrics(tmp_path / "seed0") == result.metrics
    assert read_timing(tmp_path / "seed0")["seconds"] == result.seconds


def test_a_checkpoint_is_read_onto_the_cpu_so_its_batch_generator_resumes_whatever_device_trains(tmp_path):
    """The batches are drawn by a CPU generator, whose `set_state` takes only a CPU tensor: reading a
    checkpoint with `map_location=<the training device>` (cuda) moved that state off the CPU."""
    from blocklab.run.training import load_checkpoint

    generator = torch.Generator().manual_seed(3)
    generator.manual_seed(3)
    torch.save({"generator": generator.get_state(), "losses": torch.ones(3)}, tmp_path / "seed0.pt")
    saved = load_checkpoint(tmp_path / "seed0.pt")
    assert saved["generator"].device.type == "cpu" and saved["losses"].device.type == "cpu"
    resumed = torch.Generator()
    resumed.set_state(saved["generator"])
    assert torch.equal(torch.randint(0, 100, (5,), generator=resumed), torch.randint(0, 100, (5,), generator=generator))
