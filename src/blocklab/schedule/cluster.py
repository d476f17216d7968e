"""Runs on a Dask cluster (`dask.distributed`): the same job runner, called by other machines' workers.

With `$BLOCKLAB_DASK_SCHEDULER` (or `--scheduler`) set to a scheduler's address, the train and map stages
and `blocklab prefetch` submit their runs to that cluster instead of training them on the local workers:
each run is one task calling `blocklab.schedule.pool.run_job` with the run's resolved settings and the corpus. A
worker needs blocklab installed and the same torch build to give bitwise the local results (every CPU run
trains at one thread; start workers with `--nthreads 1`, one run at a time per worker process, and as many
processes as cores).

The corpus is one task of its own, holding the character ids as bytes (1.1 MB for Tiny Shakespeare), on
which every run's task depends: Dask copies its result to each worker that needs it, and recomputes it
from the task itself when every copy is lost. (Scattered data could not be: the scheduler's Active
Memory Manager drops the replicas a broadcast made, and once the one worker left holding it dies, the
scheduler forgets the data and cancels every run still waiting for it, "already forgotten".)

A worker that dies costs its runs' time, nothing else: Dask reschedules its tasks on the others, and
should Dask give a run up (cancelled, or `KilledWorker` after `RETRIES` lost workers), blocklab submits
it again, up to `RESUBMITS` times. Each run's result comes back once, by its run key. A scheduler that
cannot be reached fails within `CONNECT_SECONDS`, naming the address.

A worker started by a Dask nanny inherits the nanny's `distributed.nanny.pre-spawn-environ`, whose default
sets `MALLOC_TRIM_THRESHOLD_=65536`: on this project's 2-core machines one run then trained 1.63x slower
(docs/performance.md). Before submitting, blocklab asks every worker for that variable and warns, saying
how to start the workers without it.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from blocklab.errors import BlocklabError
from blocklab.run.data import Corpus

if TYPE_CHECKING:  # torch (2-3 s to import) only where a run trains: a stage that copies its runs needs none
    from blocklab.run.job import Job
    from blocklab.run.results import RunResult

SCHEDULER_ENV = "BLOCKLAB_DASK_SCHEDULER"
CONNECT_SECONDS = 10
RETRIES = 3  # how often Dask itself starts a run again elsewhere when its worker dies
RESUBMITS = 3  # how often blocklab submits a run again that Dask gave up (cancelled, or KilledWorker)
SLOW_ALLOCATOR_ENV = "MALLOC_TRIM_THRESHOLD_"  # set by a Dask nanny's default pre-spawn-environ


def scheduler_address(option: str | None = None) -> str | None:
    """The scheduler to submit to: the option, else $BLOCKLAB_DASK_SCHEDULER, else None (the local workers)."""
    return option or os.environ.get(SCHEDULER_ENV) or None


def _packed(corpus: Corpus) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The corpus as compact arrays (one byte an id where the vocabulary allows): what the corpus task holds."""
    dtype = np.uint8 if corpus.vocab_size <= 256 else np.int32
    return list(corpus.chars), np.asarray(corpus.train).astype(dtype), np.asarray(corpus.val).astype(dtype)


def _unpacked(chars: list[str], train: np.ndarray, val: np.ndarray) -> Corpus:
    """The corpus task: the ids as the int64 tensors the trainer indexes with."""
    import torch

    return Corpus(chars=chars, train=torch.from_numpy(train.astype(np.int64)),
                  val=torch.from_numpy(val.astype(np.int64)))


def _run_on_a_worker(job: Job, corpus: Corpus) -> tuple[RunResult, float]:
    """What each task runs: the job runner, and when the worker took the task (for the overhead)."""
    from blocklab.run.job import run_job

    taken = time.time()
    return run_job(job, corpus), taken


