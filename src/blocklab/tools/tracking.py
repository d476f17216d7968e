"""MLflow: every training run as an MLflow run, logged from the DVC outputs, which stay the source of truth.

Logging happens after training, from the run's files, so a store that is down never costs a result:
`blocklab track` (also the pipeline's `track` stage) logs every run that the store does not have yet,
identified by a run key (a hash of the run's settings and results), so logging twice never duplicates.

Each variant is a parent run (name `<variant>`: the seed means and spreads, the seed-mean curves) with
its seeds nested under it (`<variant>/seed<k>`). A run counts as logged only once all of it landed: its
status is set to FINISHED last, and a run with a key but another status that no process is logging any
more (an upload failed, the process was killed, the server went away) is deleted and logged again.

Several processes may log the same runs to one store at once (queued experiments, a team's machines): each
run is tagged with who logs it and since when, and before finishing a run a process looks for others of
the same key. The earliest-created one that is finished or still being logged stands for the key; a later
one deletes itself (`_claim`). Every process reads after it wrote its own run, so of any two the later one
sees the earlier: exactly one run per key remains.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from blocklab.run.config import Params, RunSpec
from blocklab.run.results import read_curve, read_metrics, read_timing, run_dir

STORE_FILE = "mlflow.db"
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
RUN_KEY_TAG = "blocklab.run_key"
PARENT_TAG = "mlflow.parentRunId"  # what nests a run under another in MLflow's UI
LOGGER_TAG = "blocklab.logger"  # <host>:<pid> of the process that logs the run
SINCE_TAG = "blocklab.logging_since"  # when that process created it (time.time())
# An unfinished run whose logger is on another machine counts as abandoned after this long.
ABANDONED_SECONDS = 600
COMPLETE = "FINISHED"
SEED_STATISTICS = ("train_loss_last25", "val_loss", "max_grad_norm")  # a parent run's <name>_mean and <name>_std
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
    return os.environ.get(TRACKING_URI_ENV) or f"sqlite:///{workspace_root() / STORE_FILE}"


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


def ui_addresses(uri: str, base: str) -> list[tuple[str, str]]:
    """Where a newcomer's first click should land in the MLflow UI at `base` (MLflow 3 opens an experiment on
    its GenAI overview): per blocklab experiment, its training runs, and its variants' parent runs compared
    side by side. (label, address) pairs, the experiments by name."""
    client = _client(uri)
    addresses = []
    for experiment in sorted(client.search_experiments(), key=lambda e: e.name):
        if not experiment.name.startswith("blocklab/"):
            continue
        runs = client.search_runs([experiment.experiment_id], max_results=5000)
        parents = [r.info.run_id for r in runs if PARENT_TAG not in r.data.tags and "/seed" not in r.info.run_name]
        addresses.append((f"{experiment.name}: training runs",
                          f"{base}/#/experiments/{experiment.experiment_id}/runs"))
        if len(parents) > 1:
            addresses.append((f"{experiment.name}: its {len(parents)} variants compared",
                              f"{base}/#/compare-runs?runs={json.dumps(parents, separators=(',', ':'))}"
                              f"&experiments={json.dumps([experiment.experiment_id])}"))
    return addresses


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where an experiment's artifacts go: beside a sqlite store (`<store dir>/mlartifacts/<experiment>`),
    never relative to the folder a run happens to log from (a queued experiment's temporary copy, which
    DVC deletes afterwards). None for a tracking server, which places (and serves) them itself."""
    if not uri.startswith("sqlite:///"):
        return None
    store = Path(uri.removeprefix("sqlite:///"))
    return (store.parent / "mlartifacts" / experiment.replace("/", "_")).resolve().as_uri()


# Experiment ids by (store, name), looked up once per `track` (one call fewer per run over HTTP).
_experiment_ids: dict[tuple[str, str], str] = {}


def _experiment_id(client, name: str) -> str:
    if (client.tracking_uri, name) in _experiment_ids:
        return _experiment_ids[client.tracking_uri, name]
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            experiment_id = client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri, name))
        except Exception:  # another process created it in between
            experiment_id = client.get_experiment_by_name(name).experiment_id
    else:
        experiment_id = experiment.experiment_id
    _experiment_ids[client.tracking_uri, name] = experiment_id
    return experiment_id


