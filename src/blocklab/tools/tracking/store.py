"""Where runs are logged: the MLflow store's address (the workspace's mlflow.db, or $MLFLOW_TRACKING_URI), a
client that fails fast, the store made once, its experiments, and the addresses `blocklab ui` prints."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path




STORE_FILE = "mlflow.db"


TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"


PARENT_TAG = "mlflow.parentRunId"  # what nests a run under another in MLflow's UI
MODEL_TAG = "blocklab.model"  # on a parent run: the id of the logged model of its seed-0 weights


# Fail fast instead of retrying for minutes when a tracking server is unreachable (a refused connection fails at
# once; `track`'s first request finds a silent host), yet wait out a server slow under load: a request that timed
# out may still be carried out, and a run created after its creator gave up is one more to tidy (CI met one left
# RUNNING at 5 s, with two experiments and the test suite logging at once; `track` logs what failed once more).
# And no "View run ... at" lines (MLflow prints two for every run finished on a server, after a request of its
# own to read the run back).
HTTP_SETTINGS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
                 "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}


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


def client_for(uri: str):
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
        client_for(uri).search_experiments(max_results=1)


def blocklab_runs(uri: str) -> dict:
    """Every blocklab experiment of the store at `uri` (by name) with its active runs: {experiment: runs}."""
    client = client_for(uri)
    return {experiment: client.search_runs([experiment.experiment_id], max_results=50000)
            for experiment in sorted(client.search_experiments(), key=lambda e: e.name)
            if experiment.name.startswith("blocklab/")}


def _is_parent(run) -> bool:
    return PARENT_TAG not in run.data.tags and "/seed" not in run.info.run_name


def holdings(runs_by_experiment: dict) -> str:
    """What a store holds, in a line: its training runs, parent runs, models, experiments."""
    runs = [r for found in runs_by_experiment.values() for r in found]
    parents = [r for r in runs if _is_parent(r)]
    models = sum(MODEL_TAG in r.data.tags for r in parents)
    return (f"{len(runs) - len(parents)} training runs under {len(parents)} variant parent runs ({models} with "
            f"their seed-0 model) in {len(runs_by_experiment)} experiments")


def ui_addresses(runs_by_experiment: dict, base: str) -> list[tuple[str, str]]:
    """Where a newcomer's first click should land in the MLflow UI at `base` (MLflow 3 opens an experiment on
    its GenAI overview): per blocklab experiment (of `blocklab_runs`), its training runs, and its variants'
    parent runs compared side by side. (label, address) pairs, the experiments by name."""
    addresses = []
    for experiment, runs in runs_by_experiment.items():
        parents = [r.info.run_id for r in runs if _is_parent(r)]
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
EXPERIMENT_IDS: dict[tuple[str, str], str] = {}


def experiment_id_of(client, name: str) -> str:
    if (client.tracking_uri, name) in EXPERIMENT_IDS:
        return EXPERIMENT_IDS[client.tracking_uri, name]
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            experiment_id = client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri, name))
        except Exception:  # another process created it in between
            experiment_id = client.get_experiment_by_name(name).experiment_id
    else:
        experiment_id = experiment.experiment_id
    EXPERIMENT_IDS[client.tracking_uri, name] = experiment_id
    return experiment_id


@contextmanager
def fluent_tracking_uri(uri: str):
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


def failure_reason(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]
