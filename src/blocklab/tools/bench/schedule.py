"""The whole plan at once against stage by stage, on a cluster of any size, simulated from the runs' measured
times."""

from __future__ import annotations

import json
from pathlib import Path

import click

from blocklab.errors import BlocklabError
from blocklab.params.schema import Params, load_params
from blocklab.schedule.train_stages import stage_name


# --- the whole plan at once against stage by stage, on a cluster of any size -------------------------

def plan_stage_times(params: Params, timings: dict) -> dict[str, list[float]]:
    """Each train and map stage's runs' training times (reports/timings.json), the runs it trains itself:
    a run copied from another stage's (`reused_from`) costs nothing."""
    stages: dict[str, list[float]] = {}
    for spec in params.all_specs():
        stage = stage_name(spec.ablation, is_map=bool(spec.cell))
        for seed in spec.seeds:
            timing = timings.get(spec.key(seed))
            if timing is not None and "reused_from" not in timing:
                stages.setdefault(stage, []).append(timing["seconds"])
    return stages


def longest_first_makespan(seconds: list[float], workers: int) -> float:
    """How long `workers` take to run jobs of these durations, each taking the longest one left as it frees up."""
    import heapq

    free = [0.0] * min(workers, len(seconds))
    for duration in sorted(seconds, reverse=True):
        heapq.heapreplace(free, free[0] + duration)
    return max(free, default=0.0)


def plan_schedule(stages: dict[str, list[float]], workers: list[int]) -> list[dict]:
    """Per cluster size: the plan's training wall time stage by stage (`dvc repro`: each stage's runs on the
    cluster, the next stage when the slowest is back) and all at once (`blocklab prefetch`, longest first),
    and the share of the workers' time each keeps busy."""
    work = sum(map(sum, stages.values()))
    rows = []
    for count in workers:
        by_stage = sum(longest_first_makespan(times, count) for times in stages.values())
        at_once = longest_first_makespan([t for times in stages.values() for t in times], count)
        rows.append({"workers": count, "stage_by_stage_seconds": round(by_stage, 1),
                     "whole_plan_seconds": round(at_once, 1), "ratio": round(by_stage / at_once, 2),
                     "busy_stage_by_stage": round(work / (count * by_stage), 3),
                     "busy_whole_plan": round(work / (count * at_once), 3)})
    return rows


def shown(params_file: str, workers: str, echo=click.echo) -> list[dict]:
    """The simulation from reports/timings.json, printed as a table."""


    timings_file = Path("reports/timings.json")
    if not timings_file.exists():
        raise BlocklabError(f"{timings_file} does not exist: it holds the runs' measured times; run `dvc repro` first")
    try:
        counts = [int(n) for n in workers.split(",")]
    except ValueError:
        raise BlocklabError(f"--workers {workers!r} is not a list of numbers such as 8,32,128") from None
    stages = plan_stage_times(load_params(params_file), json.loads(timings_file.read_text()))
    rows = plan_schedule(stages, counts)
    runs = sum(map(len, stages.values()))
    echo(f"\nthe plan's {runs} trained runs in {len(stages)} stages ({sum(map(sum, stages.values())):,.0f} s "
               f"of training, as measured), simulated on a cluster, each run on a free worker, longest first:\n"
               f"{'workers':>8}  {'stage by stage':>15}  {'whole plan at once':>19}  {'ratio':>6}  "
               f"{'busy, stage by stage':>21}  {'busy, at once':>14}")
    for row in rows:
        echo(f"{row['workers']:>8}  {row['stage_by_stage_seconds']:>13,.0f} s  {row['whole_plan_seconds']:>17,.0f} s"
                   f"  {row['ratio']:>5.2f}x  {row['busy_stage_by_stage']:>21.0%}  {row['busy_whole_plan']:>14.0%}")
    return rows
