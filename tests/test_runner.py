"""Many runs side by side (blocklab.schedule.pool): equal to runs alone, never hanging, never waiting forever."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import psutil
import pytest
import torch

from blocklab.run.job import Job, run_job
from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.data import Corpus
from blocklab.run.threads import torch_threads
from blocklab.run.training import train_run
from blocklab.schedule.pool import train_runs

SMALL_MODEL = ModelConfig(d_model=16, n_heads=2, n_layers=1, context=8)
HANG_TIMEOUT = 300  # seconds: ten times what the runs below take here; a deadlocked worker never finishes


def corpus(n: int = 4000, vocab: int = 11):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (n,), generator=g), torch.randint(0, vocab, (n // 4,), generator=g), vocab


def as_corpus(train, val, vocab) -> Corpus:
    return Corpus(chars=[chr(65 + i) for i in range(vocab)], train=train, val=val)


def train_seeds(model_cfg, cfg, seeds, train, val, vocab, workers=None):
    jobs = [Job(f"a/v/seed{seed}", model_cfg, cfg, seed) for seed in seeds]
    results = train_runs(jobs, as_corpus(train, val, vocab), workers=workers, progress=False)
    return {job.seed: results[job.key] for job in jobs}


@pytest.mark.parametrize("model_cfg, vocab", [
    (SMALL_MODEL, 11),  # small shapes
    (ModelConfig(n_layers=2, placement="post"), 65),  # the lesson's sizes
    (ModelConfig(n_layers=2, residual="rezero", norm_type="none"), 65),
])
def test_seeds_trained_side_by_side_equal_seeds_trained_alone_at_one_thread(model_cfg, vocab):
    train, val, vocab = corpus(vocab=vocab)
    cfg = TrainConfig(steps=15, lr=1e-2, batch_size=32, eval_interval=5, eval_windows=64, device="cpu")
    together = train_seeds(model_cfg, cfg, [0, 1, 2], train, val, vocab)
    with torch_threads(1):
        alone = {seed: train_run(model_cfg, cfg, seed, train, val, vocab) for seed in (0, 1, 2)}
    for seed in (0, 1, 2):
        assert together[seed].curve == alone[seed].curve and together[seed].metrics == alone[seed].metrics
    (single,) = train_seeds(model_cfg, cfg, [1], train, val, vocab).values()  # one seed: in this process
    assert single.curve == alone[1].curve


def test_a_pool_of_long_lived_workers_equals_every_run_alone_and_measures_its_overhead():
    """A map's cells: more runs than workers, each with settings of its own (here lr x warmup, two seeds),
    taken by two workers as each finishes one. Every result equals the job runner's alone, and each
    run's wall time in the runner (set-up and results included) is recorded beside its training time."""
    train, val, vocab = corpus(vocab=11)
    data = as_corpus(train, val, vocab)
    jobs = [Job(f"m/v/lr{lr:g}_w{warmup}/seed{seed}", SMALL_MODEL,
                TrainConfig(steps=40, lr=lr, warmup=warmup, eval_interval=20, eval_windows=64, device="cpu"), seed)
            for lr in (1e-3, 1e-2, 1e-1) for warmup in (0, 10) for seed in (0, 1)]
    pooled = train_runs(jobs, data, workers=2, progress=False)
    assert list(pooled) == [job.key for job in jobs]
    for job in jobs:
        alone = run_job(job, data)
        assert pooled[job.key].curve == alone.curve and pooled[job.key].metrics == alone.metrics
        assert pooled[job.key].wall_seconds >= pooled[job.key].seconds > 0
    training = sum(r.seconds for r in pooled.values())
    overhead = sum(r.wall_seconds - r.seconds for r in pooled.values())
    print(f"\nper-run overhead in a pool of 2 workers, {len(jobs)} runs of 40 steps: {overhead / training:.1%} of "
          f"the training time ({overhead / len(jobs) * 1000:.0f} ms a run)")


def test_a_pool_holding_hundreds_of_results_keeps_no_file_descriptor_per_tensor():
    """The default plan's 444 runs through one pool once failed with "Too many open files": results came back
    with their weights as tensors, which torch's multiprocessing shares through one file descriptor each, held
    open for as long as the result lives. Results now come back as bytes: holding 120 results (1,200 tensors)
    keeps no more descriptors open than before, and every weight is bitwise the run's alone."""
    train, val, vocab = corpus(vocab=11)
    data = as_corpus(train, val, vocab)
    jobs = [Job(f"m/v/lr{lr:g}/seed{seed}", SMALL_MODEL, TrainConfig(steps=2, lr=lr, eval_interval=2, eval_windows=8,
                                                                      device="cpu"), seed)
            for lr in (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1) for seed in range(20)]
    before = psutil.Process().num_fds()
    pooled = train_runs(jobs, data, workers=2, progress=False)
    tensors = sum(len(result.weights) for result in pooled.values())
    assert tensors >= 1000 and psutil.Process().num_fds() - before < 20
    for job in jobs[::37]:
        alone = run_job(job, data).weights
        assert list(pooled[job.key].weights) == list(alone)
        assert all(torch.equal(pooled[job.key].weights[name], tensor) for name, tensor in alone.items())


