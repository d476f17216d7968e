"""`blocklab params`, `prefetch` and `store`: the plan in params.yaml, its runs trained ahead of `dvc repro`,
and the run store they go into."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.params.former import name_today
from blocklab.params.schema import load_params
from blocklab.schedule.train_stages import ENCODED, STORE_DIR


@click.command("params", short_help="Validate params.yaml; print every run's settings.")
@click.option("--stages", "plan", type=click.Choice(["default", "extended"]), default=None,
              help="Print only the train and map stages of this plan (params.yaml's `plan:`), one a line: what "
                   "`make repro` passes to `dvc repro`.")
@params_option
@reports_errors
def show_params(plan: str | None, params_file: str) -> None:
    """Validate params.yaml and print every run's fully resolved settings: each ablation's variants, then
    each map's cells (a map's variant crossed with its axes). With --stages PLAN, the DVC stages that train
    plan PLAN instead."""
    import pandas as pd

    from blocklab.schedule.train_stages import stage_name

    params = load_params(params_file)
    if plan:
        for name in params.in_plan(plan):
            click.echo(stage_name(name, name in params.maps))
        return
    rows = []
    for spec in params.all_specs():
        rows.append({"ablation": spec.ablation, "variant": spec.variant, "cell": spec.cell or "-",
                     "seeds": ",".join(map(str, spec.seeds)), **asdict(spec.model), **asdict(spec.train)})
    click.echo(pd.DataFrame(rows).to_string(index=False))


@click.command(short_help="Train the runs `dvc repro` will need, all at once.")
@click.argument("targets", nargs=-1)
@click.option("--workers", type=int, default=None,
              help="Local worker processes, one thread each [default: one per core].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A Dask scheduler (tcp://host:8786) to train on instead of the local workers "
                   "[default: $BLOCKLAB_DASK_SCHEDULER, else the local workers].")
@click.option("--dry-run", is_flag=True, help="Only say which stages are out of date and how many runs would train.")
@click.option("--extended", is_flag=True,
              help="Without TARGETS, the extended plan's stages too (params.yaml's `plan: extended`; `make "
                   "repro-extended`) [default: the default plan's only].")
@click.option("--store", "store_dir", default=str(STORE_DIR), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="The run store (blocklab.schedule.run_store).")
@params_option
@reports_errors
def prefetch(targets: tuple[str, ...], workers: int | None, scheduler: str | None, dry_run: bool, extended: bool,
             store_dir: Path, params_file: str) -> None:
    """Train every run that `dvc repro [TARGETS...]` is about to need, all at once, into the run store; then
    `dvc repro` copies them and trains nothing.

    The runs of the train and map stages that DVC reports out of date (among TARGETS and what they depend
    on, as `dvc repro TARGETS` would run them; default: the whole default plan, and with --extended the
    extended plan's too), less those DVC would restore
    from its run cache and those the run store holds, train longest first: on the Dask cluster when a
    scheduler is set, else in one-thread workers on this machine, one per core. Each result goes into the
    store the moment it is back: an interruption (Ctrl-C, a lost machine) loses only the runs still training.
    The stages that train nothing before them (download, encode) are reproduced first, through DVC."""
    from blocklab.schedule.prefetch import prefetch_reported

    prefetch_reported(load_params(params_file), tuple(name_today(target) for target in targets), workers, scheduler,
                      dry_run, store_dir, extended)


@click.command(short_help="What the run store holds and the plan uses; --prune the rest.")
@click.option("--prune", is_flag=True, help="Remove the entries no run of params.yaml needs with today's code, "
                                            "corpus and torch, and what interrupted writes left.")
@click.option("--store", "store_dir", default=str(STORE_DIR), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="The run store (blocklab.schedule.run_store).")
@click.option("--encoded", default=str(ENCODED), show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="The encoded corpus the plan's runs train on.")
@params_option
@reports_errors
def store(prune: bool, store_dir: Path, encoded: Path, params_file: str) -> None:
    """What the run store holds: its entries and their size, and how many of them the plan in params.yaml uses
    (with today's training code, corpus and torch: an entry made by other code is never used again). With
    --prune, remove the rest."""
    from blocklab.schedule.run_store import store_reported

    store_reported(store_dir, encoded, params_file, prune)
