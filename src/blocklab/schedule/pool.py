"""Running many runs side by side: how a variant's seeds share the machine.

`blocklab.run.job.run_job` is one run, start to finish, at one thread; this module decides where each of
several runs trains, and is the one place that forks, waits and gives up:

- `train_runs` runs many runs at once. A variant's seeds train at the same time, one
  forked worker process each; a map's many cells in a pool of long-lived workers, one per core, each
  taking the next run as it finishes one (torch set up once per worker). A forked child that never
  uses a second thread does not touch the OpenMP thread pool its parent may have started (GNU OpenMP
  is not fork-safe: a child forked from a process whose pool is alive and that then uses several
  threads waits on a futex forever), so forking is safe whatever the parent did first.
- Nothing waits forever: a worker that completes no step for `$BLOCKLAB_STALL_MINUTES` (default 10)
  minutes is killed and the stage fails naming its run; a worker that dies fails the stage at once.
- A Ctrl-C stops the workers between two steps, not wherever it lands: they ignore SIGINT, and this process,
  interrupted, asks them to stop and waits for them. A worker killed while it sends a result back leaves half a
  message in the pool's result pipe, and the executor's manager thread, reading it, waits forever for the rest
  (this process hung at exit; a prefetch Ctrl-C'd in the full test suite did). Only a stalled worker, which
  sends nothing, is killed.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

import torch

from blocklab.errors import BlocklabError
from blocklab.run.job import THREADS, Job, run_job
from blocklab.run.data import Corpus
from blocklab.run.results import RunResult
from blocklab.run.training import resolve_device

STALL_ENV = "BLOCKLAB_STALL_MINUTES"
DEFAULT_STALL_MINUTES = 10.0
POLL_SECONDS = 1.0  # how often the stage looks at its workers' progress

# Set in each worker process by `_start_worker`: where it reports its progress, and the corpus.
_worker: dict = {}


class WorkerDied(BlocklabError):
    """A local worker process ended without its result (killed, out of memory): the pool is gone."""


class Stopped(Exception):
    """A worker's run ended between two steps because this process asked its workers to stop."""


def train_runs(jobs: Sequence[Job], corpus: Corpus, workers: int | None = None, progress: bool = True,
               on_result: Callable[[Job, RunResult], None] | None = None) -> dict[str, RunResult]:
    """Train every job, keyed by its run key. On the CPU, in forked one-thread worker processes: one per job
    by default (a variant's few seeds: three seeds time-sliced on two cores end sooner than two at a time
    and the third alone, see docs/performance.md), or a pool of `workers` long-lived ones that take the next
    job as each finishes (a map's many runs: torch set up once per worker, not once per run). On a GPU, one
    after the other. Each result's `wall_seconds` is its wall time in the runner, from the moment its worker
    took it to the moment its result was back: the per-run overhead is that minus its training time.
    `on_result(job, result)` is called in this process as each result comes back (pass the jobs longest first:
    a pool's workers take them in order)."""
    jobs = list(jobs)
    if not jobs:
        return {}
    if len(jobs) == 1 or resolve_device(jobs[0].train.device).type != "cpu":
        results = {}
        for job in jobs:
            taken = time.time()
            result = results[job.key] = run_job(job, corpus, progress)
            result.wall_seconds = time.time() - taken
            if on_result is not None:
                on_result(job, result)
        return results
    return _in_workers(jobs, corpus, min(workers or len(jobs), len(jobs)), progress, on_result)


