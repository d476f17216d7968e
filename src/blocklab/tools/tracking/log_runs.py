"""Logging: every run of the plan that the store lacks (`track`), each variant as a parent run with its seeds
nested, its seed-0 model and what that model writes. A run's numbers, curves and sample come from its committed
record (reports/runs); its weights and wall times from the train stage's outputs (data/runs), where this machine
has them."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from blocklab.params.schema import Params, RunSpec
from blocklab.records import read_curve, read_layers, read_metrics, read_timing, run_dir
from blocklab.run.results import MODEL_FILE, SAMPLE_FILE
from blocklab.tools.tracking.claiming import COMPLETE, claim, complete_run, delete_incomplete, settle, stored_runs
from blocklab.tools.tracking.payloads import (
    BATCH, curve_metrics, flat_params, layer_curve_metrics, run_key, run_tags, speed, training_times, variant_key,
    variant_metrics,
)
from blocklab.tools.tracking.store import (
    EXPERIMENT_IDS, MODEL_TAG, PARENT_TAG, client_for, ensure_store, experiment_id_of, failure_reason,
    fluent_tracking_uri, tracking_uri,
)


# Variants logged at once to a tracking server, so that its requests overlap instead of waiting one for another
# (docs/sharing.md has the measurement); a local SQLite store takes one writer at a time: one.
IN_FLIGHT = 4
_MODEL_LOGGING = threading.Lock()  # MLflow's log_model logs to its global tracking URI: one model at a time


def in_flight(uri: str) -> int:
    """How many variants `track` logs at once into the store at `uri`."""
    return IN_FLIGHT if uri.startswith(("http://", "https://")) else 1


def _log_all(client, run_id: str, metrics: list, params: list) -> None:
    """Metrics and parameters in as few calls as MLflow takes (1,000 metrics, 100 parameters a call)."""
    for i in range(0, max(len(metrics), len(params)), BATCH):
        client.log_batch(run_id, metrics=metrics[i : i + BATCH], params=params[i : i + 100] if i == 0 else [])
    for i in range(100, len(params), 100):
        client.log_batch(run_id, params=params[i : i + 100])


def log_run(client, spec: RunSpec, seed: int, directory: Path, baselines: dict, figure: Path | None,
            key: str, parent_id: str | None = None, trained: Path | None = None) -> tuple[str, str]:
    """One seed's run into MLflow from its folder `directory`: parameters, per-step curves in batches, final
    metrics, its training wall time and speed (from `trained`, the run's outputs, where they are here; default
    `directory`), artifacts, tags; nested under `parent_id`. FINISHED last: only then is it logged.
    Returns its id and the id of the run that stands for its key (another, if another process logged the
    same run at the same time: then its own is deleted; claiming.py says how they settle it)."""
    from mlflow.entities import Metric, Param

    experiment_id = experiment_id_of(client, f"blocklab/{spec.ablation}")
    name = f"{spec.name.split('/', 1)[1]}/seed{seed}"
    tags = run_tags(spec, key)
    if parent_id is not None:
        tags[PARENT_TAG] = parent_id
    start_ms, end_ms = training_times([trained or directory])
    run_id = client.create_run(experiment_id, start_time=start_ms, run_name=name, tags=tags).info.run_id
    now = end_ms or int(time.time() * 1000)
    recorded = read_metrics(directory)
    final = {k: float(v) for k, v in recorded.items() if isinstance(v, (int, float)) and v is not None}
    final.update({f"baseline_{k}": float(v) for k, v in baselines.items()})
    final.update(speed(trained or directory, recorded))
    metrics = curve_metrics(read_curve(directory), start_ms, end_ms) + [Metric(k, v, now, 0) for k, v in final.items()]
    metrics += layer_curve_metrics(read_layers(directory), start_ms, end_ms)
    _log_all(client, run_id, metrics, [Param(k, v) for k, v in flat_params(spec, seed).items()])
    client.log_artifact(run_id, str(Path(directory) / "curve.csv"))
    client.log_artifact(run_id, str(Path(directory) / "layers.csv"))
    if figure is not None and Path(figure).exists():
        client.log_artifact(run_id, str(figure))
    if (standing := claim(client, experiment_id, key, run_id)) == run_id:
        client.set_terminated(run_id, status=COMPLETE, end_time=end_ms)
        standing = settle(client, experiment_id, key, PARENT_TAG)
    return run_id, standing


@contextlib.contextmanager
def _interrupts_as(event: threading.Event):
    """Ctrl-C (SIGINT) sets `event` instead of raising where it lands: a KeyboardInterrupt raised in the main thread
    inside the thread pool's own locking (a semaphore's `with`) can leave a lock held, and the pool's workers then
    wait on it forever (CI met it). Outside the main thread, where no signal handler can be set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, lambda *_: event.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def track(params: Params, runs_dir: Path, baselines: dict, figures_dir: Path | None, uri: str | None = None,
          weights_dir: Path | None = None, at_once: int | None = None) -> dict:
    """Log every run in `runs_dir` (the runs' records, or the train stages' outputs) that the store does not have
    yet, each variant's seeds under a parent run; finish what an earlier, interrupted logging left incomplete by
    logging it anew. Weights and wall times come from `weights_dir` (default: `runs_dir`) where they are.
    `at_once` variants are logged side by side (default: `in_flight(uri)`).

    Idempotent: a run or variant the store holds whole is not logged again, but a variant logged without its
    model (its weights were not here then) gets it once they are.

    Returns {"logged": [...], "already": n, "variants": n, "models": [variants whose model was added],
    "failed": {run: reason}, "retried": {run: why its first try failed}, ...}; a store that is unreachable or
    errors leaves every run in "failed" and raises nothing."""
    uri = uri or tracking_uri()
    result = {"uri": uri, "logged": [], "already": 0, "variants": 0, "models": [], "failed": {}, "log_seconds": {},
              "train_seconds": {}, "retried": {}}
    specs = params.all_specs()  # a map's cells: a parent run each, its seeds under it
    EXPERIMENT_IDS.clear()  # a store may have been replaced since the last track
    try:
        ensure_store(uri)
        client = client_for(uri)
        stored = stored_runs(client, list(params.ablations) + list(params.maps))
    except Exception as err:  # noqa: BLE001 - any store failure must leave the results alone
        result["failed"] = {spec.key(seed): failure_reason(err) for spec in specs for seed in spec.seeds}
        return result
    interrupted = threading.Event()

    def log(spec: RunSpec, first: bool = True) -> dict:
        mine = {"logged": [], "already": 0, "variants": 0, "models": [], "failed": {}, "log_seconds": {},
                "train_seconds": {}}
        if interrupted.is_set():  # Ctrl-C: the variants being logged end, the rest are not begun
            return mine
        directories = {seed: run_dir(spec.directory(Path(runs_dir) / spec.ablation / spec.variant), seed)
                       for seed in spec.seeds}
        trained = {seed: run_dir(spec.directory(Path(weights_dir or runs_dir) / spec.ablation / spec.variant), seed)
                   for seed in spec.seeds}
        untrained = [seed for seed, d in directories.items() if not (d / "metrics.json").exists()]
        for seed in untrained:
            mine["failed"][spec.key(seed)] = f"not trained: no results in {directories[seed]} (run `dvc repro`)"
        if not untrained:
            # A map's cells log no figure, model or sample each: the map's figures are its own (reports/figures).
            figure = Path(figures_dir) / f"{spec.ablation}_loss.png" if figures_dir and not spec.cell else None
            _log_variant(client, spec, directories, stored, baselines, figure, mine, trained)
        if first:
            with counting:
                bar.update(len(spec.seeds))
        return mine

    counting = threading.Lock()
    # on a terminal only (tqdm's disable=None): a stage's log or a test's output keeps its lines
    with tqdm(total=sum(len(spec.seeds) for spec in specs), desc="MLflow", unit="run", disable=None) as bar, \
            _interrupts_as(interrupted), ThreadPoolExecutor(at_once or in_flight(uri), thread_name_prefix="track") as pool:
        logged = list(pool.map(log, specs))
        # Once more for the variants a failure stopped (a request that timed out on a loaded server, which may
        # have gone on to create the run it was asked for): the store read anew, what this process left
        # unfinished is replaced (claiming.py), what it finished is kept. A store still away fails fast again.
        again = [i for i, mine in enumerate(logged) if _stopped(mine)]
        if again and not interrupted.is_set():
            try:
                stored = stored_runs(client, list(params.ablations) + list(params.maps))
            except Exception:  # noqa: BLE001 - the store is still unreachable: those runs stay failed
                again = []
            for i, mine in zip(again, pool.map(lambda spec: log(spec, first=False), [specs[i] for i in again])):
                result["retried"].update({k: r for k, r in logged[i]["failed"].items() if k not in mine["failed"]})
                logged[i] = _merged(logged[i], mine)
    if interrupted.is_set():
        raise KeyboardInterrupt
    for mine in logged:
        result["logged"] += mine["logged"]
        result["models"] += mine["models"]
        for name in ("failed", "log_seconds", "train_seconds"):
            result[name].update(mine[name])
        result["already"] += mine["already"]
        result["variants"] += mine["variants"]
    return result