CURVE_METRICS = {"loss": "train_loss", "grad_norm": "grad_norm", "lr": "lr", "val_loss": "val_loss"}


def training_times(directories) -> tuple[int | None, int | None]:
    """When the runs' training started and ended (ms since the epoch, recorded by the train stage), so that
    MLflow's Created order, Duration and time axis are the training's, not the logging's."""
    times = [read_timing(d) for d in directories]
    starts = [t["started_at"] for t in times if t.get("started_at")]
    ends = [t["ended_at"] for t in times if t.get("ended_at")]
    return (int(min(starts) * 1000) if starts else None, int(max(ends) * 1000) if ends else None)


def _step_times(curve: pd.DataFrame, start_ms: int | None, end_ms: int | None) -> list[int]:
    """Each step's wall-clock time: spread evenly over the training (now, where it was not recorded)."""
    if start_ms is None or end_ms is None:
        return [int(time.time() * 1000)] * len(curve)
    last = max(int(curve["step"].max()) + 1, 1)
    return [start_ms + (end_ms - start_ms) * (int(step) + 1) // last for step in curve["step"]]


def _curve_metrics(curve: pd.DataFrame, start_ms: int | None, end_ms: int | None):
    from mlflow.entities import Metric

    metrics = []
    stamps = _step_times(curve, start_ms, end_ms)
    for column, name in CURVE_METRICS.items():
        for step, value, stamp in zip(curve["step"], curve[column], stamps):
            if pd.notna(value):
                metrics.append(Metric(name, float(value), stamp, int(step)))
    return metrics


def _tags(spec: RunSpec, key: str) -> dict[str, str]:
    tags = {RUN_KEY_TAG: key, "blocklab.ablation": spec.ablation, "blocklab.variant": spec.variant,
            "dvc.stage": f"{'map' if spec.cell else 'train'}_{spec.ablation}@{spec.variant}"}
    if spec.cell:
        tags["blocklab.cell"] = spec.cell
    if commit := _git_commit():
        tags["mlflow.source.git.commit"] = commit
    if exp_name := os.environ.get("DVC_EXP_NAME"):  # set by `dvc exp run`, queued or not
        tags["DVC_EXP_NAME"] = exp_name
    tags[LOGGER_TAG], tags[SINCE_TAG] = f"{socket.gethostname()}:{os.getpid()}", repr(time.time())
    return tags


def _log_all(client, run_id: str, metrics: list, params: list) -> None:
    """Metrics and parameters in as few calls as MLflow takes (1,000 metrics, 100 parameters a call)."""
    for i in range(0, max(len(metrics), len(params)), BATCH):
        client.log_batch(run_id, metrics=metrics[i : i + BATCH], params=params[i : i + 100] if i == 0 else [])
    for i in range(100, len(params), 100):
        client.log_batch(run_id, params=params[i : i + 100])


def _speed(directory: Path, steps: int) -> dict[str, float]:
    seconds = read_timing(directory)["seconds"]
    return {"train_seconds": float(seconds), "steps_per_second": steps / seconds}


def log_run(client, spec: RunSpec, seed: int, directory: Path, baselines: dict, figure: Path | None,
            key: str, parent_id: str | None = None) -> tuple[str, str]:
    """One seed's run into MLflow: parameters, per-step curves in batches, final metrics, its training wall
    time and speed, artifacts, tags; nested under `parent_id`. FINISHED last: only then is it logged.
    Returns its id and the id of the run that stands for its key (another, if another process logged the
    same run at the same time: then its own is deleted)."""
    from mlflow.entities import Metric, Param

    experiment_id = _experiment_id(client, f"blocklab/{spec.ablation}")
    name = f"{spec.name.split('/', 1)[1]}/seed{seed}"
    tags = _tags(spec, key)
    if parent_id is not None:
        tags[PARENT_TAG] = parent_id
    start_ms, end_ms = training_times([directory])
    run_id = client.create_run(experiment_id, start_time=start_ms, run_name=name, tags=tags).info.run_id
    now = end_ms or int(time.time() * 1000)
    recorded = read_metrics(directory)
    final = {k: float(v) for k, v in recorded.items() if isinstance(v, (int, float)) and v is not None}
    final.update({f"baseline_{k}": float(v) for k, v in baselines.items()})
    final.update(_speed(directory, recorded["steps"]))
    metrics = _curve_metrics(read_curve(directory), start_ms, end_ms) + [Metric(k, v, now, 0) for k, v in final.items()]
    _log_all(client, run_id, metrics, [Param(k, v) for k, v in flat_params(spec, seed).items()])
    client.log_artifact(run_id, str(Path(directory) / "curve.csv"))
    if figure is not None and Path(figure).exists():
        client.log_artifact(run_id, str(figure))
    if (standing := _claim(client, experiment_id, key, run_id)) == run_id:
        client.set_terminated(run_id, status=COMPLETE, end_time=end_ms)
    return run_id, standing


def variant_metrics(directories: dict[int, Path], baselines: dict, now_ms: int) -> list:
    """A parent run's metrics: per step the seed mean of each curve; the seed mean and standard deviation
    (n - 1) of the final figures; the slowest seed's wall time (the seeds train side by side, so the
    variant took that long) and the seeds' mean speed."""
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
    final["n_params"] = float(finals["n_params"].iloc[0])
    final["diverged"] = float(finals["diverged"].sum())
    final["n_seeds"] = float(len(directories))
    speeds = pd.DataFrame([_speed(d, m) for d, m in zip(directories.values(), finals["steps"])])
    final["train_seconds"] = float(speeds["train_seconds"].max())
    final["steps_per_second"] = float(speeds["steps_per_second"].mean())
    final.update({f"baseline_{k}": float(v) for k, v in baselines.items()})
    return metrics + [Metric(k, v, now_ms, 0) for k, v in final.items()]


def stored_runs(client, ablations: list[str]) -> dict[str, list]:
    """Every active run with a run key, by key (complete or not)."""
    found: dict[str, list] = {}
    for name in ablations:
        experiment = client.get_experiment_by_name(f"blocklab/{name}")
        if experiment is None:
            continue
        _experiment_ids[client.tracking_uri, f"blocklab/{name}"] = experiment.experiment_id
        for run in client.search_runs([experiment.experiment_id], max_results=50000):
            if RUN_KEY_TAG in run.data.tags:
                found.setdefault(run.data.tags[RUN_KEY_TAG], []).append(run)
    return found


def _complete(runs: list):
    """The run among `runs` that landed whole, if any."""
    return next((run for run in runs if run.info.status == COMPLETE), None)


def _abandoned(run) -> bool:
    """An unfinished run that no process is logging any more: its logger on this machine has exited (or is
    this very process, which logs one run at a time), or on another machine started over ABANDONED_SECONDS ago."""
    import psutil

    host, _, pid = run.data.tags.get(LOGGER_TAG, "").rpartition(":")
    if not pid.isdigit():
        return True
    if host == socket.gethostname():
        return int(pid) == os.getpid() or not psutil.pid_exists(int(pid))
    return time.time() - float(run.data.tags.get(SINCE_TAG, 0)) > ABANDONED_SECONDS


def _delete_incomplete(client, runs: list) -> None:
    """Runs an interrupted logging left behind: they are replaced, never counted. A run another process is
    still logging is left to it."""
    for run in runs:
        if run.info.status != COMPLETE and _abandoned(run):
            client.delete_run(run.info.run_id)


def _with_key(client, experiment_id: str, key: str) -> list:
    return client.search_runs([experiment_id], f"tags.`{RUN_KEY_TAG}` = '{key}'", max_results=1000)


def _claim(client, experiment_id: str, key: str, run_id: str) -> str:
    """Which run stands for `key` now that `run_id` is logged but not finished: a finished one, else the
    earliest-created of those still being logged. If not ours, ours is deleted. (Every process looks after
    creating its own run, so the later of any two sees the earlier, which both then choose.)"""
    found = _with_key(client, experiment_id, key)
    others = [r for r in found if r.info.run_id != run_id]
    done = [r for r in others if r.info.status == COMPLETE]
    if done:
        winner = done[0].info.run_id
    else:
        ours = next((r for r in found if r.info.run_id == run_id), None) or client.get_run(run_id)
        candidates = [ours] + [r for r in others if not _abandoned(r)]
        winner = min(candidates, key=lambda r: (float(r.data.tags.get(SINCE_TAG, 0)), r.info.run_id)).info.run_id
    if winner != run_id:
        client.delete_run(run_id)
    return winner


def track(params: Params, runs_dir: Path, baselines: dict, figures_dir: Path | None, uri: str | None = None) -> dict:
    """Log every run of the DVC outputs that the store does not have yet, each variant's seeds under a
    parent run; finish what an earlier, interrupted logging left incomplete by logging it anew.

    Returns {"logged": [...], "already": n, "variants": n, "failed": {run: reason}, ...}; a store that
    is unreachable or errors leaves every run in "failed" and raises nothing."""
    uri = uri or tracking_uri()
    result = {"uri": uri, "logged": [], "already": 0, "variants": 0, "failed": {}, "log_seconds": {},
              "train_seconds": {}}
    specs = params.specs() + params.map_specs()  # a map's cells: a parent run each, its seeds under it
    _experiment_ids.clear()  # a store may have been replaced since the last track
    try:
        ensure_store(uri)
        client = _client(uri)
        stored = stored_runs(client, list(params.ablations) + list(params.maps))
    except Exception as err:  # noqa: BLE001 - any store failure must leave the results alone
        result["failed"] = {spec.key(seed): _reason(err) for spec in specs for seed in spec.seeds}
        return result
    def log(spec: RunSpec) -> dict:
        mine = {"logged": [], "already": 0, "variants": 0, "failed": {}, "log_seconds": {}, "train_seconds": {}}
        directories = {seed: run_dir(spec.directory(Path(runs_dir) / spec.ablation / spec.variant), seed)
                       for seed in spec.seeds}
        untrained = [seed for seed, d in directories.items() if not (d / "metrics.json").exists()]
        for seed in untrained:
            mine["failed"][spec.key(seed)] = f"not trained: no results in {directories[seed]} (run `dvc repro`)"
        if not untrained:
            # A map's cells log no figure, model or sample each: the map's figures are its own (reports/figures).
            figure = Path(figures_dir) / f"{spec.ablation}_loss.png" if figures_dir and not spec.cell else None
            _log_variant(client, spec, directories, stored, baselines, figure, mine)
        return mine

    for mine in map(log, specs):
        result["logged"] += mine["logged"]
        for name in ("failed", "log_seconds", "train_seconds"):
            result[name].update(mine[name])
        result["already"] += mine["already"]
        result["variants"] += mine["variants"]
    return result


def _log_variant(client, spec: RunSpec, directories: dict[int, Path], stored: dict[str, list], baselines: dict,
                 figure: Path | None, result: dict) -> None:
    """One variant: its parent run, its seeds nested under it (logging those the store lacks), then the parent's
    statistics and FINISHED. A failure leaves the parent unfinished, for the next `blocklab track` to replace."""
    from mlflow.entities import Param

    keys = {seed: run_key(spec, seed, d) for seed, d in directories.items()}
    parent_key = variant_key(spec, list(keys.values()))
    if _complete(stored.get(parent_key, [])) is not None:
        result["already"] += len(keys)
        return
    try:
        _delete_incomplete(client, stored.get(parent_key, []))
        start_ms, end_ms = training_times(directories.values())
        parent_id = client.create_run(_experiment_id(client, f"blocklab/{spec.ablation}"), start_time=start_ms,
                                      run_name=spec.name.split("/", 1)[1], tags=_tags(spec, parent_key)).info.run_id
    except Exception as err:  # noqa: BLE001
        result["failed"].update({spec.key(seed): _reason(err) for seed in keys})
        return
    seeds_done, standing, foreign = True, {}, set()
    for seed, key in keys.items():
        started = time.perf_counter()
        try:
            if (done := _complete(stored.get(key, []))) is not None:  # logged whole before: nest it here
                client.set_tag(done.info.run_id, PARENT_TAG, parent_id)
                standing[seed] = done.info.run_id
                result["already"] += 1
                continue
            _delete_incomplete(client, stored.get(key, []))
            # the ablation's figure goes to the parent, once, not to every seed (one upload fewer per run)
            ours, standing[seed] = log_run(client, spec, seed, directories[seed], baselines, None, key, parent_id)
        except Exception as err:  # noqa: BLE001
            result["failed"][spec.key(seed)] = _reason(err)
            seeds_done = False
            continue
        if standing[seed] != ours:  # another process logged it at the same time: its run stands
            foreign.add(seed)
            result["already"] += 1
            continue
        result["log_seconds"][spec.key(seed)] = time.perf_counter() - started
        result["train_seconds"][spec.key(seed)] = read_timing(directories[seed])["seconds"]
        result["logged"].append(spec.key(seed))
    if not seeds_done:
        return
    try:
        shared = {k: v for k, v in flat_params(spec, spec.seeds[0]).items() if k != "seed"}
        _log_all(client, parent_id, variant_metrics(directories, baselines, end_ms or int(time.time() * 1000)),
                 [Param(k, v) for k, v in {**shared, "seeds": ",".join(map(str, keys))}.items()])
        experiment_id = _experiment_id(client, f"blocklab/{spec.ablation}")
        if not spec.cell:
            log_model_and_sample(client, parent_id, directories[spec.seeds[0]], experiment_id)
        if figure is not None and Path(figure).exists():
            client.log_artifact(parent_id, str(figure))
        if (winner := _claim(client, experiment_id, parent_key, parent_id)) == parent_id:
            client.set_terminated(parent_id, status=COMPLETE, end_time=end_ms)
            result["variants"] += 1
        for seed, run_id in standing.items():  # every seed under the parent that stands, whoever logged it
            if winner != parent_id or seed in foreign:
                client.set_tag(run_id, PARENT_TAG, winner)
    except Exception as err:  # noqa: BLE001
        result["failed"][spec.name] = _reason(err)


MODEL_NAME = "model"
SAMPLE_FILE = "sample.txt"
SAMPLE_TOKENS = 200


def log_model_and_sample(client, run_id: str, directory: Path, experiment_id: str | None = None) -> None:
    """The run in `directory` as an MLflow model of run `run_id` (MLflow 3's logged model, with its
    signature: character ids (batch, time) in, logits (batch, time, vocabulary) out), and what it writes
    (nanoGPT's sampling, SAMPLE_TOKENS characters) as the run's `sample.txt`."""
    import tempfile

    import mlflow
    import mlflow.pytorch
    import numpy as np
    import torch
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    from blocklab.tools.sampling import SampleSettings, read_model, sample_run

    model, cfg, chars = read_model(directory)
    model_context = cfg.context
    signature = ModelSignature(inputs=Schema([TensorSpec(np.dtype(np.int64), (-1, -1))]),
                               outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, -1, len(chars)))]))
    experiment_id = experiment_id or client.get_run(run_id).info.experiment_id  # the run's, not the fluent API's
    logged = client.create_logged_model(experiment_id, name=MODEL_NAME, source_run_id=run_id)
    example = np.zeros((2, model_context), dtype=np.int64)
    # Pickled (it loads where blocklab is installed): 0.05 s a model here, where MLflow's traced pt2 format took
    # 1 s each, which put the track stage at 5.7% of the training time it logs, over its 5% budget.
    quiet = logging.getLogger("mlflow.pytorch")
    level, quiet.level = quiet.level, logging.ERROR  # not the pickle warning once per variant: it is our own model
    try:
        with _fluent_tracking_uri(client.tracking_uri):
            mlflow.pytorch.log_model(model, name=MODEL_NAME, run_id=run_id, model_id=logged.model_id,
                                     input_example=example, signature=signature, serialization_format="pickle",
                                     pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"])
    finally:
        quiet.level = level
    (text,) = sample_run(directory, SampleSettings(tokens=SAMPLE_TOKENS))
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / SAMPLE_FILE).write_text(text)
        client.log_artifact(run_id, str(Path(folder) / SAMPLE_FILE))


@contextmanager
def _fluent_tracking_uri(uri: str):
    """MLflow's fluent API (`log_model`) logs to its global tracking URI, which `mlflow.set_tracking_uri` also
    exports as $MLFLOW_TRACKING_URI to every later subprocess (a `dvc exp run` started afterwards would log
    to this store): the URI for the block only, then the global and the environment as they were."""
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    before = os.environ.get(TRACKING_URI_ENV)
    try:
        with _use_tracking_uri(uri):
            yield
    finally:
        if before is None:
            os.environ.pop(TRACKING_URI_ENV, None)
        else:
            os.environ[TRACKING_URI_ENV] = before


def _reason(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]
