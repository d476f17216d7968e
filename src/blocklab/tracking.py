"""MLflow: every training run as an MLflow run, logged from the DVC outputs, which stay the source of truth.

Logging happens after training, from the run's files, so a store that is down never costs a result:
`blocklab track` (also the pipeline's `track` stage) logs every run that the store does not have yet,
identified by a run key (a hash of the run's settings and results), so logging twice never duplicates.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from blocklab.config import Params, RunSpec
from blocklab.results import read_curve, read_metrics, read_timing, run_dir

STORE_FILE = "mlflow.db"
RUN_KEY_TAG = "blocklab.run_key"
BATCH = 1000  # MLflow accepts at most 1,000 metric values per log_batch call
# Fail fast instead of retrying for minutes when a tracking server is unreachable.
HTTP_SETTINGS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}


def workspace_root(start: Path | None = None) -> Path:
    """The user's workspace, also from inside `dvc exp run --queue`'s temporary copies, which live in
    `<workspace>/.dvc/tmp/exps/<tmp>`: their runs must land in the workspace's store."""
    here = (start or Path.cwd()).resolve()
    parts = here.parts
    for i in range(len(parts) - 2):
        if parts[i : i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return here


def tracking_uri() -> str:
    """$MLFLOW_TRACKING_URI, else a sqlite store at the workspace root (an absolute path)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{workspace_root() / STORE_FILE}"


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
            "seed": str(seed), "ablation": spec.ablation, "variant": spec.variant}


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _client(uri: str):
    for key, value in HTTP_SETTINGS.items():
        os.environ.setdefault(key, value)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def ensure_store(uri: str) -> None:
    """Create and migrate a sqlite store once, under a file lock: MLflow's first use of a fresh sqlite
    store fails when several processes make it at once."""
    if not uri.startswith("sqlite:///"):
        return
    from filelock import FileLock

    path = Path(uri.removeprefix("sqlite:///"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        _client(uri).search_experiments(max_results=1)


def _experiment_id(client, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # another process created it in between
        return client.get_experiment_by_name(name).experiment_id


def _curve_metrics(curve: pd.DataFrame, now_ms: int):
    from mlflow.entities import Metric

    names = {"loss": "train_loss", "grad_norm": "grad_norm", "lr": "lr", "val_loss": "val_loss"}
    metrics = []
    for column, name in names.items():
        for step, value in zip(curve["step"], curve[column]):
            if pd.notna(value):
                metrics.append(Metric(name, float(value), now_ms, int(step)))
    return metrics


def log_run(client, spec: RunSpec, seed: int, directory: Path, baselines: dict, figure: Path | None,
            key: str) -> str:
    """One run into MLflow: parameters, per-step curves in batches, final metrics, artifacts, tags."""
    from mlflow.entities import Metric, Param, RunTag

    experiment_id = _experiment_id(client, f"blocklab/{spec.ablation}")
    tags = {RUN_KEY_TAG: key, "blocklab.ablation": spec.ablation, "blocklab.variant": spec.variant,
            "dvc.stage": f"train_{spec.ablation}@{spec.variant}", "mlflow.runName": f"{spec.variant}/seed{seed}"}
    if commit := _git_commit():
        tags["mlflow.source.git.commit"] = commit
    if exp_name := os.environ.get("DVC_EXP_NAME"):
        tags["DVC_EXP_NAME"] = exp_name
    run = client.create_run(experiment_id, run_name=f"{spec.variant}/seed{seed}",
                            tags={k: v for k, v in tags.items() if k != "mlflow.runName"})
    run_id = run.info.run_id
    now = int(time.time() * 1000)
    final = {k: float(v) for k, v in read_metrics(directory).items() if isinstance(v, (int, float)) and v is not None}
    final.update({f"baseline_{k}": float(v) for k, v in baselines.items()})
    metrics = _curve_metrics(read_curve(directory), now) + [Metric(k, v, now, 0) for k, v in final.items()]
    params = [Param(k, v) for k, v in flat_params(spec, seed).items()]
    for i in range(0, max(len(metrics), len(params)), BATCH):
        client.log_batch(run_id, metrics=metrics[i : i + BATCH], params=params[i : i + 100] if i == 0 else [])
    for i in range(100, len(params), 100):
        client.log_batch(run_id, params=params[i : i + 100])
    client.log_artifact(run_id, str(Path(directory) / "curve.csv"))
    if figure is not None and Path(figure).exists():
        client.log_artifact(run_id, str(figure))
    client.set_terminated(run_id)
    return run_id


def logged_keys(client, ablations: list[str]) -> set[str]:
    keys = set()
    for name in ablations:
        experiment = client.get_experiment_by_name(f"blocklab/{name}")
        if experiment is None:
            continue
        for run in client.search_runs([experiment.experiment_id], max_results=50000):
            if RUN_KEY_TAG in run.data.tags:
                keys.add(run.data.tags[RUN_KEY_TAG])
    return keys


def track(params: Params, runs_dir: Path, baselines: dict, figures_dir: Path | None, uri: str | None = None,
          echo=print) -> dict:
    """Log every run of the DVC outputs that the store does not have yet.

    Returns {"logged": [...], "already": n, "failed": {run: reason}, "seconds": {run: s}}; a store that
    is unreachable or errors leaves every run in "failed" and raises nothing."""
    uri = uri or tracking_uri()
    result = {"uri": uri, "logged": [], "already": 0, "failed": {}, "log_seconds": {}, "train_seconds": {}}
    runs = [(spec, seed) for spec in params.specs() for seed in spec.seeds]
    try:
        ensure_store(uri)
        client = _client(uri)
        done = logged_keys(client, list(params.ablations))
    except Exception as err:  # noqa: BLE001 - any store failure must leave the results alone
        result["failed"] = {spec.key(seed): _reason(err) for spec, seed in runs}
        return result
    for spec, seed in runs:
        directory = run_dir(Path(runs_dir) / spec.ablation / spec.variant, seed)
        if not (directory / "metrics.json").exists():
            result["failed"][spec.key(seed)] = f"not trained: no results in {directory} (run `dvc repro`)"
            continue
        key = run_key(spec, seed, directory)
        if key in done:
            result["already"] += 1
            continue
        figure = Path(figures_dir) / f"{spec.ablation}_loss.png" if figures_dir else None
        started = time.perf_counter()
        try:
            log_run(client, spec, seed, directory, baselines, figure, key)
        except Exception as err:  # noqa: BLE001
            result["failed"][spec.key(seed)] = _reason(err)
            continue
        result["log_seconds"][spec.key(seed)] = time.perf_counter() - started
        result["train_seconds"][spec.key(seed)] = read_timing(directory)["seconds"]
        result["logged"].append(spec.key(seed))
    return result


def _reason(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]