def _stopped(mine: dict) -> bool:
    """Whether logging a variant failed part-way for a reason other than a run not trained here."""
    return any(not reason.startswith("not trained") for reason in mine["failed"].values())


def _merged(first: dict, again: dict) -> dict:
    """One variant's result from its two passes: the second's failures and counts, less the runs the first
    logged (the second finds them in the store: "already")."""
    return {**again, "logged": first["logged"] + again["logged"], "already": again["already"] - len(first["logged"]),
            "models": first["models"] + again["models"], "log_seconds": {**first["log_seconds"], **again["log_seconds"]},
            "train_seconds": {**first["train_seconds"], **again["train_seconds"]}}


def _log_variant(client, spec: RunSpec, directories: dict[int, Path], stored: dict[str, list], baselines: dict,
                 figure: Path | None, result: dict, trained: dict[int, Path]) -> None:
    """One variant: its parent run, its seeds nested under it (logging those the store lacks), then the parent's
    statistics and FINISHED. A failure leaves the parent unfinished, for the next `blocklab track` to replace.
    `directories` hold each seed's numbers, `trained` its weights and wall times where they are here."""
    from mlflow.entities import Param

    keys = {seed: run_key(spec, seed, d) for seed, d in directories.items()}
    parent_key = variant_key(spec, list(keys.values()))
    if (logged := complete_run(stored.get(parent_key, []))) is not None:
        result["already"] += len(keys)
        if not spec.cell and MODEL_TAG not in logged.data.tags and (trained[spec.seeds[0]] / MODEL_FILE).exists():
            try:  # logged from its record alone; its weights have arrived since
                if _add_model(client, logged, trained[spec.seeds[0]]):
                    result["models"].append(spec.name)
            except Exception as err:  # noqa: BLE001
                result["failed"][spec.name] = failure_reason(err)
        return
    try:
        delete_incomplete(client, stored.get(parent_key, []))
        start_ms, end_ms = training_times(trained.values())
        parent_id = client.create_run(experiment_id_of(client, f"blocklab/{spec.ablation}"), start_time=start_ms,
                                      run_name=spec.name.split("/", 1)[1], tags=run_tags(spec, parent_key)).info.run_id
    except Exception as err:  # noqa: BLE001
        result["failed"].update({spec.key(seed): failure_reason(err) for seed in keys})
        return
    seeds_done, standing, foreign = True, {}, set()
    for seed, key in keys.items():
        started = time.perf_counter()
        try:
            if (done := complete_run(stored.get(key, []))) is not None:  # logged whole before: nest it here
                client.set_tag(done.info.run_id, PARENT_TAG, parent_id)
                standing[seed] = done.info.run_id
                result["already"] += 1
                continue
            delete_incomplete(client, stored.get(key, []))
            # the ablation's figure goes to the parent, once, not to every seed (one upload fewer per run)
            ours, standing[seed] = log_run(client, spec, seed, directories[seed], baselines, None, key, parent_id,
                                           trained[seed])
        except Exception as err:  # noqa: BLE001
            result["failed"][spec.key(seed)] = failure_reason(err)
            seeds_done = False
            continue
        if standing[seed] != ours:  # another process logged it at the same time: its run stands
            foreign.add(seed)
            result["already"] += 1
            continue
        result["log_seconds"][spec.key(seed)] = time.perf_counter() - started
        if (trained[seed] / "timing.json").exists():  # not in a record, nor in DVC's cache: no wall time kept
            result["train_seconds"][spec.key(seed)] = read_timing(trained[seed])["seconds"]
        result["logged"].append(spec.key(seed))
    if not seeds_done:
        return
    try:
        shared = {k: v for k, v in flat_params(spec, spec.seeds[0]).items() if k != "seed"}
        _log_all(client, parent_id, variant_metrics(directories, baselines, end_ms or int(time.time() * 1000), trained),
                 [Param(k, v) for k, v in {**shared, "seeds": ",".join(map(str, keys))}.items()])
        experiment_id = experiment_id_of(client, f"blocklab/{spec.ablation}")
        if not spec.cell:
            log_model_and_sample(client, parent_id, directories[spec.seeds[0]], trained[spec.seeds[0]], experiment_id)
        if figure is not None and Path(figure).exists():
            client.log_artifact(parent_id, str(figure))
        winner = claim(client, experiment_id, parent_key, parent_id)
        for seed, run_id in standing.items():  # every seed under the parent that stands, whoever logged it,
            if winner != parent_id or seed in foreign:  # before that parent finishes (settle moves them on)
                client.set_tag(run_id, PARENT_TAG, winner)
        if winner == parent_id:
            client.set_terminated(parent_id, status=COMPLETE, end_time=end_ms)
            if settle(client, experiment_id, parent_key, PARENT_TAG) == parent_id:  # else ours and its seeds moved
                result["variants"] += 1
    except Exception as err:  # noqa: BLE001
        result["failed"][spec.name] = failure_reason(err)


