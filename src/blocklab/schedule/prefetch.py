"""`blocklab prefetch`: train every run that `dvc repro` is about to need, all at once, into the run store.

`dvc repro` runs one stage at a time, and a train or map stage trains only its own runs: on a cluster of
many workers, or on two cores with a 3-seed stage, the workers wait on each stage's slowest run before the
next stage starts. Any process that trains a run with a stage's key leaves it where that stage copies it
from (`blocklab.schedule.run_store`), so the whole plan can train first, every run at once, longest first, and
`dvc repro` then copies every run and trains nothing, writing what it would have written.

Which runs: those of the train and map stages (`train@<ablation>`, `map@<map>`) among
the targets and what they depend on (as `dvc repro TARGETS` would run them) that DVC's own status reports
out of date, less the stages DVC would restore from its run cache and the runs the store already holds.
The stages the train stages depend on that train nothing (download, encode) are brought up to date
first, through DVC: the runs' keys hash the encoded corpus.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import BlocklabError
from blocklab.params.schema import Params
from blocklab.schedule.plan import PlannedRun, missing, planned_runs
from blocklab.schedule.run_store import RunKeys, RunStore
from blocklab.schedule.train_stages import ENCODED, TrainStage, train_stage



CHECKPOINTS = Path("data/checkpoints")
POOL_RESTARTS = 3  # how often a local pool whose worker died starts again with the runs not yet back


@dataclass
class Stale:
    """What `dvc repro` would train: the out-of-date train stages, and those of them DVC restores instead."""

    stages: list[TrainStage]
    restorable: list[str]
    up_to_date: int


def stale_train_stages(targets: tuple[str, ...] = (), echo=print) -> Stale:
    """The train and map stages among `targets` and their dependencies (default: the whole pipeline) that
    DVC reports out of date, after bringing the stages they depend on that train nothing up to date."""
    from dvc.repo import Repo
    from dvc.stage.cache import RunCacheNotFoundError
    from dvc_data.hashfile.hash_info import HashInfo

    with Repo() as repo:
        stages = _collected(repo, targets)
        trains = [s for s in stages if train_stage(s.addressing)]
        upstream = sorted({s.addressing for t in trains for s in repo.stage.collect(t.addressing, with_deps=True)
                           if not train_stage(s.addressing)})
        if upstream:
            echo(f"bringing {', '.join(upstream)} up to date (dvc repro)")
            repo.reproduce(targets=upstream)
            stages = _collected(repo, targets)  # re-read: the reproduction rewrote dvc.lock
            trains = [s for s in stages if train_stage(s.addressing)]
        changed = set(repo.status(targets=[s.addressing for s in trains])) if trains else set()
        stale, restorable = [], []
        for stage in trains:
            if stage.addressing not in changed:
                continue
            try:
                stage.save_deps()  # today's dependencies, which DVC's run cache is keyed by
                # ... and no outputs: given the lock's own (whose files DVC's cache holds after any earlier
                # repro here) and dependencies that now look current, a dry restore counts the stage as
                # restorable from itself; without them DVC looks its run cache up by today's dependencies.
                for out in stage.outs:
                    out.hash_info = HashInfo()
                repo.stage_cache.restore(stage, dry=True)
                restorable.append(stage.addressing)
            except RunCacheNotFoundError:
                stale.append(train_stage(stage.addressing))
    return Stale(stale, restorable, len(trains) - len(changed))


def _collected(repo, targets: tuple[str, ...]) -> list:
    if not targets:
        return list(repo.index.stages)
    seen: dict[str, object] = {}
    for target in targets:
        for stage in repo.stage.collect(target, with_deps=True):
            seen.setdefault(stage.addressing, stage)
    return list(seen.values())


def runs_of_stages(params: Params, stages: list[TrainStage], keys: RunKeys) -> list[PlannedRun]:
    """Every run of `stages`, in dvc.yaml's order of the plan (ablations, then maps), with the checkpoint
    folder its stage gives it (so that a run interrupted here resumes in its stage, and the reverse)."""
    wanted = {s.ablation for s in stages}
    order = [*params.ablations, *params.maps]
    unknown = wanted - set(order)
    if unknown:
        raise BlocklabError(f"dvc.yaml's stages {', '.join(sorted(s.name for s in stages if s.ablation in unknown))} "
                            f"train nothing params.yaml defines: is dvc.yaml out of step with params.yaml?")
    specs = [spec for name in order if name in wanted for spec in params.all_runs_of(name)]
    return planned_runs(specs, keys, lambda spec: CHECKPOINTS / spec.ablation / spec.variant)


@dataclass
class Prefetched:
    distinct: int  # runs of the out-of-date stages, those of equal settings counted once
    stored: int  # of those, already in the run store
    trained: int
    seconds: float
    busy: float  # the workers' time spent training runs over their time available


def busy_fraction(results: dict, seconds: float, workers: int) -> float:
    """The share of the workers' time (`workers` x `seconds`) that went into training the runs."""
    return sum(r.seconds for r in results.values()) / (workers * seconds) if seconds and workers else 0.0


