"""`blocklab bench`: what blocklab's developers measure (the trainer, the pipeline, the plan's schedule)."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.errors import reports_errors
from blocklab.options import params_option
from blocklab.params.former import name_today
from blocklab.params.schema import load_params
from blocklab.schedule.train_stages import ENCODED


@click.command(short_help="The trainer against the lesson's loop; the pipeline's costs.")
@click.option("--ablation", default="placement", show_default=True, help="Whose runs to benchmark.")
@click.option("--steps", type=int, default=None, help="Override the steps of every run (shorter benchmark).")
@click.option("--encoded", default=str(ENCODED), show_default=True, type=click.Path(file_okay=False),
              help="Encoded corpus (made by `dvc repro encode`), for the trainer comparison and --plan-against.")
@click.option("--trainer/--no-trainer", default=True, show_default=True,
              help="Compare the trainer with the lesson's plain loop (--no-trainer: only what the flags below ask).")
@click.option("--rounding", is_flag=True,
              help="Also run the plain loop with torch's default thread count: how far a change of rounding alone "
                   "moves each result.")
@click.option("--pipeline", is_flag=True, help="Also force a full `dvc repro` and measure the pipeline's overhead.")
@click.option("--queue", is_flag=True,
              help="Also time a small sweep through `dvc exp run --queue` with `dvc queue start -j 1` and `-j 2`.")
@click.option("--plan-against", "old_params", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Also compare the training time of this params file's plan with --params's: the variants that "
                   "differ train under both, alternating (e.g. --plan-against <(git show HEAD~1:params.yaml)).")
@click.option("--plan-schedule", is_flag=True,
              help="Also simulate, from the plan's measured run times (reports/timings.json), its training on "
                   "clusters of --workers workers: stage by stage (dvc repro) against all at once (blocklab prefetch).")
@click.option("--workers", default="2,8,32,128", show_default=True, metavar="N,N,...",
              help="The cluster sizes --plan-schedule simulates.")
@click.option("--time-left", "time_left", is_flag=True,
              help="Also tell how well the last `blocklab prefetch` told the time left, from its runs' times in "
                   "data/runs (every run trained by it, from an empty store), and fit the estimate's costs to them.")
@click.option("--through-dvc", "through_dvc", is_flag=True,
              help="Also train the ablation's runs through DVC from fresh clones of HEAD, both ways (`dvc repro` stage by "
                   "stage; `blocklab prefetch` and `dvc repro`): seconds per run, start-up included, against the "
                   "lesson's loop.")
@click.option("--make-repro", "make_repro", is_flag=True,
              help="Also reproduce the whole default plan from nothing twice, in two fresh clones of HEAD: `dvc repro` stage by "
                   "stage, then `blocklab prefetch` and `dvc repro` (an hour or more on two cores).")
@click.option("--dask-workers", type=int, default=0, show_default=True,
              help="With --make-repro or --through-dvc: train both ways on a local Dask cluster of this many one-thread "
                   "workers.")
@click.option("--numerics", is_flag=True,
              help="Also time one run of the ablation (its first variant, seed 0) on every numeric path - unpinned, "
                   "each pin alone, blocklab's pins, MKL's COMPATIBLE branch - in fresh processes, 3 times each.")
@click.option("--rotary", default=None, is_flag=False, flag_value="modern_ladder/peri,no_rope",
              metavar="ABLATION/WITH,WITHOUT",
              help="Also time rotary positions: a training step of ABLATION's variant WITH (rotary) against WITHOUT "
                   "(the learned table), and the rotation against the attention it rotates  "
                   "[flag alone: modern_ladder/peri,no_rope].")
@click.option("--repeats", type=click.IntRange(min=3), default=50, show_default=True,
              help="With --rotary: the calls timed of each side, alternated.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Also write the figures here.")
@params_option
@reports_errors
def bench(ablation: str, steps: int | None, encoded: str, trainer: bool, rounding: bool, pipeline: bool,
          queue: bool, old_params: str | None, plan_schedule: bool, workers: str, time_left: bool, through_dvc: bool,
          make_repro: bool, dask_workers: int, numerics: bool, rotary: str | None, repeats: int, json_out: str | None,
          params_file: str) -> None:
    """Trainer vs the lesson's plain loop on the same runs: throughput ratio, equal results, GFLOP/s, and the
    ceiling on the ratio for bitwise-equal results (one step's kernels at one thread, by kind); with
    --rounding, --pipeline and --queue, how far rounding alone moves results, the pipeline's overhead and a
    queued sweep's speed-up too; with --through-dvc, --make-repro, --plan-schedule and --time-left, training
    through DVC stage by stage against `blocklab prefetch` (an ablation, the whole plan, simulated clusters)
    and how well prefetch's bar told the time left; with --rotary, what rotary positions cost a step. Prints ratios: every comparison is measured within one
    run, because the machines are shared and noisy."""
    import json

    from blocklab.tools.bench import both_ways as both_ways_bench
    from blocklab.tools.bench import numerics as numerics_bench
    from blocklab.tools.bench import pipeline as pipeline_bench
    from blocklab.tools.bench import queue as queue_bench
    from blocklab.tools.bench import rotary as rotary_bench
    from blocklab.tools.bench import schedule as schedule_bench
    from blocklab.tools.bench import time_left as time_left_bench
    from blocklab.tools.bench import trainer as trainer_bench

    ablation = name_today(ablation)
    if through_dvc and not trainer:
        raise click.UsageError("--through-dvc compares with the lesson's loop, which the trainer comparison times: "
                               "drop --no-trainer")
    if through_dvc and steps is not None:
        raise click.UsageError("--through-dvc trains the runs as params.yaml sets them, and the lesson's loop must "
                               "train the same: drop --steps")
    figures: dict = {}
    if trainer:
        figures.update(trainer_bench.shown(ablation, steps, encoded, params_file, rounding))
    if pipeline:
        figures["pipeline"] = pipeline_bench.shown_overhead()
    if queue:
        figures["queue"] = queue_bench.shown()
    if old_params:
        figures["plan"] = pipeline_bench.shown_plan_cost(old_params, params_file, encoded)
    if plan_schedule:
        figures["plan_schedule"] = schedule_bench.shown(params_file, workers)
    if time_left:
        figures["time_left"] = time_left_bench.shown(params_file)
    if through_dvc:
        figures["through_dvc"] = both_ways_bench.shown_per_run(ablation, params_file, dask_workers, figures["reference"])
    if numerics:
        variant = next(iter(load_params(params_file).ablations[ablation].variants))
        figures["numerics"] = numerics_bench.shown(ablation, variant, 0, steps, encoded, params_file, repeats=3)
    if rotary:
        where, _, pair = rotary.partition("/")
        with_rope, _, without_rope = pair.partition(",")
        if not (where and with_rope and without_rope):
            raise click.BadParameter(f"'{rotary}': give ABLATION/WITH,WITHOUT, e.g. modern_ladder/peri,no_rope",
                                     param_hint="--rotary")
        figures["rotary"] = rotary_bench.shown(name_today(where), with_rope, without_rope, encoded, params_file,
                                               repeats)
    if make_repro:
        click.echo("\nthe whole default plan from nothing, both ways")
        figures["make_repro"] = both_ways_bench.shown((), dask_workers)
    if json_out:
        Path(json_out).write_text(json.dumps(figures, indent=2) + "\n")
