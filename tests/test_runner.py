"""Many runs side by side (blocklab.runner): equal to runs alone, never hanging, never waiting forever."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import torch

from blocklab.config import ModelConfig, TrainConfig
from blocklab.rounding import RoundLike
from blocklab.runner import _one_step_and_evaluation, thread_checks_file, threads_per_worker, train_seeds
from blocklab.training import train_run

SMALL_MODEL = ModelConfig(d_model=16, n_heads=2, n_layers=1, context=8)
HANG_TIMEOUT = 300  # seconds: ten times what the runs below take here; a deadlocked worker never finishes


def corpus(n: int = 4000, vocab: int = 11):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (n,), generator=g), torch.randint(0, vocab, (n // 4,), generator=g), vocab


@pytest.mark.parametrize("model_cfg, vocab", [
    (SMALL_MODEL, 11),  # small shapes
    (ModelConfig(n_layers=2, norm="post"), 65),  # the lesson's sizes
    (ModelConfig(n_layers=2, residual="rezero", norm_type="none"), 65),  # ReZero: its alpha's gradient is a sum
])
def test_seeds_trained_side_by_side_equal_seeds_trained_alone(model_cfg, vocab):
    train, val, vocab = corpus(vocab=vocab)
    cfg = TrainConfig(steps=15, lr=1e-2, batch_size=32, eval_interval=5, eval_windows=64, device="cpu")
    together = train_seeds(model_cfg, cfg, [0, 1, 2], train, val, vocab)
    for seed in (0, 1, 2):
        alone = train_run(model_cfg, cfg, seed, train, val, vocab)
        assert together[seed].curve == alone.curve and together[seed].metrics == alone.metrics


def rounds_alike_with_one_thread(model_cfg, cfg, vocab) -> bool:
    """What the check decides from, computed here directly: a step and an evaluation with one thread
    (summing as the default would, by either recipe) against the same with the default thread count."""
    threads = torch.get_num_threads()
    alone = _one_step_and_evaluation(model_cfg, cfg, vocab, threads, round_like=None)
    return any(all(torch.equal(a, b) for a, b in zip(alone, _one_step_and_evaluation(
        model_cfg, cfg, vocab, 1, round_like=RoundLike(threads, products)))) for products in (False, True))


def test_side_by_side_workers_get_one_thread_each_only_where_that_rounds_as_the_default():
    """Which shapes round alike is up to the CPU and its BLAS (the lesson's do on an AMD EPYC, not on an
    AVX-512 Xeon): the share is one thread exactly where a step computed both ways is bitwise equal."""
    if torch.get_num_threads() < 2:
        pytest.skip("needs torch's default thread count to be at least 2")
    threads = torch.get_num_threads()
    cfg = TrainConfig(batch_size=32, eval_windows=64)
    model = ModelConfig(n_layers=2)
    expected = 1 if rounds_alike_with_one_thread(model, cfg, 65) else threads
    assert threads_per_worker(model, cfg, 65, workers=threads).threads == expected
    assert threads_per_worker(model, cfg, 65, workers=1).threads == threads


def test_a_thread_check_verdict_is_kept_and_decides_for_the_same_shapes_next_time(tmp_path, monkeypatch):
    if torch.get_num_threads() < 2:
        pytest.skip("needs torch's default thread count to be at least 2")
    monkeypatch.setenv("BLOCKLAB_CACHE_DIR", str(tmp_path))
    threads = torch.get_num_threads()
    cfg = TrainConfig(batch_size=32, eval_windows=64)
    measured = threads_per_worker(ModelConfig(n_layers=2), cfg, 65, workers=threads).threads
    checks = json.loads(thread_checks_file().read_text())
    (entry,) = checks.values()
    assert entry["rounds_alike"] is (measured == 1) and entry["checked"]["vocab"] == 65
    entry["rounds_alike"], entry["products"] = not entry["rounds_alike"], True  # on file decides, unchecked
    thread_checks_file().write_text(json.dumps(checks))
    kept = threads_per_worker(ModelConfig(n_layers=2), cfg, 65, workers=threads)
    assert kept.threads == (threads if measured == 1 else 1)
    assert kept.round_like == (None if measured == 1 else RoundLike(threads, products=True))
    threads_per_worker(ModelConfig(n_layers=1), cfg, 65, workers=threads)  # other shapes: checked, and kept
    assert len(json.loads(thread_checks_file().read_text())) == 2


# What the train stage does (OpenMP waiting passively, then train_seeds), in a process of its own.
SEEDS_SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from blocklab.config import ModelConfig, TrainConfig
    from blocklab.runner import train_seeds
    g = torch.Generator().manual_seed(0)
    train, val = torch.randint(0, 65, (20000,), generator=g), torch.randint(0, 65, (4000,), generator=g)
    model = ModelConfig(**eval(sys.argv[1]))
    cfg = TrainConfig(steps=int(sys.argv[2]), lr=1e-2, eval_interval=5, device="cpu")
    results = train_seeds(model, cfg, [0, 1], train, val, 65, label="residual_scheme/rezero")
    print({s: r.metrics["train_loss_last25"] for s, r in results.items()})
""")
REZERO = "dict(residual='rezero', norm_type='none')"  # the lesson's size: the model that hung


def train_seeds_in_a_process(model: str, steps: int, cache: Path, timeout: float = HANG_TIMEOUT, **env):
    return subprocess.run([sys.executable, "-c", SEEDS_SCRIPT, model, str(steps)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "BLOCKLAB_CACHE_DIR": str(cache), **env})