MODEL_NAME = "model"


def log_model_and_sample(client, run_id: str, directory: Path, trained: Path, experiment_id: str | None = None) -> None:
    """What the run writes (its folder `directory`'s sample.txt, recorded when it trained: nanoGPT's sampling) as
    the run `run_id`'s `sample.txt`, and, where its weights are here (`trained`'s model.pt), the run as an MLflow
    model (MLflow 3's logged model, with its signature: character ids (batch, time) in, logits (batch, time,
    vocabulary) out)."""
    if (Path(directory) / SAMPLE_FILE).exists():  # none where the weights are not finite: the model writes nothing
        client.log_artifact(run_id, str(Path(directory) / SAMPLE_FILE))
    if (Path(trained) / MODEL_FILE).exists():
        _log_model(client, run_id, trained, experiment_id)


def _add_model(client, parent, trained: Path) -> bool:
    """The model of a parent run logged without one: unless a model from that run is there already (logged
    before runs were tagged with theirs), then only the tag. Whether a model was logged."""
    from mlflow.entities import LoggedModelStatus

    experiment_id = parent.info.experiment_id
    found = client.search_logged_models([experiment_id], f"source_run_id = '{parent.info.run_id}'", max_results=10)
    ready = [m for m in found if m.status == LoggedModelStatus.READY]
    if ready:
        client.set_tag(parent.info.run_id, MODEL_TAG, ready[0].model_id)
        return False
    _log_model(client, parent.info.run_id, trained, experiment_id)
    return True


