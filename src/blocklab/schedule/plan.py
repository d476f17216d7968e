"""The plan's runs and the run store: the one place that decides, run by run, "copy it or train it".

A train stage (`stages/train.py`) and `blocklab prefetch` both call `ensure_stored`: every run whose key
the run store lacks (or holds damaged) trains, longest first, on this machine's one-thread workers or on
a Dask cluster, and is put into the store the moment its result is back; runs that share a key train
once. A train stage then copies its runs out of the store into its DVC output (`stage_runs`), each file
checked against the entry's manifest. So the stage and the prefetch cannot disagree about a run's key
(`blocklab.schedule.run_store.RunKeys`), and whatever trained a run, the stage's output is the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from blocklab.params.schema import RunSpec
from blocklab.run.data import Corpus
from blocklab.json_files import write_json
from blocklab.records import read_metrics, read_timing, run_dir
from blocklab.run.results import write_record, write_run
from blocklab.schedule.run_store import DamagedEntry, RunKeys, RunStore

if TYPE_CHECKING:  # the trainer (torch: 2-3 s to import) is imported only when a run trains, so that a stage
    from blocklab.run.job import Job  # whose runs are all in the store (after `blocklab prefetch`) copies them
    from blocklab.run.results import RunResult  # in a fraction of a second

# The corpus, or what loads it: loaded only when a run must train.
CorpusSource = Corpus | Callable[[], Corpus]

# What a run costs on one core of this kind of machine, roughly: only for the order runs start in (longest
# first) and the time left. Fitted by least squares to the times of the default plan's 444 runs trained by
# `blocklab prefetch` on 2 one-thread workers (a fresh clone, 2026-12-02; docs/performance.md): seconds per
# FLOP of the matrix products, per token, channel and layer of everything else, and per step and layer and
# per step of what does not grow with the batch (Python, autograd, AdamW's launch, the small kernels' cost).
SECONDS_PER_MATMUL_FLOP = 8.7e-12
SECONDS_PER_TOKEN_CHANNEL_LAYER = 4.2e-8
SECONDS_PER_STEP_LAYER = 4.1e-4
SECONDS_PER_STEP = 2.8e-4
COSTS = (SECONDS_PER_MATMUL_FLOP, SECONDS_PER_TOKEN_CHANNEL_LAYER, SECONDS_PER_STEP_LAYER, SECONDS_PER_STEP)


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan: its resolved settings, seed, store key, and where it may keep a checkpoint."""

    spec: RunSpec
    seed: int
    store_key: str
    checkpoint: Path | None = None
    family: str | None = None  # the numeric family its key was made for

    @property
    def key(self) -> str:
        """Its run key, e.g. `placement/post/seed0`."""
        return self.spec.key(self.seed)

    def job(self) -> Job:
        from blocklab.run.job import Job

        return Job(self.key, self.spec.model.canonical(), self.spec.train, self.seed, self.checkpoint, self.family)


def record_settings(spec: RunSpec, seed: int) -> dict:
    """What a run's record keeps of its settings (settings.json): its run key, seed, and resolved model and
    training settings."""
    return {"run": spec.key(seed), "seed": seed, "model": asdict(spec.model), "train": asdict(spec.train)}


def checkpoint_path(spec: RunSpec, seed: int, variant_dir: Path) -> Path:
    """Where seed `seed` of `spec` keeps its checkpoint, in its variant's checkpoint folder `variant_dir`."""
    return spec.directory(variant_dir) / f"seed{seed}.pt"


def planned_runs(specs: Sequence[RunSpec], keys: RunKeys, checkpoint_dir: Callable[[RunSpec], Path] | None = None
                 ) -> list[PlannedRun]:
    """Every seed of `specs`, keyed; `checkpoint_dir(spec)` is the folder of its variant's checkpoints."""
    return [PlannedRun(spec, seed, key, None if checkpoint_dir is None else
                       checkpoint_path(spec, seed, checkpoint_dir(spec)), keys.family)
            for spec in specs for seed, key in keys.of(spec).items()]


