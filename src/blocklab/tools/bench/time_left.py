"""How well the plan bar of the last `blocklab prefetch` told the time left, replayed on its runs' times."""

from __future__ import annotations

from pathlib import Path

import click

from blocklab.params.schema import Params, load_params
from blocklab.tools.bench.both_ways import run_timings


# --- the plan bar's time left, against what the runs took ---------------------------------------------

def time_left_quality(params: Params, runs_dir: Path, at: tuple[float, ...] = (0.02, 0.05, 0.1, 0.25, 0.5, 0.75)
                      ) -> dict:
    """How well `blocklab prefetch`'s bar told the time left, from the runs it trained (their timing.json
    under `runs_dir`, all trained in one prefetch): after each share `at` of the runs was back, the time left
    the bar showed (the estimate still to train at the average pace so far, `blocklab.schedule.plan.estimated_seconds`)
    against the time the rest took. Also the least-squares fit of the estimate's four costs to these runs,
    which is where `blocklab.schedule.plan.COSTS` come from."""
    import numpy as np

    from blocklab.schedule.plan import cost_terms, estimated_seconds

    timings = run_timings(runs_dir)
    runs = [(spec, timings[spec.key(seed)]) for spec, seed in params.runs()
            if "reused_from" not in timings.get(spec.key(seed), {"reused_from": None})]
    if not runs:
        raise ValueError(f"no trained run's timing.json under {runs_dir}")
    seconds = np.array([t["seconds"] for _, t in runs])
    estimated = np.array([estimated_seconds(spec) for spec, _ in runs])
    start = min(t["started_at"] for _, t in runs)
    ended = np.array([t["ended_at"] - start for _, t in runs])
    order = np.argsort(ended)
    done, back, total = np.cumsum(estimated[order]), ended[order], ended.max()
    rows = []
    for share in at:
        i = max(int(share * len(runs)) - 1, 0)
        said = back[i] * (done[-1] - done[i]) / done[i]
        rows.append({"runs_back": i + 1, "elapsed": round(float(back[i]), 1), "time_left_said": round(float(said), 1),
                     "time_left_was": round(float(total - back[i]), 1), "ratio": round(float(said / (total - back[i])), 2)})

    fitted, *_ = np.linalg.lstsq(np.array([cost_terms(spec) for spec, _ in runs]), seconds, rcond=None)
    ratio = seconds / estimated
    return {"runs": len(runs), "at": rows, "measured_over_estimated": {
                "p10": round(float(np.percentile(ratio, 10)), 2), "median": round(float(np.median(ratio)), 2),
                "p90": round(float(np.percentile(ratio, 90)), 2)},
            "fitted": dict(zip(("SECONDS_PER_MATMUL_FLOP", "SECONDS_PER_TOKEN_CHANNEL_LAYER", "SECONDS_PER_STEP_LAYER",
                                "SECONDS_PER_STEP"), (float(f"{c:.2g}") for c in fitted)))}


def shown(params_file: str, echo=click.echo) -> dict:
    """The replay of the last prefetch's bar, printed."""

    quality = time_left_quality(load_params(params_file), Path("data/runs"))
    echo(f"\nthe plan bar's time left, {quality['runs']} runs (measured / estimated a run: median "
               f"{quality['measured_over_estimated']['median']:.2f}, 10-90% {quality['measured_over_estimated']['p10']:.2f}"
               f"-{quality['measured_over_estimated']['p90']:.2f}):")
    for row in quality["at"]:
        echo(f"  after {row['runs_back']:>4} runs ({row['elapsed']:>6.0f} s): said {row['time_left_said']:>6.0f} s "
                   f"left, took {row['time_left_was']:>6.0f} s ({row['ratio']:.2f}x)")
    echo("  costs fitted to these runs: " + ", ".join(f"{k} = {v:.2g}" for k, v in quality["fitted"].items()))
    return quality
