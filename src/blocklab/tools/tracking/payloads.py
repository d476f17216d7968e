"""What is logged of a run: its key, its parameters, its tags, its curves as MLflow metrics with the training's own
times, its speed, and a variant's seed statistics: all read from the run's files."""

from __future__ import annotations
from blocklab.tools.tracking.claiming import LOGGER_TAG, RUN_KEY_TAG, SINCE_TAG

import functools
import hashlib
import json
import os
import socket
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from blocklab.params.schema import RunSpec
from blocklab.records import read_curve, read_metrics, read_timing
from blocklab.run.results import LAYER_PROBES
from blocklab.schedule.train_stages import stage_name


SEED_STATISTICS = ("train_loss_last25", "val_loss", "max_grad_norm")  # a parent run's <name>_mean and <name>_std


BATCH = 1000  # MLflow accepts at most 1,000 metric values per log_batch call


def variant_key(spec: RunSpec, seed_keys: list[str]) -> str:
    """A parent run's key: its variant and the keys of the seed runs it summarises."""
    return f"{spec.name}@{hashlib.sha256(' '.join(seed_keys).encode()).hexdigest()[:16]}"


def run_key(spec: RunSpec, seed: int, directory: Path) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps({"model": asdict(spec.model), "train": asdict(spec.train), "seed": seed},
                             sort_keys=True).encode())
    for name in ("metrics.json", "curve.csv"):
        digest.update((Path(directory) / name).read_bytes())
    return f"{spec.key(seed)}@{digest.hexdigest()[:16]}"


def flat_params(spec: RunSpec, seed: int) -> dict[str, str]:
    return {**{f"model.{k}": str(v) for k, v in asdict(spec.model).items()},
            **{f"train.{k}": str(v) for k, v in asdict(spec.train).items()},
            "seed": str(seed), "ablation": spec.ablation, "variant": spec.variant, **({"cell": spec.cell} if spec.cell else {})}


@functools.cache
def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


CURVE_METRICS = {"loss": "train_loss", "grad_norm": "grad_norm", "lr": "lr", "val_loss": "val_loss"}


def training_times(directories) -> tuple[int | None, int | None]:
    """When the runs' training started and ended (ms since the epoch, recorded by the train stage), so that
    MLflow's Created order, Duration and time axis are the training's, not the logging's."""
    times = [read_timing(d) for d in directories if (Path(d) / "timing.json").exists()]
    starts = [t["started_at"] for t in times if t.get("started_at")]
    ends = [t["ended_at"] for t in times if t.get("ended_at")]
    return (int(min(starts) * 1000) if starts else None, int(max(ends) * 1000) if ends else None)