# A process that first computes with every thread (its OpenMP pool is then alive, as the old thread check
# left it), then trains two seeds side by side as the train stage does.
SEEDS_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from blocklab.run.settings import ModelConfig, TrainConfig
    from blocklab.run.data import Corpus
    from blocklab.run.job import Job
    from blocklab.schedule.pool import train_runs
    a = torch.randn(512, 512)
    (a @ a).sum()  # every thread
    g = torch.Generator().manual_seed(0)
    train, val = torch.randint(0, 65, (20000,), generator=g), torch.randint(0, 65, (4000,), generator=g)
    model = ModelConfig(**eval(sys.argv[1]))
    cfg = TrainConfig(steps=int(sys.argv[2]), lr=1e-2, eval_interval=5, device="cpu")
    jobs = [Job(f"residual_scheme/rezero/seed{seed}", model, cfg, seed) for seed in (0, 1)]
    results = train_runs(jobs, Corpus(chars=[chr(40 + i) for i in range(65)], train=train, val=val))
    print({s: r.metrics["train_loss_last25"] for s, r in results.items()})
""")
REZERO = "dict(residual='rezero', norm_type='none')"  # the lesson's size: the model that hung


def train_seeds_in_a_process(model: str, steps: int, timeout: float = HANG_TIMEOUT, **env):
    return subprocess.run([sys.executable, "-c", SEEDS_SCRIPT, model, str(steps)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env})


def test_seeds_forked_from_a_process_whose_thread_pool_is_alive_finish(tmp_path):
    """The hang of a fresh machine (issue 18): with no cached verdict the stage ran a thread check with
    every thread, then forked ReZero's workers, which used every thread again and waited on a futex
    forever (the old code hung so on this script, killed after 90 s). A forked worker now never uses a
    second thread; and there is no verdict, cached or not, left to decide anything."""
    if torch.get_num_threads() < 2:
        pytest.skip("needs torch's default thread count to be at least 2")
    first = train_seeds_in_a_process(REZERO, 10)  # raises TimeoutExpired where it hangs
    assert first.returncode == 0, first.stderr
    again = train_seeds_in_a_process(REZERO, 10)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout


def test_a_runs_numbers_do_not_depend_on_how_many_threads_the_machine_has():
    """One, two or eight threads by default: every run trains with one, and ends bitwise the same."""
    results = {threads: train_seeds_in_a_process("dict(n_layers=2)", 10, OMP_NUM_THREADS=threads)
               for threads in ("1", "2", "8")}
    assert all(r.returncode == 0 for r in results.values()), [r.stderr for r in results.values()]
    assert len({r.stdout for r in results.values()}) == 1


# Eight runs whose results are big (a 7 MB state dict each) end at about the same time; the first result back
# raises KeyboardInterrupt in this process, as a Ctrl-C there would, while other workers still send theirs.
INTERRUPTED_SCRIPT = textwrap.dedent("""
    import torch
    from blocklab.run.settings import ModelConfig, TrainConfig
    from blocklab.run.data import Corpus
    from blocklab.run.job import Job
    from blocklab.schedule.pool import train_runs
    g = torch.Generator().manual_seed(0)
    train, val = torch.randint(0, 65, (20000,), generator=g), torch.randint(0, 65, (4000,), generator=g)
    model = ModelConfig(d_model=512, n_layers=2)
    cfg = TrainConfig(steps=2, eval_interval=2, eval_windows=4, device="cpu")
    jobs = [Job(f"a/v/seed{seed}", model, cfg, seed) for seed in range(8)]

    def interrupt(job, result):
        raise KeyboardInterrupt

    train_runs(jobs, Corpus(chars=[chr(40 + i) for i in range(65)], train=train, val=val), workers=4,
               progress=False, on_result=interrupt)
""")


def test_an_interrupt_while_workers_send_results_back_ends_the_pool_at_once():
    """The hang of an interrupted prefetch (issue 43's CI): interrupted, the pool's owner used to kill its
    workers, one of them mid-way through sending a result, and the executor's thread that was reading it waited
    forever for the rest of the message, so the process never exited (the old code hung here on every try).
    Now the workers end their runs between two steps and leave; the interrupt reaches the caller."""
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_SCRIPT], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode != 0 and done.stderr.rstrip().endswith("KeyboardInterrupt"), done.stderr


def test_a_worker_that_stops_making_progress_fails_the_stage_naming_its_run(small_project):
    """SIGSTOP a seed's worker: with the stall limit at 3 s the stage kills it and says what to do."""
    project = small_project
    params = project.params
    params["ablations"]["placement"]["train"]["steps"] = 100000  # long enough to be caught mid-run
    project.params = params
    project.run("dvc", "repro", "encode")
    stage = subprocess.Popen(
        [sys.executable, "stages/train.py", "--ablation", "placement", "--variant", "pre", "data/encoded",
         "data/runs/placement"], cwd=project.root, env={**project.env, "BLOCKLAB_STALL_MINUTES": "0.05"},
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
    assert "placement/pre/seed" in err and "dvc repro" in err
    assert not psutil.pid_exists(stopped.pid) or stopped.status() == psutil.STATUS_ZOMBIE
    assert not (project.root / "data/runs/placement/pre").exists()  # nothing written
