"""Running many runs side by side: how a variant's seeds share the machine.

`blocklab.training.train_run` is one run, start to finish; this module decides where each of several
runs trains and with how many threads, and is the one place that forks, waits and gives up:

- On the CPU, a variant's seeds train at the same time in worker processes of one thread each, where one
  thread rounds as torch's default thread count does for that model shape with one of
  `blocklab.rounding`'s recipes (checked once per shape and CPU, the verdict kept in the user's cache:
  `threads_per_worker`). Each run's numbers are then bitwise those it
  gets alone, and those of the lesson's plain loop.
- Where the check says a share would round otherwise, the seeds keep every thread and train one after
  the other in this process: threads x concurrent runs never exceeds the cores.
- One-thread workers are forked: a forked child that never uses a second thread does not touch the
  OpenMP thread pool the parent may have started (GNU OpenMP is not fork-safe: a child forked from a
  process whose pool is alive and that then uses several threads waits on a futex forever). Workers of
  several threads (a share of a larger machine) start from a fresh forkserver, never from this process.
- Nothing waits forever: a worker that completes no step for `$BLOCKLAB_STALL_MINUTES` (default 10)
  minutes is killed and the stage fails naming its run; a worker that dies fails the stage at once.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import platform
import signal
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import torch
from tqdm import tqdm

from blocklab.config import ModelConfig, TrainConfig
from blocklab.data import atomic_write
from blocklab.errors import BlocklabError
from blocklab.model import build_model
from blocklab.rounding import RoundLike, torch_threads
from blocklab.training import EVAL_BATCH, RunResult, evaluate_loss, loss_and_gradients, resolve_device, train_run

OMP_WAIT_POLICY = "OMP_WAIT_POLICY"
CACHE_DIR_ENV = "BLOCKLAB_CACHE_DIR"
STALL_ENV = "BLOCKLAB_STALL_MINUTES"
DEFAULT_STALL_MINUTES = 10.0
POLL_SECONDS = 1.0  # how often the stage looks at its workers' progress

# Set in each worker process by `_start_worker`: where it reports its progress.
_progress: dict = {}


def train_seeds(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    seeds: Sequence[int],
    train: torch.Tensor,
    val: torch.Tensor,
    vocab_size: int,
    label: str | None = None,
    checkpoint_dir: Path | None = None,
) -> dict[int, RunResult]:
    """Train every seed of one variant (see the module's docstring for where and with how many threads).

    The workers share torch's default thread count (one thread each on two cores for two or more seeds),
    which keeps the cores busier than one multi-threaded run at a time: at this model's size a second
    thread adds little (150 steps of the lesson's 6-layer model took 10.7 s with two threads and 13.3 s
    with one, measured here one after the other). One-thread workers are one per seed, also past the core
    count (three seeds on two cores take 1.5 run lengths time-sliced, 2 two at a time). Workers wait for
    OpenMP work passively: with the default spinning, two two-threaded processes on two cores crawl
    (1.7 steps/s each instead of 10.8, measured here)."""
    threads = torch.get_num_threads()
    jobs = [
        dict(model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, train=train, val=val, vocab_size=vocab_size,
             progress=None if label is None else f"{label}/seed{seed}", position=i,
             checkpoint=None if checkpoint_dir is None else Path(checkpoint_dir) / f"seed{seed}.pt")
        for i, seed in enumerate(seeds)
    ]
    if len(jobs) == 1 or resolve_device(train_cfg.device).type != "cpu":
        return {job["seed"]: train_run(**job) for job in jobs}
    share = threads_per_worker(model_cfg, train_cfg, vocab_size, len(jobs))
    if share.threads == threads:
        if threads > 1:
            tqdm.write(f"{label or 'these runs'}: with one thread this model would round otherwise than with "
                       f"{threads} (a kernel sums by thread where blocklab.rounding has no twin for it), so its "
                       f"{len(jobs)} seeds train one after the other with all {threads} threads", file=sys.stderr)
        return {job["seed"]: train_run(**{**job, "position": 0}) for job in jobs}
    workers = len(jobs) if share.threads == 1 else max(1, threads // share.threads)
    return _in_workers([{**job, "round_like": share.round_like} for job in jobs], share.threads, workers, label)


def _in_workers(jobs: list[dict], threads: int, workers: int, label: str | None) -> dict[int, RunResult]:
    """Each job in a worker process of `threads` threads, `workers` at a time, watched for progress."""
    context = multiprocessing.get_context("fork" if threads == 1 else "forkserver")
    if threads > 1:
        context.set_forkserver_preload(["blocklab.runner"])  # torch imported once, in a process that runs nothing
    heartbeats = context.RawArray("d", len(jobs))  # when each job last completed a step (0: not started)
    pids = context.RawArray("i", len(jobs))
    stall = stall_seconds()
    keys = [f"{label or 'run'}/seed{job['seed']}" for job in jobs]
    with passive_openmp(), ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker,
                                               initargs=(heartbeats, pids, threads)) as pool:
        futures = {pool.submit(_train_job, index, job): index for index, job in enumerate(jobs)}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()
                now = time.time()
                stalled = [futures[f] for f in pending if heartbeats[futures[f]] and now - heartbeats[futures[f]] > stall]
                if stalled:
                    _kill(pids)
                    raise BlocklabError(
                        f"{', '.join(keys[i] for i in stalled)}: no training step completed for "
                        f"{stall / 60:g} minutes, so its worker (pid {', '.join(str(pids[i]) for i in stalled)}) "
                        f"was stopped. Run the stage again (`dvc repro`); if it stalls again, see where it waits "
                        f"with `py-spy dump --pid <pid>` while it hangs, and report it. A machine that is this "
                        f"slow on purpose can allow more time with {STALL_ENV}=<minutes>.")
        except BrokenProcessPool:
            running = [keys[i] for i in range(len(jobs)) if heartbeats[i]]
            raise BlocklabError(
                f"a worker training {', '.join(running) or 'these runs'} died (killed, or out of memory?): "
                f"nothing was written; run the stage again (`dvc repro`)") from None
        except BaseException:
            _kill(pids)
            raise
        return {jobs[futures[f]]["seed"]: f.result() for f in futures}


def _start_worker(heartbeats, pids, threads: int) -> None:
    torch.set_num_threads(threads)  # first, before any torch work in this process
    _progress.update(heartbeats=heartbeats, pids=pids)


def _train_job(index: int, job: dict) -> RunResult:
    heartbeats = _progress["heartbeats"]
    _progress["pids"][index] = os.getpid()
    heartbeats[index] = time.time()
    return train_run(**job, on_step=lambda step: heartbeats.__setitem__(index, time.time()))


def _kill(pids) -> None:
    for pid in set(pids) - {0}:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stall_seconds() -> float:
    """How long a worker may go without completing a step: $BLOCKLAB_STALL_MINUTES, default 10 minutes."""
    raw = os.environ.get(STALL_ENV, "")
    try:
        minutes = float(raw) if raw else DEFAULT_STALL_MINUTES
    except ValueError:
        raise BlocklabError(f"{STALL_ENV}={raw!r} is not a number of minutes") from None
    if not minutes > 0:
        raise BlocklabError(f"{STALL_ENV}={raw!r} must be a positive number of minutes")
    return minutes * 60


class Share(NamedTuple):
    threads: int  # each worker's threads
    round_like: RoundLike | None  # how a worker with fewer threads than the default sums (None: it has them all)


RECIPES = ("norms", "norms+products")  # what a kept verdict was chosen among, in this order


def threads_per_worker(model_cfg: ModelConfig, train_cfg: TrainConfig, vocab_size: int, workers: int) -> Share:
    """Threads for each of `workers` side-by-side runs: a share of torch's default, but only where one
    training step and one evaluation of this model come out bitwise equal with the share (summing as the
    default would: the norms' gradients, else also the products') and with the default; otherwise the
    default. Whether a kernel's rounding depends on the thread count is up to the CPU, the BLAS and the
    shapes, so every model shape is checked (about a second) and the verdict kept in the user's cache,
    keyed by everything it depends on, for the next stage with the same shapes."""
    threads = torch.get_num_threads()
    share = max(1, threads // workers)
    if share == threads:
        return Share(threads, None)
    checked = {"threads": threads, "share": share, "model": asdict(model_cfg), "batch_size": train_cfg.batch_size,
               "eval_rows": min(train_cfg.eval_windows, EVAL_BATCH), "vocab": vocab_size, "recipes": RECIPES}
    key = hashlib.sha256(json.dumps([_machine(), checked], sort_keys=True).encode()).hexdigest()
    checks = _read_thread_checks()
    if key not in checks:
        alone = _one_step_and_evaluation(model_cfg, train_cfg, vocab_size, threads, round_like=None)
        recipe = next((products for products in (False, True) if all(
            torch.equal(a, b) for a, b in zip(alone, _one_step_and_evaluation(
                model_cfg, train_cfg, vocab_size, share, round_like=RoundLike(threads, products))))), None)
        checks[key] = {"rounds_alike": recipe is not None, "products": recipe, "checked": checked}
        _write_thread_checks(checks)
    verdict = checks[key]
    return Share(share, RoundLike(threads, verdict["products"])) if verdict["rounds_alike"] else Share(threads, None)


def thread_checks_file() -> Path:
    """Where verdicts of `threads_per_worker` are kept: $BLOCKLAB_CACHE_DIR, else the user's cache folder."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "blocklab"
    return Path(os.environ.get(CACHE_DIR_ENV) or default) / "thread_checks.json"


def _machine() -> dict:
    """What decides which kernels torch and its BLAS run, hence how they round."""
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                    if line.startswith("model name")), cpu)
    steering = {name: value for name, value in os.environ.items() if name.startswith(("MKL_", "ATEN_", "OMP_"))
                and name != OMP_WAIT_POLICY}
    return {"torch": torch.__version__, "blas": torch.__config__.show(), "capability":
            torch.backends.cpu.get_cpu_capability(), "cpu": cpu, "env": steering}