def _log_model(client, run_id: str, directory: Path, experiment_id: str | None) -> None:
    import mlflow
    import mlflow.pytorch
    import numpy as np
    import torch
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    from blocklab.tools.sampling import read_model

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
    with _MODEL_LOGGING:  # the fluent API's global URI and the logger's level, one model at a time
        level, quiet.level = quiet.level, logging.ERROR  # not the pickle warning once per variant: our own model
        try:
            with fluent_tracking_uri(client.tracking_uri):
                mlflow.pytorch.log_model(model, name=MODEL_NAME, run_id=run_id, model_id=logged.model_id,
                                         input_example=example, signature=signature, serialization_format="pickle",
                                         pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"])
        finally:
            quiet.level = level
    client.set_tag(run_id, MODEL_TAG, logged.model_id)


def track_reported(params: Params, runs_dir: Path, reports_dir: Path, uri: str | None = None,
                   weights_dir: Path | None = None) -> dict:
    """`blocklab track` (the pipeline's track stage): `track`, then what was logged, how long it took against the
    runs' training, and a warning naming the runs that were not logged (the command still succeeds)."""
    import click

    started = time.perf_counter()
    baselines = json.loads((reports_dir / "metrics.json").read_text())["baselines"]
    result = track(params, runs_dir, baselines, reports_dir / "figures", uri=uri, weights_dir=weights_dir)
    logged, failed = result["logged"], result["failed"]
    click.echo(f"MLflow ({result['uri']}): {len(logged)} runs logged, {result['already']} already there; "
               f"{result['variants']} variant parent runs logged"
               + (f"; {len(result['models'])} models added, their weights here now" if result["models"] else ""))
    if result["log_seconds"] and result["train_seconds"]:
        logging_seconds, training = sum(result["log_seconds"].values()), sum(result["train_seconds"].values())
        whole = time.perf_counter() - started
        click.echo(f"logging took {logging_seconds:.1f} s ({whole:.1f} s with the parent runs, their models and "
                   f"samples): {logging_seconds / training:.1%} ({whole / training:.1%}) of those runs' "
                   f"{training:.0f} s of training")
    if result["retried"]:
        reasons = "; ".join(sorted(set(result["retried"].values())))
        click.echo(f"{len(result['retried'])} runs or variants failed at first and were logged on a second try "
                   f"({reasons})")
    if failed:
        reasons = "; ".join(sorted(set(failed.values())))
        click.secho(f"warning: {len(failed)} runs were NOT logged to MLflow ({reasons}): {', '.join(sorted(failed))}. "
                    f"Their results are safe in {runs_dir}; run `blocklab track` when the store is back.",
                    fg="yellow", err=True)
    return result
