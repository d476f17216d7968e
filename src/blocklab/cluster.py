"""Runs on a Dask cluster (`dask.distributed`): the same cell runner, called by other machines' workers.

With `$BLOCKLAB_DASK_SCHEDULER` (or the train stage's `--scheduler`) set to a scheduler's address, the
train and map stages submit their runs to that cluster instead of training them on the local workers:
each run is one task calling `blocklab.runner.run_cell` with the run's resolved settings and the corpus,
which travels with the tasks (it is small: Tiny Shakespeare's splits are ~9 MB as int64, scattered to the
workers once). A worker needs blocklab installed and the same torch build to give bitwise the local
results (every CPU run trains at one thread; start workers with `--nthreads 1`, one run at a time per
worker process, and as many processes as cores).

Dask reschedules the tasks of a worker that dies on the others: a lost worker costs its runs' time,
nothing else, and each run's result comes back once, by its run key. A scheduler that cannot be reached
fails the stage within `CONNECT_SECONDS`, naming the address.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from blocklab.data import Corpus
from blocklab.errors import BlocklabError
from blocklab.runner import Job, run_cell
from blocklab.training import RunResult

SCHEDULER_ENV = "BLOCKLAB_DASK_SCHEDULER"
CONNECT_SECONDS = 10
SCATTER_SECONDS = 120  # to copy the corpus to every worker (a worker lost meanwhile would hold it up forever)
RETRIES = 3  # how often a run whose worker died is started again elsewhere (Dask's own count)


def scheduler_address(option: str | None = None) -> str | None:
    """The scheduler to submit to: the option, else $BLOCKLAB_DASK_SCHEDULER, else None (the local workers)."""
    return option or os.environ.get(SCHEDULER_ENV) or None


def _cell_on_a_worker(job: Job, corpus: Corpus) -> tuple[RunResult, float]:
    """What each task runs: the cell runner, and when the worker took the task (for the overhead)."""
    taken = time.time()
    return run_cell(job, corpus), taken


def train_on_cluster(jobs: Sequence[Job], corpus: Corpus, address: str, echo=print) -> dict[str, RunResult]:
    """Every job on the cluster at `address`, keyed by its run key, in the jobs' order. Each result's
    `cell_seconds` is from the moment a worker took it to the moment its result was back here."""
    jobs = list(jobs)
    if not jobs:
        return {}
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise BlocklabError(f"{SCHEDULER_ENV}={address} asks for a Dask cluster, but dask.distributed is not "
                            f"installed: pip install -e .[cluster]") from None
    try:
        client = Client(address, timeout=f"{CONNECT_SECONDS}s", set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise BlocklabError(f"cannot reach the Dask scheduler at {address} ({err}): start it (`dask scheduler`) "
                            f"or unset {SCHEDULER_ENV} to train on this machine's workers") from None
    try:
        workers = len(client.scheduler_info().get("workers", {}))
        echo(f"submitting {len(jobs)} runs to the Dask scheduler at {address} ({workers} workers)")
        try:  # a copy on every worker: a worker lost later takes no data with it
            shared = client.scatter(corpus, broadcast=True, timeout=SCATTER_SECONDS)
        except (OSError, TimeoutError) as err:
            raise BlocklabError(f"could not hand the corpus to the Dask workers at {address} within "
                                f"{SCATTER_SECONDS} s ({err}): is a worker stuck or gone? Run the stage again") from None
        # pure=False: a run is one task whatever Dask's hashing makes of its arguments; key: its run key
        futures = {client.submit(_cell_on_a_worker, job, shared, key=f"blocklab-{job.key}-{os.getpid()}",
                                 pure=False, retries=RETRIES): job for job in jobs}
        results: dict[str, RunResult] = {}
        for future in as_completed(futures, loop=client.loop):
            result, taken = future.result()
            result.cell_seconds = time.time() - taken
            results[futures[future].key] = result
        return {job.key: results[job.key] for job in jobs}
    finally:
        client.close()
