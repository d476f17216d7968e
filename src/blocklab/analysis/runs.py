"""Every run of the plan in one place (stage `evaluate`): its record gathered with how it ended (reports/metrics.json,
reports/timings.json), each variant's seed statistics (reports/variants.json), and the frames the figures draw from."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from blocklab.analysis.intervals import half_width
from blocklab.analysis.run_table import RunTable
from blocklab.analysis.stream import stream_metrics
from blocklab.records import read_curve, read_layers, read_metrics, read_timing, run_dir

COLLAPSE_MARGIN = 0.05  # a run "collapsed" when it ends no more than this below the unigram baseline (or above it)
BLOWN_UP_MARGIN = 0.5  # a run "blew up" when it ends more than this above the uniform guess, ln V, or not finite


def outcome(final: float | None, diverged: bool, baselines: dict) -> dict[str, bool]:
    """How a run that does not learn ended, from its final training loss: `blown_up` (not finite, or more than
    BLOWN_UP_MARGIN above the uniform guess: worse than knowing nothing), else `collapsed` (within
    COLLAPSE_MARGIN of the unigram baseline or above it: it learnt the character frequencies and nothing more)."""
    blown_up = diverged or final is None or final > baselines["uniform"] + BLOWN_UP_MARGIN
    return {"collapsed": not blown_up and final >= baselines["unigram"] - COLLAPSE_MARGIN, "blown_up": blown_up}


def collect(table: RunTable, runs_dir: Path, baselines: dict, only: set[str] | None = None,
            timings_dir: Path | None = None) -> tuple[dict, dict]:
    """(metrics, timings) for every run of the plan (or only those of the ablations and maps `only`
    names), keyed `<ablation>/<variant>/seed<k>` (a map's `<map>/<variant>/<cell>/seed<k>`): the metrics from
    the runs' folders in `runs_dir` (their committed records, reports/runs, or the train stages' outputs), the
    wall times from `timings_dir` (default: `runs_dir`) for the runs trained or copied on this machine (a
    record keeps none; neither does DVC's cache). Each run's metrics gain how it ended (`outcome`) and its
    residual stream's measures (blocklab.analysis.stream)."""
    runs, timings = {}, {}
    for spec, seed in table.runs():
        if only is not None and spec.ablation not in only:
            continue
        directory = run_dir(spec.directory(Path(runs_dir) / spec.ablation / spec.variant), seed)
        if not (directory / "metrics.json").exists():
            raise FileNotFoundError(f"run {spec.key(seed)} has no results in {directory}: run `dvc repro` to train it")
        metrics = read_metrics(directory)
        metrics.update(outcome(metrics["train_loss_last25"], bool(metrics.get("diverged")), baselines))
        layers = read_layers(directory) if (directory / "layers.csv").exists() else None
        metrics.update(stream_metrics(metrics, layers))
        runs[spec.key(seed)] = metrics
        timed = run_dir(spec.directory(Path(timings_dir or runs_dir) / spec.ablation / spec.variant), seed)
        if (timed / "timing.json").exists():
            timings[spec.key(seed)] = read_timing(timed)
    return {"baselines": baselines, "runs": runs}, timings


def variant_summary(table: RunTable, metrics: dict) -> dict[str, dict]:
    """reports/variants.json, what `dvc exp show` lists: per `<ablation>/<variant>`, the seed mean of the
    final validation loss and of `train_loss_last25` with the half-width of its 95% Student-t interval
    (`_ci95`), and how many seeds collapsed or blew up (diverged included). A mean is over the seeds that recorded a value;
    an interval needs two."""
    summary = {}
    for spec in table.specs():
        runs = [metrics["runs"][spec.key(seed)] for seed in spec.seeds]
        entry = {}
        for field, name in (("val_loss", "val_loss"), ("train_loss_last25", "train_loss")):
            values = pd.Series([run[field] for run in runs], dtype=float).dropna()
            entry[f"{name}_mean"] = round(float(values.mean()), 6) if len(values) else None
            entry[f"{name}_ci95"] = round(half_width(values), 6) if len(values) > 1 else None
        entry["collapsed"] = sum(bool(run["collapsed"]) for run in runs)
        entry["blown_up"] = sum(bool(run["blown_up"]) for run in runs)
        summary[f"{spec.ablation}/{spec.variant}"] = entry
    return summary


def runs_frame(table: RunTable, ablation: str, metrics: dict) -> pd.DataFrame:
    """One row per run of an ablation: its final metrics beside the settings that vary."""
    rows = []
    for spec in table.ablations[ablation].specs:
        for seed in spec.seeds:
            rows.append({"variant": spec.variant, "label": spec.label, "seed": seed,
                         "n_layers": spec.model.n_layers, "residual": spec.model.residual,
                         **metrics["runs"][spec.key(seed)]})
    return pd.DataFrame(rows)


def curves_frame(table: RunTable, ablation: str, runs_dir: Path) -> pd.DataFrame:
    """Every step of every run of an ablation, long format."""
    frames = []
    for spec in table.ablations[ablation].specs:
        for seed in spec.seeds:
            curve = read_curve(run_dir(Path(runs_dir) / ablation / spec.variant, seed))
            frames.append(curve.assign(variant=spec.variant, label=spec.label, seed=seed))
    return pd.concat(frames, ignore_index=True)


CURVE_FIELDS = ("loss", "grad_norm")  # what reports/curves/<ablation>.csv holds of each step


def curve_table(curves: pd.DataFrame, smoothing: int = 10) -> pd.DataFrame:
    """What `dvc plots` draws of an ablation, a line per variant: one row per (variant, step), the seed-mean
    training loss and gradient norm, each a mean over the last `smoothing` steps. Long, so that one definition in
    dvc.yaml draws every ablation's, whatever its variants."""
    parts = []
    for (variant, label), runs in curves.groupby(["variant", "label"], sort=False):
        means = runs.groupby("step")[list(CURVE_FIELDS)].mean().rolling(smoothing, min_periods=1).mean()
        parts.append(means.reset_index().assign(variant=variant, label=label))
    return pd.concat(parts, ignore_index=True)[["step", "variant", "label", *CURVE_FIELDS]]