def test_rezero_seeds_finish_with_an_empty_thread_check_cache_and_with_a_warm_one(tmp_path):
    """The hang of a fresh machine (issue 18): the thread check ran with every thread in the stage's
    process, which then forked workers that used every thread again and waited on a futex forever (this
    script hung so before the fix). Now a forked worker never uses a second thread."""
    if torch.get_num_threads() < 2:
        pytest.skip("needs torch's default thread count to be at least 2")
    cache = tmp_path / "cache"
    cold = train_seeds_in_a_process(REZERO, 10, cache)  # raises TimeoutExpired where it hangs
    assert cold.returncode == 0, cold.stderr
    assert json.loads((cache / "thread_checks.json").read_text())  # the check ran, and its verdict is kept
    warm = train_seeds_in_a_process(REZERO, 10, cache)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout == cold.stdout


def test_seeds_whose_verdict_is_every_thread_train_one_after_the_other_and_finish(tmp_path):
    """Where one thread would round otherwise (forced here: the kept verdict is what decides), the seeds
    keep every thread and train in the stage's own process, one after the other, to the same results."""
    if torch.get_num_threads() < 2:
        pytest.skip("needs torch's default thread count to be at least 2")
    cache = tmp_path / "cache"
    shared = train_seeds_in_a_process(REZERO, 10, cache)
    assert shared.returncode == 0, shared.stderr
    checks = json.loads((cache / "thread_checks.json").read_text())
    for verdict in checks.values():
        verdict["rounds_alike"] = False
    (cache / "thread_checks.json").write_text(json.dumps(checks))
    alone = train_seeds_in_a_process(REZERO, 10, cache)
    assert alone.returncode == 0, alone.stderr
    assert "train one after the other with all" in alone.stderr
    assert alone.stdout == shared.stdout


def test_workers_of_several_threads_start_fresh_and_equal_the_runs_alone(tmp_path):
    """Four threads and two seeds: each worker gets two, and starts from a forkserver, not from a process
    whose OpenMP pool is alive. Whatever the check says, the results are those of each run alone."""
    cache = tmp_path / "cache"
    model = "dict(n_layers=2)"
    together = train_seeds_in_a_process(model, 10, cache, OMP_NUM_THREADS="4")
    assert together.returncode == 0, together.stderr
    alone = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import torch
        from blocklab.config import ModelConfig, TrainConfig
        from blocklab.training import train_run
        g = torch.Generator().manual_seed(0)
        train, val = torch.randint(0, 65, (20000,), generator=g), torch.randint(0, 65, (4000,), generator=g)
        cfg = TrainConfig(steps=10, lr=1e-2, eval_interval=5, device="cpu")
        print({s: train_run(ModelConfig(n_layers=2), cfg, s, train, val, 65).metrics["train_loss_last25"]
               for s in (0, 1)})
    """)], capture_output=True, text=True, timeout=HANG_TIMEOUT, env={**os.environ, "OMP_NUM_THREADS": "4"})
    assert alone.returncode == 0, alone.stderr
    assert together.stdout == alone.stdout


def test_the_seeds_of_a_model_that_keeps_every_thread_never_run_at_the_same_time(tmp_path, monkeypatch):
    """Threads x concurrent runs stay within the cores: with every thread each, one seed after the other
    (the verdict forced through the cache, which is what decides)."""
    if torch.get_num_threads() < 2:
        pytest.skip("needs torch's default thread count to be at least 2")
    monkeypatch.setenv("BLOCKLAB_CACHE_DIR", str(tmp_path))
    train, val, vocab = corpus(vocab=11)
    cfg = TrainConfig(steps=15, lr=1e-2, batch_size=32, eval_interval=5, eval_windows=64, device="cpu")
    threads_per_worker(SMALL_MODEL, cfg, vocab, workers=3)
    checks = json.loads(thread_checks_file().read_text())
    for verdict in checks.values():
        verdict["rounds_alike"] = False
    thread_checks_file().write_text(json.dumps(checks))
    assert threads_per_worker(SMALL_MODEL, cfg, vocab, workers=3).threads == torch.get_num_threads()
    before = set(psutil.Process().children(recursive=True))
    together = train_seeds(SMALL_MODEL, cfg, [0, 1, 2], train, val, vocab)
    assert set(psutil.Process().children(recursive=True)) == before  # no worker was started
    assert together[1].curve == train_run(SMALL_MODEL, cfg, 1, train, val, vocab).curve


def test_a_worker_that_stops_making_progress_fails_the_stage_naming_its_run(small_project):
    """SIGSTOP a seed's worker: with the stall limit at 3 s the stage kills it and says what to do."""
    project = small_project
    params = project.params
    params["ablations"]["norm_order"]["train"]["steps"] = 100000  # long enough to be caught mid-run
    project.params = params
    project.run("dvc", "repro", "encode")
    stage = subprocess.Popen(
        [sys.executable, "stages/train.py", "--ablation", "norm_order", "--variant", "pre", "data/encoded",
         "data/runs/norm_order/pre"], cwd=project.root, env={**project.env, "BLOCKLAB_STALL_MINUTES": "0.05"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while len(workers := psutil.Process(stage.pid).children()) < 2:
            assert time.time() < deadline and stage.poll() is None, stage.communicate()
            time.sleep(0.2)
        time.sleep(1)
        stopped = workers[0]
        stopped.send_signal(signal.SIGSTOP)
        out, err = stage.communicate(timeout=120)
    finally:
        if stage.poll() is None:
            os.killpg(stage.pid, signal.SIGKILL)
    assert stage.returncode == 1
    assert "no training step completed for 0.05 minutes" in err and f"pid {stopped.pid}" in err
    assert "norm_order/pre/seed" in err and "dvc repro" in err
    assert not psutil.pid_exists(stopped.pid) or stopped.status() == psutil.STATUS_ZOMBIE
    assert not (project.root / "data/runs/norm_order/pre").exists()  # nothing written