def train_ahead(runs: list[PlannedRun], corpus, store: RunStore, workers: int, scheduler: str | None,
                echo=print) -> Prefetched:
    """Train `runs` that the store lacks, all at once, longest first, one bar for them all. A local worker
    that dies takes the runs in flight with it (the pool ends): what finished is in the store, and the
    rest starts again in a new pool, up to `POOL_RESTARTS` times (on Dask, the cluster reschedules them)."""
    from blocklab.schedule.plan import ensure_stored
    from blocklab.schedule.pool import WorkerDied

    distinct = len({run.store_key for run in runs})
    todo = missing(runs, store, echo)
    started = time.monotonic()
    results: dict = {}
    for restart in range(POOL_RESTARTS + 1):
        try:
            ensure_stored(todo, corpus, store, workers=workers, scheduler=scheduler, progress="plan",
                          name="prefetch", echo=echo, into=results)
            break
        except WorkerDied as err:
            if restart == POOL_RESTARTS:
                raise
            echo(f"{err}; the runs that finished are in the run store, the others start again")
    seconds = time.monotonic() - started
    return Prefetched(distinct, distinct - len(todo), len(results), seconds, busy_fraction(results, seconds, workers))


def in_default_plan(params: Params, stages: list[TrainStage]) -> tuple[list[TrainStage], list[TrainStage]]:
    """(the stages of the default plan, those of the extended plan) among `stages` (params.yaml's `plan:`)."""
    extended = set(params.in_plan("extended"))
    return [s for s in stages if s.ablation not in extended], [s for s in stages if s.ablation in extended]


def prefetch_reported(params: Params, targets: tuple[str, ...], workers: int | None, scheduler: str | None,
                      dry_run: bool, store_dir: Path, extended: bool = False) -> None:
    """`blocklab prefetch`: the out-of-date stages' runs trained into the store (or, `dry_run`, counted), said as it
    goes; a Ctrl-C keeps every finished run and says so. Without `targets`, the default plan's stages only, unless
    `extended`."""
    import os

    import click

    from blocklab.run.data import load_corpus
    from blocklab.schedule.cluster import connect, scheduler_address

    address = scheduler_address(scheduler)
    if address:  # before any work: an unreachable scheduler fails within seconds, naming its address
        client = connect(address)
        workers = len(client.scheduler_info().get("workers", {}))
        client.close()
    else:
        workers = workers or os.cpu_count() or 1
    stale = stale_train_stages(targets, echo=click.echo)
    if not targets and not extended:
        stale.stages, left_out = in_default_plan(params, stale.stages)
        if left_out:
            click.echo(f"{len(left_out)} out-of-date stages of the extended plan left out "
                       f"({', '.join(s.name for s in left_out)}): `blocklab prefetch --extended` trains them too")
    store = RunStore(store_dir)
    runs = runs_of_stages(params, stale.stages, RunKeys(ENCODED)) if stale.stages else []
    click.echo(f"{len(stale.stages)} train and map stages out of date ({stale.up_to_date} up to date"
               + (f", {len(stale.restorable)} restored from DVC's run cache by dvc repro" if stale.restorable else "")
               + f"): {len(runs)} runs")
    if not runs:
        click.echo("nothing to train: every train and map stage is up to date (or restored by DVC's run cache)")
        return
    if dry_run:
        todo, distinct = missing(runs, store, click.echo), len({run.store_key for run in runs})
        click.echo(f"{distinct} distinct (the others' settings equal one of them): {distinct - len(todo)} in the run "
                   f"store, {len(todo)} would train" + "".join(f"\n  {stage.name}" for stage in stale.stages))
        return
    try:
        done = train_ahead(runs, load_corpus(ENCODED), store, workers, address, echo=click.echo)
    except KeyboardInterrupt:
        raise click.ClickException(f"interrupted: the run store keeps every run that finished ({store_dir}); "
                                   f"`blocklab prefetch` again trains the rest") from None
    where = f"the Dask cluster at {address} ({workers} workers)" if address else f"{workers} local workers"
    click.echo(f"{done.stored} of {done.distinct} distinct runs were in the run store; {done.trained} trained in "
               f"{done.seconds:.0f} s on {where}, busy {done.busy:.0%} of the time. Now `dvc repro` copies them.")