def _in_workers(jobs: list[Job], corpus: Corpus, workers: int, progress: bool,
                on_result: Callable[[Job, RunResult], None] | None) -> dict[str, RunResult]:
    """Each job in a forked one-thread worker process, `workers` at a time, watched for progress."""
    context = multiprocessing.get_context("fork")
    heartbeats = context.RawArray("d", len(jobs))  # when each job last completed a step (0: not started)
    taken = context.RawArray("d", len(jobs))  # when a worker took each job
    pids = context.RawArray("i", len(jobs))
    slots = context.Value("i", 0)  # how many workers have started: each one's progress-bar line
    stop = context.RawValue("b", 0)  # set: every worker ends its run after the step it is in
    stall = stall_seconds()
    results: dict[str, RunResult] = {}
    # The corpus reaches the workers by fork, once, not pickled with every job.
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker,
                             initargs=(heartbeats, taken, pids, slots, stop, corpus, progress)) as pool:
        futures = {pool.submit(_train_job, index, job): index for index, job in enumerate(jobs)}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                for future in done:
                    index = futures[future]
                    result = _with_tensors(future.result())
                    result.wall_seconds = time.time() - taken[index]
                    results[jobs[index].key] = result
                    if on_result is not None:
                        on_result(jobs[index], result)
                now = time.time()
                stalled = [futures[f] for f in pending if heartbeats[futures[f]] and now - heartbeats[futures[f]] > stall]
                if stalled:  # killed, it sends nothing; the others stop below, on the way out
                    _kill(pids[i] for i in stalled)
                    raise BlocklabError(
                        f"{', '.join(jobs[i].key for i in stalled)}: no training step completed for "
                        f"{stall / 60:g} minutes, so its worker (pid {', '.join(str(pids[i]) for i in stalled)}) "
                        f"was stopped. Run the stage again (`dvc repro`); if it stalls again, see where it waits "
                        f"with `py-spy dump --pid <pid>` while it hangs, and report it. A machine that is this "
                        f"slow on purpose can allow more time with {STALL_ENV}=<minutes>.")
        except BrokenProcessPool:
            running = [jobs[i].key for i in range(len(jobs)) if heartbeats[i] and jobs[i].key not in results]
            raise WorkerDied(
                f"a worker training {', '.join(running) or 'these runs'} died (killed, or out of memory?): "
                f"nothing was written; run the stage again (`dvc repro`)") from None
        except BaseException:  # a Ctrl-C, or an error here: the workers end their runs, then leave the pool
            stop.value = 1
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return {job.key: results[job.key] for job in jobs}


def _start_worker(heartbeats, taken, pids, slots, stop, corpus: Corpus, progress: bool) -> None:
    torch.set_num_threads(THREADS)  # first, before any torch work in this process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the whole group: the pool's owner decides
    with slots.get_lock():
        position = slots.value
        slots.value += 1
    _worker.update(heartbeats=heartbeats, taken=taken, pids=pids, stop=stop, corpus=corpus, progress=progress,
                   position=position)


def _train_job(index: int, job: Job) -> RunResult:
    heartbeats, stop = _worker["heartbeats"], _worker["stop"]
    if stop.value:
        raise Stopped(job.key)
    _worker["taken"][index] = heartbeats[index] = time.time()
    _worker["pids"][index] = os.getpid()

    def on_step(step: int) -> None:
        heartbeats[index] = time.time()
        if stop.value:
            raise Stopped(f"{job.key} at step {step}")

    return _as_bytes(run_job(job, _worker["corpus"], _worker["progress"], position=_worker["position"],
                              on_step=on_step))


# A result crosses from a worker to this process as bytes, its weights saved by torch: handed over as tensors,
# torch's multiprocessing pickler would share each tensor's memory through a file descriptor that this process
# keeps open as long as the result lives, and a plan of a few hundred runs (444: ~9,000 tensors) runs out of
# file descriptors ("Too many open files", in the worker and here).

def _as_bytes(result: RunResult) -> RunResult:
    if result.weights is not None:
        buffer = io.BytesIO()
        torch.save(result.weights, buffer)
        result.weights = buffer.getvalue()
    return result


def _with_tensors(result: RunResult) -> RunResult:
    if isinstance(result.weights, bytes):
        result.weights = torch.load(io.BytesIO(result.weights), map_location="cpu", weights_only=True)
    return result


def _kill(pids: Iterable[int]) -> None:
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