def jobs_of(spec: RunSpec) -> list:
    """A variant's (or a map cell's) seeds as the job runner's jobs, unkeyed and without checkpoints (a
    benchmark's runs)."""
    from blocklab.run.job import Job

    return [Job(spec.key(seed), spec.model.canonical(), spec.train, seed) for seed in spec.seeds]


def estimated_seconds(spec: RunSpec, vocab: int = 65) -> float:
    """About how long one of `spec`'s runs trains on one core: its steps' matrix products and the rest, their
    evaluations (a forward pass, a third of a step, over the validation windows), and a cost per step."""
    return sum(c * n for c, n in zip(COSTS, cost_terms(spec, vocab)))


def cost_terms(spec: RunSpec, vocab: int = 65) -> tuple[float, float, float, float]:
    """What `COSTS` multiply: the run's matrix-product FLOPs, its tokens x channels x layers, its steps x
    layers and its steps (evaluations counted as tokens)."""
    from blocklab.run.model import planned_flops_per_token

    cfg, train = spec.model, spec.train
    layers = max(cfg.n_layers, 1)
    evaluations = train.steps // train.eval_interval + 2
    evaluated = evaluations * (train.eval_windows + train.eval_batches * train.batch_size) * cfg.context / 3
    tokens = train.steps * train.batch_size * cfg.context + evaluated
    return (planned_flops_per_token(cfg, vocab) * tokens, cfg.d_model * layers * tokens, train.steps * layers,
            float(train.steps))


def missing(runs: Sequence[PlannedRun], store: RunStore, echo=print) -> list[PlannedRun]:
    """The runs whose key the store does not hold whole, each key once, in the order given. A damaged entry
    is discarded (and said so): its run is missing."""
    todo, seen = [], set()
    for run in runs:
        if run.store_key in seen:
            continue
        seen.add(run.store_key)
        try:
            if store.verified(run.store_key) is not None:
                continue
        except DamagedEntry as err:
            echo(str(err))
        todo.append(run)
    return todo


def ensure_stored(runs: Sequence[PlannedRun], corpus: CorpusSource, store: RunStore, *, workers: int | None = None,
                  scheduler: str | None = None, progress: str = "runs", name: str = "the plan", echo=print,
                  into: dict[str, RunResult] | None = None) -> dict[str, RunResult]:
    """Train every run of `runs` that the store lacks, longest first, each put into the store as soon as it is
    back (an interruption loses only the runs still training); returns the results trained, by run key.

    Where: on the Dask cluster at `scheduler`, else in this machine's one-thread workers (`workers` at a time;
    default one per run). `progress`: "runs" a bar per run, "plan" one bar for them all (runs done, time
    left), "none". `into`: a dict each result is also put in as soon as it is stored (kept if training fails
    part-way). `corpus`: the corpus, or a function that loads it (called only if a run must train)."""
    todo = missing(runs, store, echo)
    if not todo:
        return {}
    if callable(corpus):
        corpus = corpus()
    todo.sort(key=lambda r: -estimated_seconds(r.spec, corpus.vocab_size))
    count = min(workers or len(todo), len(todo))
    where = f"the Dask cluster at {scheduler}" if scheduler else f"{count} worker{'s' * (count > 1)}"
    echo(f"{name}: training {len(todo)} of {len(runs)} runs on {where}")
    by_key = {run.key: run for run in todo}
    bar = _PlanBar(todo, corpus.vocab_size) if progress == "plan" else None
    say = tqdm.write if bar else echo

    def keep(job: Job, result: RunResult) -> None:
        run = by_key[job.key]
        spec = run.spec
        store.put_written(run.store_key, run.key, lambda folder: write_run(
            folder, result, tokens_per_step=spec.train.batch_size * spec.model.context, model=spec.model,
            chars=corpus.chars))
        if into is not None:
            into[run.key] = result
        if bar:
            bar.done(run)
        else:
            say(_result_line(run.key, result.metrics, result.metrics["steps"] / result.seconds))

    jobs = [run.job() for run in todo]
    try:
        if scheduler:
            from blocklab.schedule.cluster import train_on_cluster  # only then: dask.distributed is an optional dependency

            return train_on_cluster(jobs, corpus, scheduler, echo=say, on_result=keep)
        from blocklab.schedule.pool import train_runs

        return train_runs(jobs, corpus, workers=workers, progress=progress == "runs", on_result=keep)
    finally:
        if bar:
            bar.close()


