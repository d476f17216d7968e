"""One run, start to finish: the job runner every executor calls (the local pool, a Dask worker, a benchmark).

Every run on the CPU trains with one thread. How a result rounds depends on the thread count (ATen's
LayerNorm backward sums its weight gradients per thread; on an AVX-512 Xeon, MKL also splits a weight
gradient's rows between threads and adds the parts), so one fixed count is what makes a run's numbers the same
whatever the machine's cores and whatever else shares them. One thread is the count whose results are the
lesson's: the plain loop at one thread reproduces every figure of table A here to 0.0005, where at two threads
post-norm's collapsed seed 1 lands 0.019 away (docs/performance-log.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from blocklab.run.settings import ModelConfig, TrainConfig
from blocklab.run.data import Corpus
from blocklab.run.numerics import check_pinned
from blocklab.run.results import RunResult
from blocklab.run.sample import recorded_sample
from blocklab.run.threads import torch_threads
from blocklab.run.training import resolve_device, train_run

THREADS = 1  # every CPU run's intra-op threads: see the module's docstring


@dataclass(frozen=True)
class Job:
    """One run, fully resolved: what the job runner needs besides the corpus."""

    key: str  # its run key, e.g. `placement/post/seed0` or `stability/post/lr0.01_w0/seed1`
    model: ModelConfig
    train: TrainConfig
    seed: int
    checkpoint: Path | None = None  # where a long run keeps its checkpoint (None: it keeps none)
    family: str | None = None  # the numeric family its run key was made for (None: any pinned process's)


def run_job(job: Job, corpus: Corpus, progress: bool = False, position: int = 0,
             on_step: Callable[[int], None] | None = None) -> RunResult:
    """The job runner: one run from its resolved settings and the corpus to its results, on the CPU at one
    thread (see the module's docstring) on the pinned numeric path (refused on any other:
    `blocklab.run.numerics`), on a GPU as the GPU rounds. What any executor calls: this module's
    local workers, or another machine's."""
    run = dict(model_cfg=job.model, train_cfg=job.train, seed=job.seed, train=corpus.train, val=corpus.val,
               vocab_size=corpus.vocab_size, progress=job.key if progress else None, position=position,
               checkpoint=job.checkpoint, on_step=on_step)
    if resolve_device(job.train.device).type != "cpu":
        result = train_run(**run)
    else:
        check_pinned(job.family)
        with torch_threads(THREADS):
            result = train_run(**run)
    if result.weights is not None:  # the sample is drawn on the CPU at one thread, after training, whatever trained
        with torch_threads(THREADS):
            result.sample = recorded_sample(job.model, result.weights, corpus.chars)
    return result