def _step_times(curve: pd.DataFrame, start_ms: int | None, end_ms: int | None) -> list[int]:
    """Each step's wall-clock time: spread evenly over the training (now, where it was not recorded)."""
    if start_ms is None or end_ms is None:
        return [int(time.time() * 1000)] * len(curve)
    last = max(int(curve["step"].max()) + 1, 1)
    return [start_ms + (end_ms - start_ms) * (int(step) + 1) // last for step in curve["step"]]


def curve_metrics(curve: pd.DataFrame, start_ms: int | None, end_ms: int | None):
    from mlflow.entities import Metric

    metrics = []
    stamps = _step_times(curve, start_ms, end_ms)
    for column, name in CURVE_METRICS.items():
        for step, value, stamp in zip(curve["step"], curve[column], stamps):
            if pd.notna(value):
                metrics.append(Metric(name, float(value), stamp, int(step)))
    return metrics


def layer_curve_metrics(layers: pd.DataFrame, start_ms: int | None, end_ms: int | None):
    """layers.csv as MLflow metrics: each block's diagnostics at each evaluation step, named
    `<probe>_l<block>` (resid_rms_l1, block_cos_l24, ...), so that MLflow charts a block's history. A model
    without blocks (the bigram) has none."""
    from mlflow.entities import Metric

    if layers.empty:
        return []
    stamps = dict(zip(layers["step"], _step_times(layers, start_ms, end_ms)))
    return [Metric(f"{probe}_l{int(row['layer'])}", float(row[probe]), stamps[row["step"]], int(row["step"]))
            for _, row in layers.iterrows() for probe in LAYER_PROBES if pd.notna(row[probe])]


def run_tags(spec: RunSpec, key: str) -> dict[str, str]:
    tags = {RUN_KEY_TAG: key, "blocklab.ablation": spec.ablation, "blocklab.variant": spec.variant,
            "dvc.stage": stage_name(spec.ablation, is_map=bool(spec.cell))}
    if spec.cell:
        tags["blocklab.cell"] = spec.cell
    if commit := _git_commit():
        tags["mlflow.source.git.commit"] = commit
    if exp_name := os.environ.get("DVC_EXP_NAME"):  # set by `dvc exp run`, queued or not
        tags["DVC_EXP_NAME"] = exp_name
    tags[LOGGER_TAG], tags[SINCE_TAG] = f"{socket.gethostname()}:{os.getpid()}", repr(time.time())
    return tags


def speed(directory: Path, recorded: dict) -> dict[str, float]:
    """A run's wall time, steps and training FLOPs per second (its metrics.json: `recorded`), where its wall times
    are here."""
    if not (Path(directory) / "timing.json").exists():  # restored from DVC's cache, which keeps no wall times
        return {}
    seconds = read_timing(directory)["seconds"]
    rates = {"train_seconds": float(seconds), "steps_per_second": recorded["steps"] / seconds}
    if recorded.get("training_flops") is not None:
        rates["flops_per_second"] = recorded["training_flops"] / seconds
    return rates


def variant_metrics(directories: dict[int, Path], baselines: dict, now_ms: int,
                    trained: dict[int, Path] | None = None) -> list:
    """A parent run's metrics, from the seeds' folders `directories`: per step the seed mean of each curve; the
    seed mean and standard deviation (n - 1) of the final figures; the slowest seed's wall time (the seeds train
    side by side, so the variant took that long) and the seeds' mean speed, from `trained` (the runs' outputs,
    default `directories`) where they are here."""
    from mlflow.entities import Metric

    curves = pd.concat([read_curve(d) for d in directories.values()])
    means = curves.groupby("step")[list(CURVE_METRICS)].mean()  # NaN where no seed has a value
    metrics = [Metric(name, float(value), now_ms, int(step)) for column, name in CURVE_METRICS.items()
               for step, value in means[column].dropna().items()]
    finals = pd.DataFrame([read_metrics(d) for d in directories.values()])
    final: dict[str, float] = {}
    for field in SEED_STATISTICS:
        values = pd.to_numeric(finals[field], errors="coerce").dropna()
        if len(values):
            final[f"{field}_mean"] = float(values.mean())
        if len(values) > 1:
            final[f"{field}_std"] = float(values.std(ddof=1))
    for field in ("n_params", "n_params_non_embedding", "training_flops"):  # equal for every seed
        if field in finals:
            final[field] = float(finals[field].iloc[0])
    final["diverged"] = float(finals["diverged"].sum())
    final["n_seeds"] = float(len(directories))
    speeds = pd.DataFrame([speed(d, m) for d, m in zip((trained or directories).values(), finals.to_dict("records"))])
    if "train_seconds" in speeds:  # the seeds' wall times, where a checkout from DVC's cache left them
        final["train_seconds"] = float(speeds["train_seconds"].max())
        final["steps_per_second"] = float(speeds["steps_per_second"].mean())
    if "flops_per_second" in speeds:
        final["flops_per_second"] = float(speeds["flops_per_second"].mean())
    final.update({f"baseline_{k}": float(v) for k, v in baselines.items()})
    return metrics + [Metric(k, v, now_ms, 0) for k, v in final.items()]