def stage_runs(runs: Sequence[PlannedRun], corpus: CorpusSource, store: RunStore, out_dir: Path, *,
               records: Path | None = None, workers: int | None = None, scheduler: str | None = None,
               name: str = "the stage", echo=print) -> dict[str, RunResult]:
    """A train stage's work: every run of `runs` into its folder under `out_dir` (the ablation's or the map's:
    <variant>[/<cell>]/seed<k>), copied from the run store, which trains the runs it lacks first
    (`ensure_stored`), and its record into the same folder under `records`
    (`write_record`: what git keeps of it). A run another run key trained first (equal settings) records where
    it came from (`reused_from` in its timing.json). Returns the results trained here."""
    trained: dict[str, RunResult] = {}
    pending = list(runs)
    for attempt in range(2):  # a second time only for an entry damaged between training and copying
        trained.update(ensure_stored(pending, corpus, store, workers=workers, scheduler=scheduler, name=name,
                                     echo=echo))
        damaged = []
        for run in pending:
            directory = run_dir(run.spec.directory(Path(out_dir) / run.spec.variant), run.seed)
            try:
                origin = store.copy_to(run.store_key, directory)
            except DamagedEntry as err:
                if attempt:
                    raise
                echo(str(err))
                damaged.append(run)
                continue
            if records is not None:
                record = run_dir(run.spec.directory(Path(records) / run.spec.variant), run.seed)
                write_record(directory, record, record_settings(run.spec, run.seed))
            if origin != run.key:
                write_json(directory / "timing.json", {**read_timing(directory), "reused_from": origin})
                echo(f"{run.key}: the same run as {origin} (equal settings): copied, not trained again")
            elif run.key not in trained:
                echo(_result_line(run.key, read_metrics(directory), None) + "; trained ahead (blocklab prefetch), "
                     "copied from the run store")
        pending = damaged
        if not pending:
            break
    return trained


def _result_line(key: str, metrics: dict, steps_per_second: float | None) -> str:
    line = f"{key}: train loss (last 25) {_loss(metrics['train_loss_last25'])}, val loss {_loss(metrics['val_loss'])}"
    if steps_per_second is not None:
        line += f", {steps_per_second:.1f} steps/s"
    return line + (f"; diverged at step {metrics['diverged_at_step']}" if metrics["diverged"] else "")


def _loss(value: float | None) -> str:
    """A diverged run records no finite loss: None."""
    return "none (not finite)" if value is None else f"{value:.4f}"


class _PlanBar:
    """One progress bar for many runs: its length is their estimated time, so that the time left it shows
    holds when runs differ a hundredfold; its label counts the runs. The time left is the estimate still to
    train at the average pace so far (tqdm's `smoothing=0`): with one run back per worker at a time, a pace
    smoothed over the latest updates jumps with every pair of runs that end together."""

    def __init__(self, runs: Sequence[PlannedRun], vocab: int):
        self.vocab, self.total, self.count = vocab, len(runs), 0
        self.bar = tqdm(total=sum(estimated_seconds(r.spec, vocab) for r in runs), unit="s",
                        desc=f"training the plan, 0/{self.total} runs",
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed} elapsed, about {remaining} left]",
                        smoothing=0, dynamic_ncols=True)

    def _describe(self) -> None:
        self.bar.set_description_str(f"training the plan, {self.count}/{self.total} runs", refresh=False)

    def done(self, run: PlannedRun) -> None:
        self.count += 1
        self._describe()
        left = self.bar.total - self.bar.n
        # the last run fills the bar exactly (the estimates summed in another order round otherwise): never past
        # 100%, never a negative time left
        self.bar.update(left if self.count == self.total else min(estimated_seconds(run.spec, self.vocab), left))

    def close(self) -> None:
        self.bar.close()