def connect(address: str):
    """A client of the scheduler at `address`, or an error within CONNECT_SECONDS that names it."""
    try:
        from distributed import Client
    except ImportError:
        raise BlocklabError(f"{SCHEDULER_ENV}={address} asks for a Dask cluster, but dask.distributed is not "
                            f"installed: pip install -e .[cluster]") from None
    try:
        return Client(address, timeout=f"{CONNECT_SECONDS}s", set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise BlocklabError(f"cannot reach the Dask scheduler at {address} ({err}): start it (`dask scheduler`) "
                            f"or unset {SCHEDULER_ENV} to train on this machine's workers") from None


def slow_allocator_warning(client) -> str | None:
    """A warning naming the workers that run with MALLOC_TRIM_THRESHOLD_ set, and how to start them without it;
    None when none does. A worker that does not answer (lost in the meantime) is left out, not an error."""
    settings = client.run(os.getenv, SLOW_ALLOCATOR_ENV, on_error="ignore")
    slowed = sorted(worker for worker, value in settings.items() if value is not None)
    if not slowed:
        return None
    values = sorted({settings[worker] for worker in slowed})
    return (f"warning: {len(slowed)} of {len(settings)} Dask workers run with {SLOW_ALLOCATOR_ENV}="
            f"{'/'.join(values)} ({', '.join(slowed[:3])}{', ...' if len(slowed) > 3 else ''}), which a Dask "
            f"nanny sets by default: with it runs trained 1.6x slower here. Start the workers with `dask worker "
            f"--no-nanny`, or keep the nanny and set the Dask config "
            f"distributed.nanny.pre-spawn-environ.{SLOW_ALLOCATOR_ENV} to null (docs/performance.md)")


def train_on_cluster(jobs: Sequence[Job], corpus: Corpus, address: str, echo=print,
                     on_result: Callable[[Job, RunResult], None] | None = None) -> dict[str, RunResult]:
    """Every job on the cluster at `address`, keyed by its run key, in the jobs' order; the first jobs are
    given the highest priority (pass the longest first). `on_result(job, result)` is called here as each
    result comes back. Each result's `wall_seconds` is from the moment a worker took it to the moment its
    result was back here."""
    jobs = list(jobs)
    if not jobs:
        return {}
    from distributed import as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    client = connect(address)
    try:
        workers = len(client.scheduler_info().get("workers", {}))
        echo(f"submitting {len(jobs)} runs to the Dask scheduler at {address} ({workers} workers)")
        if warning := slow_allocator_warning(client):
            echo(warning)
        packed = _packed(corpus)
        digest = hashlib.sha256(b"".join(a.tobytes() for a in packed[1:])).hexdigest()[:16]
        corpus_task = client.submit(_unpacked, *packed, key=f"blocklab-corpus-{digest}-{os.getpid()}", pure=False)
        attempts = {job.key: 0 for job in jobs}

        def submit(index: int):
            job = jobs[index]
            # pure=False: a run is one task whatever Dask's hashing makes of its arguments; key: its run key
            return client.submit(_run_on_a_worker, job, corpus_task, pure=False, retries=RETRIES,
                                 priority=len(jobs) - index,
                                 key=f"blocklab-{job.key}-{os.getpid()}-{attempts[job.key]}")

        futures = {submit(i): i for i in range(len(jobs))}
        results: dict[str, RunResult] = {}
        running = as_completed(list(futures), loop=client.loop)
        for future in running:
            index = futures.pop(future)
            job = jobs[index]
            try:
                result, taken = future.result()
            except (FutureCancelledError, KilledWorker) as err:
                if attempts[job.key] >= RESUBMITS:
                    raise BlocklabError(f"{job.key}: the Dask cluster at {address} gave the run up "
                                        f"{RESUBMITS + 1} times ({type(err).__name__}: {err}); are its workers "
                                        f"being killed (out of memory?)") from None
                attempts[job.key] += 1
                echo(f"{job.key}: the Dask cluster gave the run up ({type(err).__name__}); submitting it again")
                again = submit(index)
                futures[again] = index
                running.add(again)
                continue
            result.wall_seconds = time.time() - taken
            results[job.key] = result
            if on_result is not None:
                on_result(job, result)
        return {job.key: results[job.key] for job in jobs}
    finally:
        client.close()