def _read_thread_checks() -> dict:
    try:
        return json.loads(thread_checks_file().read_text())
    except (OSError, ValueError):  # none yet, or unreadable: check again
        return {}


def _write_thread_checks(checks: dict) -> None:
    """Atomically, and quietly where the cache folder cannot be written: the check is then repeated."""
    try:
        atomic_write(thread_checks_file(), json.dumps(checks, indent=1).encode())
    except OSError:
        pass


def _one_step_and_evaluation(model_cfg: ModelConfig, train_cfg: TrainConfig, vocab_size: int, threads: int,
                             round_like: RoundLike | None) -> list[torch.Tensor]:
    """What a training step and an evaluation compute, with `threads` threads: losses, gradients, their norm."""
    with torch_threads(threads):
        model = build_model(model_cfg, vocab_size, seed=0)
        if round_like is not None:
            round_like.apply(model)
        g = torch.Generator().manual_seed(0)
        chunk = torch.randint(0, vocab_size, (train_cfg.batch_size, model_cfg.context + 1), generator=g)
        params = list(model.parameters())
        loss, norm = loss_and_gradients(model, params, chunk)  # a new model: no gradients yet
        grads = [p.grad for p in params]
        windows = torch.randint(0, vocab_size, (min(train_cfg.eval_windows, EVAL_BATCH), model_cfg.context + 1), generator=g)
        evaluation = torch.tensor(evaluate_loss(model, windows[:, :-1], windows[:, 1:]))
        return [loss, norm, evaluation, *grads]


@contextmanager
def passive_openmp():
    """Processes started inside this block wait for OpenMP work passively instead of spinning."""
    previous = os.environ.get(OMP_WAIT_POLICY)
    os.environ[OMP_WAIT_POLICY] = "PASSIVE"
    try:
        yield
    finally:
        if previous is None:
            del os.environ[OMP_WAIT_POLICY]
        else:
            os.environ[OMP_WAIT_POLICY] = previous
