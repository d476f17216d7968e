"""Running many runs side by side: how a variant's seeds share the machine.

`blocklab.training.train_run` is one run, start to finish; this module decides where each of several
runs trains and with how many threads, and is the one place that forks, waits and gives up:

- Every run on the CPU trains with one thread. How a result rounds depends on the thread count (ATen's
  LayerNorm backward sums its weight gradients per thread; on an AVX-512 Xeon, MKL also splits a weight
  gradient's rows between threads and adds the parts), so one fixed count is what makes a run's numbers
  the same whatever the machine's cores and whatever else shares them. One thread is the count whose
  results are the lesson's: the plain loop at one thread reproduces every figure of table A here to
  0.0005, where at two threads post-norm's collapsed seed 1 lands 0.019 away (docs/performance.md).
- A variant's seeds train at the same time, one forked worker process each. A forked child that never
  uses a second thread does not touch the OpenMP thread pool its parent may have started (GNU OpenMP
  is not fork-safe: a child forked from a process whose pool is alive and that then uses several
  threads waits on a futex forever), so forking is safe whatever the parent did first.
- Nothing waits forever: a worker that completes no step for `$BLOCKLAB_STALL_MINUTES` (default 10)
  minutes is killed and the stage fails naming its run; a worker that dies fails the stage at once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import torch

from blocklab.config import ModelConfig, TrainConfig
from blocklab.errors import BlocklabError
from blocklab.threads import torch_threads
from blocklab.training import RunResult, resolve_device, train_run

STALL_ENV = "BLOCKLAB_STALL_MINUTES"
DEFAULT_STALL_MINUTES = 10.0
POLL_SECONDS = 1.0  # how often the stage looks at its workers' progress
THREADS = 1  # every CPU run's intra-op threads: see the module's docstring

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
    """Train every seed of one variant: on the CPU one thread each, side by side in worker processes, one
    per seed (also past the core count: three seeds time-sliced on two cores end sooner than two at a time
    and the third alone, see docs/performance.md); on a GPU one after the other."""
    jobs = [
        dict(model_cfg=model_cfg, train_cfg=train_cfg, seed=seed, train=train, val=val, vocab_size=vocab_size,
             progress=None if label is None else f"{label}/seed{seed}", position=i,
             checkpoint=None if checkpoint_dir is None else Path(checkpoint_dir) / f"seed{seed}.pt")
        for i, seed in enumerate(seeds)
    ]
    if resolve_device(train_cfg.device).type != "cpu":
        return {job["seed"]: train_run(**job) for job in jobs}
    if len(jobs) == 1:
        with torch_threads(THREADS):
            return {jobs[0]["seed"]: train_run(**jobs[0])}
    return _in_workers(jobs, label)


def _in_workers(jobs: list[dict], label: str | None) -> dict[int, RunResult]:
    """Each job in a forked one-thread worker process, all at once, watched for progress."""
    context = multiprocessing.get_context("fork")
    heartbeats = context.RawArray("d", len(jobs))  # when each job last completed a step (0: not started)
    pids = context.RawArray("i", len(jobs))
    stall = stall_seconds()
    keys = [f"{label or 'run'}/seed{job['seed']}" for job in jobs]
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=context, initializer=_start_worker,
                             initargs=(heartbeats, pids)) as pool:
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


def _start_worker(heartbeats, pids) -> None:
    torch.set_num_threads(THREADS)  # first, before any torch work in this process
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
