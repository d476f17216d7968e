"""A team's MLflow server on PostgreSQL (README, "Sharing results"): a real PostgreSQL and a real `mlflow
server` on it, both on 127.0.0.1, started and stopped by the tests. `blocklab track` logs there as into the
embedded SQLite default; several processes logging at once and a server that goes away mid-way end with
every run exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest

from blocklab.params.schema import load_params
from blocklab.tools.bench.queue import queue_status
from blocklab.tools.tracking import PARENT_TAG, RUN_KEY_TAG

from conftest import free_port, mlflow_server, mlflow_server_process, postgresql_server, pristine_copy, started


@pytest.fixture
def project(reproduced_project):
    return reproduced_project


def every_run(uri: str, experiments: list[str]) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = []
    for name in experiments:
        experiment = client.get_experiment_by_name(f"blocklab/{name}")
        if experiment is not None:
            found += client.search_runs([experiment.experiment_id], max_results=50000)
    return found


def plan_names(root: Path) -> list[str]:
    params = load_params(root / "params.yaml")
    return [*params.ablations, *params.maps]


def assert_each_key_once_and_nested(runs: list, logs: str = "") -> Counter:
    """Every run key once, FINISHED, every seed run under a FINISHED parent of its own variant or cell. `logs`:
    what the logging processes printed, shown if not."""
    keys = Counter(r.data.tags[RUN_KEY_TAG] for r in runs)
    assert [k for k, n in keys.items() if n > 1] == [], logs
    unfinished = [f"{r.info.run_name} ({r.info.status})" for r in runs if r.info.status != "FINISHED"]
    assert unfinished == [], f"{Counter(r.info.status for r in runs)}{logs}"
    by_id = {r.info.run_id: r for r in runs}
    for run in runs:
        if "/seed" in run.info.run_name:
            parent = by_id[run.data.tags[PARENT_TAG]]
            assert parent.info.run_name == run.info.run_name.rsplit("/", 1)[0]
    return keys


def test_track_logs_to_a_team_server_on_postgresql_as_into_the_sqlite_default(project, tmp_path):
    names = plan_names(project.root)
    sqlite = f"sqlite:///{tmp_path / 'alone.db'}"
    started_at = time.perf_counter()
    project.run("blocklab", "track", "--tracking-uri", sqlite)
    into_sqlite = time.perf_counter() - started_at
    with postgresql_server() as database, mlflow_server(database, tmp_path / "artifacts") as server:
        started_at = time.perf_counter()
        out = project.run("blocklab", "track", "--tracking-uri", server)
        into_server = time.perf_counter() - started_at
        assert "NOT logged" not in out.stderr, out.stderr
        assert "View run" not in out.stdout  # MLflow's two lines a run, and their request, are left out
        served = every_run(server, names)
        again = project.run("blocklab", "track", "--tracking-uri", server).stdout
    assert " 0 runs logged" in again
    embedded = every_run(sqlite, names)
    assert assert_each_key_once_and_nested(served) == assert_each_key_once_and_nested(embedded)
    finals = {r.data.tags[RUN_KEY_TAG]: r.data.metrics for r in embedded}
    assert {r.data.tags[RUN_KEY_TAG]: r.data.metrics for r in served} == finals
    print(f"\nblocklab track of {len(served)} runs and parents: SQLite {into_sqlite:.1f} s, the PostgreSQL-backed "
          f"server {into_server:.1f} s = {into_server / into_sqlite:.2f}x (each a whole `blocklab track`, "
          f"its start-up included)")


@pytest.mark.slow
def test_two_queued_experiments_logging_at_once_to_the_server_leave_every_run_once(reproduced_project, tmp_path):
    """Neither the baseline nor anything else logged to the server before: both experiments log the whole
    plan at the same time, most of it the same runs (only placement's differ)."""
    project = pristine_copy(reproduced_project, tmp_path / "project")  # reproduced; its MLflow store left behind
    project.commit("baseline results")
    with postgresql_server() as database, mlflow_server(database, tmp_path / "artifacts") as server:
        project.env["MLFLOW_TRACKING_URI"] = server
        for lr in ("0.002", "0.004"):
            project.run("dvc", "exp", "run", "--queue", "-S", f"ablations.placement.train.lr={lr}")
        try:
            project.run("dvc", "queue", "start", "-j", "2")
            deadline = time.time() + 600
            while any(w in (status := queue_status(project.env, project.root)) for w in ("Queued", "Running")):
                assert time.time() < deadline, f"the queue has not drained in 600 s:\n{status}{project.diagnostics()}"
                time.sleep(5)
        finally:
            project.run("dvc", "queue", "stop", "--kill", check=False)
        assert status.count("Success") == 2, status + project.diagnostics()
        runs = every_run(server, plan_names(project.root))
    keys = assert_each_key_once_and_nested(runs, "".join(line for line in project.diagnostics().splitlines(True)
                                                         if "MLflow" in line or "---" in line))
    params = load_params(project.root / "params.yaml")
    specs = params.specs() + params.map_specs()
    per_plan = sum(len(s.seeds) for s in specs) + len(specs)
    placement = [s for s in specs if s.ablation == "placement"]
    retrained = sum(len(s.seeds) for s in placement) + len(placement)
    assert len(keys) == per_plan + retrained  # the shared runs once, each experiment's own placement runs
    loggers = Counter(r.data.tags["blocklab.logger"] for r in runs)
    windows = {logger: [float(r.data.tags["blocklab.logging_since"]) for r in runs
                        if r.data.tags["blocklab.logger"] == logger] for logger in loggers}
    print(f"\nruns left by each logging process: {dict(loggers)}; their logging windows: "
          + ", ".join(f"{min(w):.0f}-{max(w):.0f}" for w in windows.values()))


def test_a_server_stopped_in_the_middle_of_track_costs_nothing(project, tmp_path):
    names = plan_names(project.root)
    port = free_port()
    with postgresql_server() as database, ExitStack() as tracking:
        with ExitStack() as server_up:
            server = server_up.enter_context(mlflow_server(database, tmp_path / "artifacts", port))
            track = tracking.enter_context(started(
                [str(Path(sys.executable).with_name("blocklab")), "track", "--tracking-uri", server],
                cwd=project.root, env=project.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            deadline = time.time() + 300
            while len(every_run(server, names)) < 10:
                assert time.time() < deadline and track.poll() is None, "track logged nothing"
                time.sleep(0.5)
        # the server is gone, mid-way: track carries on, fails fast on what is left, and succeeds
        out, err = track.communicate(timeout=300)
        assert track.returncode == 0, err
        assert "NOT logged" in err, (out, err)
        with mlflow_server(database, tmp_path / "artifacts", port) as server:
            partial = every_run(server, names)
            again = subprocess.run([str(Path(sys.executable).with_name("blocklab")), "track", "--tracking-uri", server],
                                   cwd=project.root, env=project.env, capture_output=True, text=True, timeout=600)
            assert again.returncode == 0 and "NOT logged" not in again.stderr, again.stderr
            runs = every_run(server, names)
    keys = assert_each_key_once_and_nested(runs)
    metrics = json.loads((project.root / "reports/metrics.json").read_text())["runs"]
    params = load_params(project.root / "params.yaml")
    assert len(keys) == len(metrics) + len(params.specs() + params.map_specs())
    print(f"\nbefore the outage {len(partial)} runs had landed (some unfinished); after the next track "
          f"{len(runs)}, each once")


def test_a_server_stalled_past_a_requests_timeout_costs_nothing(project, tmp_path):
    """CI's case: a server too slow to answer within a request's timeout (here: stopped for three timeouts, then
    let go), which then carries out the requests it was sent, creating runs their senders gave up on. The same
    `blocklab track` logs what failed once more and leaves every run once, FINISHED, nested."""
    names = plan_names(project.root)
    env = {**project.env, "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"}
    with postgresql_server() as database, mlflow_server_process(database, tmp_path / "artifacts") as (server, process):
        with started([str(Path(sys.executable).with_name("blocklab")), "track", "--tracking-uri", server],
                     cwd=project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as track:
            deadline = time.time() + 300
            while len(every_run(server, names)) < 10:
                assert time.time() < deadline and track.poll() is None, "track logged nothing"
                time.sleep(0.5)
            os.killpg(process.pid, signal.SIGSTOP)
            time.sleep(6)
            os.killpg(process.pid, signal.SIGCONT)
            out, err = track.communicate(timeout=600)
        assert track.returncode == 0, err
        runs = every_run(server, names)
    assert "failed at first and were logged on a second try (" in out, (out, err)
    assert "NOT logged" not in err, err
    keys = assert_each_key_once_and_nested(runs, out + err)
    params = load_params(project.root / "params.yaml")
    seeds = sum(len(s.seeds) for s in params.specs() + params.map_specs())
    assert len(keys) == seeds + len(params.specs() + params.map_specs())
    print(f"\n{out.strip().splitlines()[-1]}")
