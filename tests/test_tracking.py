"""MLflow tracking through a real local sqlite store and a real `mlflow server` (no mocks)."""

import csv
import io
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from blocklab.params.schema import load_params
from blocklab.tools.bench.queue import queue_status
from blocklab.tools.tracking import PARENT_TAG, RUN_KEY_TAG, ensure_store, track, workspace_root

from conftest import (
    ROOT, alive, described, free_port, pristine_copy, started, started_by_tests, tree_of, wait_until_healthy,
)


@pytest.fixture
def project(reproduced_project):
    return reproduced_project


def client_for(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_in(uri: str, experiment: str) -> list:
    client = client_for(uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


def test_the_pipeline_logs_every_run_with_params_steps_and_artifacts(project):
    uri = f"sqlite:///{project.root / 'mlflow.db'}"
    metrics = json.loads((project.root / "reports" / "metrics.json").read_text())
    params = project.params
    for key, final in metrics["runs"].items():
        ablation, variant, *cell, seed = key.split("/")  # a map's runs: <map>/<variant>/<cell>/seed<k>
        # Other tests may have run experiments in this project: find the run of these very results.
        runs = [r for r in runs_in(uri, f"blocklab/{ablation}") if r.info.run_name == "/".join([variant, *cell, seed])
                and r.data.metrics["train_loss_last25"] == pytest.approx(final["train_loss_last25"])]
        assert len(runs) == 1, key
        run = runs[0]
        assert run.data.tags[RUN_KEY_TAG].startswith(key + "@")
        plan = params["maps" if cell else "ablations"][ablation]
        assert run.data.tags["dvc.stage"] == f"{'map' if cell else 'train'}@{ablation}"
        assert run.data.params["train.steps"] == str(plan["train"]["steps"])
        if cell:
            assert run.data.tags["blocklab.cell"] == cell[0] and run.data.params["cell"] == cell[0]
            continue  # a map's runs carry no figure of their own
        assert run.data.params["model.placement"] in {"pre", "post"}
        assert run.data.metrics["train_loss_last25"] == pytest.approx(final["train_loss_last25"])
        assert run.data.metrics["baseline_unigram"] == pytest.approx(metrics["baselines"]["unigram"])
        assert run.data.metrics["train_seconds"] > 0
        assert run.data.metrics["steps_per_second"] == pytest.approx(final["steps"] / run.data.metrics["train_seconds"])
        assert 0 <= run.data.metrics["n_params_non_embedding"] < run.data.metrics["n_params"]  # a bigram's: 0
        assert run.data.metrics["flops_per_second"] == pytest.approx(
            run.data.metrics["training_flops"] / run.data.metrics["train_seconds"])
        history = client_for(uri).get_metric_history(run.info.run_id, "train_loss")
        assert [m.step for m in history] == list(range(final["steps"]))
        artifacts = {a.path for a in client_for(uri).list_artifacts(run.info.run_id)}
        assert "curve.csv" in artifacts
        parent = {a.path for a in client_for(uri).list_artifacts(run.data.tags[PARENT_TAG])}
        assert f"{ablation}_loss.png" in parent  # the ablation's figure, once per variant


def test_each_variant_is_a_parent_run_with_the_seed_means_and_its_seeds_nested_under_it(project):
    uri = f"sqlite:///{project.root / 'mlflow.db'}"
    client = client_for(uri)
    metrics = json.loads((project.root / "reports" / "metrics.json").read_text())
    variants = json.loads((project.root / "reports" / "variants.json").read_text())
    for name, summary in variants.items():
        ablation, variant = name.split("/")
        seeds = [run for key, run in metrics["runs"].items() if key.startswith(name + "/")]
        # Other tests may have run experiments in this project: find the parent of these very results.
        parents = [r for r in runs_in(uri, f"blocklab/{ablation}") if r.info.run_name == variant
                   and r.data.metrics["val_loss_mean"] == pytest.approx(summary["val_loss_mean"], abs=1e-6)]
        assert len(parents) == 1, name
        parent = parents[0]
        assert parent.info.status == "FINISHED" and PARENT_TAG not in parent.data.tags
        assert parent.data.metrics["train_loss_last25_mean"] == pytest.approx(summary["train_loss_mean"], abs=1e-6)
        if len(seeds) == 1:  # one seed: no spread
            assert "val_loss_std" not in parent.data.metrics and summary["val_loss_ci95"] is None
        else:
            spread = statistics.stdev(run["val_loss"] for run in seeds)
            assert parent.data.metrics["val_loss_std"] == pytest.approx(spread, abs=1e-6)
        seed_numbers = project.params["ablations"][ablation]["seeds"]
        assert parent.data.metrics["n_seeds"] == len(seeds) == len(seed_numbers)
        assert parent.data.params["seeds"] == ",".join(map(str, seed_numbers))
        children = [r for r in runs_in(uri, f"blocklab/{ablation}") if r.data.tags.get(PARENT_TAG) == parent.info.run_id]
        assert sorted(r.info.run_name for r in children) == [f"{variant}/seed{s}" for s in seed_numbers]
        assert parent.data.metrics["train_seconds"] == pytest.approx(max(r.data.metrics["train_seconds"] for r in children))
        assert {parent.data.metrics["training_flops"]} == {r.data.metrics["training_flops"] for r in children}
        mean_curve = client.get_metric_history(parent.info.run_id, "train_loss")
        seed_curves = [client.get_metric_history(r.info.run_id, "train_loss") for r in children]
        assert [m.step for m in mean_curve] == [m.step for m in seed_curves[0]]
        assert [m.value for m in mean_curve] == pytest.approx(
            [sum(values) / len(values) for values in zip(*[[m.value for m in c] for c in seed_curves])])


def test_a_run_whose_artifact_upload_failed_is_replaced_and_the_store_ends_with_one_complete_run_per_key(
        project, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path / 'half.db'}"
    params = load_params(project.root / "params.yaml")
    baselines = json.loads((project.root / "reports" / "metrics.json").read_text())["baselines"]
    arguments = (params, project.root / "data" / "runs", baselines, project.root / "reports" / "figures")
    upload, calls, failing = MlflowClient.log_artifact, [], []

    def failing_partway(self, *args, **kwargs):  # the real upload, but a seed run's third curve's, every time
        calls.append(args)                        # (track's second try at it included)
        if sum(str(a[1]).endswith("curve.csv") for a in calls) == 3 and str(args[1]).endswith("curve.csv"):
            failing.append(args[1])
        if args[1] in failing:
            raise OSError("disk full (injected)")
        return upload(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_artifact", failing_partway)
    first = track(*arguments, uri=store)
    monkeypatch.setattr(MlflowClient, "log_artifact", upload)
    assert len(first["failed"]) == 1 and "disk full" in next(iter(first["failed"].values()))
    assert first["retried"] == {} and sum(a[1] == failing[0] for a in calls) == 2  # its second try failed too
    every = [r for name in [*params.ablations, *params.maps] for r in client_for(store).search_runs(
        [client_for(store).get_experiment_by_name(f"blocklab/{name}").experiment_id])]
    assert sum(r.info.status != "FINISHED" for r in every) == 2  # the half-logged seed run and its parent

    second = track(*arguments, uri=store)
    assert not second["failed"] and len(second["logged"]) == 1
    specs = params.specs() + params.map_specs()  # a map's cells are parents too
    n_runs = sum(len(s.seeds) for s in specs)
    assert second["already"] == n_runs - 1 and second["variants"] == 1
    every = [r for name in [*params.ablations, *params.maps] for r in client_for(store).search_runs(
        [client_for(store).get_experiment_by_name(f"blocklab/{name}").experiment_id])]
    assert all(r.info.status == "FINISHED" for r in every)
    keys = [r.data.tags[RUN_KEY_TAG] for r in every]
    assert len(keys) == len(set(keys)) == n_runs + len(specs)  # one complete run per key
    by_id = {r.info.run_id: r for r in every}
    for run in every:
        if "/seed" in run.info.run_name:  # every seed run nested under a complete parent of its variant or cell
            assert by_id[run.data.tags[PARENT_TAG]].info.run_name == run.info.run_name.rsplit("/", 1)[0]
    third = track(*arguments, uri=store)
    assert third["logged"] == [] and third["already"] == n_runs and third["variants"] == 0


def test_an_unreachable_store_costs_no_result_and_track_catches_up_without_duplicates(project, tmp_path):
    env = {**project.env, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}
    started = time.perf_counter()
    down = subprocess.run(["dvc", "repro", "--force", "--single-item", "track"], cwd=project.root, env=env, capture_output=True,
                          text=True)
    assert down.returncode == 0, down.stderr
    assert time.perf_counter() - started < 60  # fails fast: no minutes of HTTP retries
    n_runs = len(json.loads((project.root / "reports" / "metrics.json").read_text())["runs"])
    assert f"warning: {n_runs} runs were NOT logged to MLflow" in down.stderr
    assert "placement/pre/seed0" in down.stderr

    store = f"sqlite:///{tmp_path / 'later.db'}"
    first = project.run("blocklab", "track", "--tracking-uri", store)
    assert f"{n_runs} runs logged, 0 already there" in first.stdout
    second = project.run("blocklab", "track", "--tracking-uri", store)
    assert f"0 runs logged, {n_runs} already there" in second.stdout
    seed_runs = sum(k.startswith("placement/") for k in json.loads(
        (project.root / "reports" / "metrics.json").read_text())["runs"])
    parent_runs = len(project.params["ablations"]["placement"]["variants"])
    assert len(runs_in(store, "blocklab/placement")) == seed_runs + parent_runs


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_a_real_mlflow_server_serves_one_experiments_runs_over_rest(project, tmp_path):
    port = free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    with started([str(mlflow), "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
                  "--default-artifact-root", str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
                  "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as server:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base, server)
        project.run("blocklab", "track", "--tracking-uri", base)
        with urllib.request.urlopen(
                f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name=blocklab/placement", timeout=30) as r:
            experiment_id = json.loads(r.read())["experiment"]["experiment_id"]
        found = _post(f"{base}/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment_id]})["runs"]
        names = sorted(run["info"]["run_name"] for run in found)
        variants = project.params["ablations"]["placement"]["variants"]
        seeds = project.params["ablations"]["placement"]["seeds"]
        assert names == sorted([f"{v}/seed{s}" for v in variants for s in seeds] + list(variants))


def _track_one_ablation(root: str, ablation: str, uri: str, queue) -> None:
    os.chdir(root)
    params = load_params("params.yaml")
    only = params.model_copy(update={"ablations": {ablation: params.ablations[ablation]}, "maps": {}})
    baselines = json.loads(Path("reports/metrics.json").read_text())["baselines"]
    queue.put(track(only, Path("data/runs"), baselines, Path("reports/figures"), uri=uri))


def test_two_processes_logging_at_once_to_a_pre_created_store_both_land(project, tmp_path):
    uri = f"sqlite:///{tmp_path / 'shared.db'}"
    ensure_store(uri)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_track_one_ablation, args=(str(project.root), name, uri, queue))
               for name in ("placement", "warmup")]
    for w in workers:
        w.start()
    results = [queue.get(timeout=300) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    assert all(not r["failed"] for r in results), results
    landed = {name: len(runs_in(uri, f"blocklab/{name}")) for name in ("placement", "warmup")}
    assert all(landed.values()) and sum(landed.values()) == sum(len(r["logged"]) + r["variants"] for r in results)


def test_queue_workers_temporary_copies_resolve_to_the_workspace_store(tmp_path):
    inside = tmp_path / "ws" / ".dvc" / "tmp" / "exps" / "tmpab12cd"
    inside.mkdir(parents=True)
    assert workspace_root(inside) == (tmp_path / "ws").resolve()
    assert workspace_root(tmp_path) == tmp_path.resolve()


@pytest.mark.slow
def test_four_queued_experiments_that_break_a_claim_all_record_in_dvc_and_in_the_workspace_store(
        reproduced_project, tmp_path):
    project = pristine_copy(reproduced_project, tmp_path / "project")
    project.commit("baseline results")
    uri = f"sqlite:///{project.root / 'mlflow.db'}"
    ensure_store(uri)
    rates = ["0.001", "0.002", "0.004", "1e-05"]  # at 1e-05 pre-norm learns nothing: a claim fails
    for lr in rates:
        project.run("dvc", "exp", "run", "--queue", "-S", f"ablations.placement.train.lr={lr}")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    project.run("dvc", "queue", "start", "-j", "2")
    # Four small experiments take ~2 minutes here, two at a time; start-up imports torch and MLflow, slow on
    # a loaded machine. A queue that has not drained by then fails the test with what its workers logged.
    deadline = time.time() + 600
    try:
        while True:
            status = queue_status(project.env, project.root)
            if not any(word in status for word in ("Queued", "Running")):
                break
            assert time.time() < deadline, f"the queue has not drained in 600 s:\n{status}{project.diagnostics()}"
            time.sleep(5)
    finally:
        project.run("dvc", "queue", "stop", "--kill", check=False)
        workers = started_by_tests(before)  # the queue's workers, re-parented here (the suite is a subreaper)
        psutil.wait_procs(workers, timeout=60)
        for worker in alive(workers):
            worker.kill()
        assert not alive(workers), f"queue workers still running after dvc queue stop: {described(alive(workers))}"
    assert "Failed" not in status and status.count("Success") == 4, status
    rows = list(csv.DictReader(io.StringIO(project.run("dvc", "exp", "show", "--csv").stdout)))
    experiments = {row["Experiment"]: row for row in rows if row["Experiment"]}
    assert len(experiments) == 4, rows
    by_rate = {float(row["ablations.placement.train.lr"]): row for row in experiments.values()}
    assert sorted(by_rate) == sorted(float(lr) for lr in rates)
    # at 1e-05 pre-norm learns nothing: its finding fails, decisively; at 0.004 it does not fail (after the
    # small plan's 12 steps, two seeds may leave it undecided)
    assert by_rate[1e-05]["findings_fail"] == "1" and by_rate[0.004]["findings_fail"] == "0"
    runs = runs_in(uri, "blocklab/placement")
    names = {r.data.tags.get("DVC_EXP_NAME") for r in runs} - {None}
    assert names == set(experiments), (names, set(experiments))
    learning_rates = {r.data.params["train.lr"] for r in runs if r.data.tags.get("DVC_EXP_NAME")}
    assert learning_rates == {str(float(lr)) for lr in rates}
    parents = [r for r in runs if r.data.tags.get("DVC_EXP_NAME") and "/seed" not in r.info.run_name]
    assert len(parents) == 4 * len(project.params["ablations"]["placement"]["variants"])


def test_blocklab_ui_serves_the_store_on_127_0_0_1_and_prints_where_each_ablations_runs_are(project):
    """MLflow 3 opens an experiment on its GenAI overview (traces, all empty): `blocklab ui` also prints, per
    ablation, the address of its training runs and of its variants' parent runs compared, read back here."""
    import json
    import re
    import urllib.parse
    import urllib.request

    uri = f"sqlite:///{project.root / 'mlflow.db'}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    params = load_params(project.root / "params.yaml")
    with started(["blocklab", "ui", "--port", str(port), "--tracking-uri", uri], cwd=project.root, env=env,
                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as ui:
        first = [ui.stdout.readline().strip() for _ in range(3)]  # it catches up with the workspace first
        assert first[0] == "First, what the store lacks of this workspace's runs (blocklab track):"
        assert first[1].startswith(f"MLflow ({uri}): "), first
        assert first[2].endswith(f"{base}  (Ctrl-C to stop)"), first
        holds = re.fullmatch(r"it holds (\d+) training runs under (\d+) variant parent runs \((\d+) with their "
                             r"seed-0 model\) in (\d+) experiments", ui.stdout.readline().strip())
        seeds, runs, parents, models, experiments = (sum(len(s.seeds) for s in params.all_specs()),
                                                     *map(int, holds.groups()))
        # other tests' experiments may have logged here too: at least the plan's, every variant with its model
        weights = sum((project.root / "data/runs" / s.ablation / s.variant / f"seed{s.seeds[0]}/model.pt").exists()
                      for s in params.specs())
        assert runs >= seeds and parents >= len(params.all_specs()) and models >= weights > 0
        assert experiments == len(params.ablations) + len(params.maps)
        printed = [ui.stdout.readline().strip() for _ in range(2 * len(params.ablations) + 2 * len(params.maps))]
        wait_until_healthy(base, ui)

        def get(path: str, **query) -> dict:
            with urllib.request.urlopen(f"{base}/api/2.0/mlflow/{path}?{urllib.parse.urlencode(query)}") as answer:
                return json.loads(answer.read())

        for name, plan in [*params.ablations.items(), *params.maps.items()]:
            runs_line = next(line for line in printed if line.startswith(f"blocklab/{name}: training runs: "))
            experiment_id = re.fullmatch(rf"blocklab/{name}: training runs: {base}/#/experiments/(\d+)/runs",
                                         runs_line).group(1)
            assert get("experiments/get", experiment_id=experiment_id)["experiment"]["name"] == f"blocklab/{name}"
            compared = next(line for line in printed if line.startswith(f"blocklab/{name}: its "))
            address = compared.split(": ", 2)[2]
            assert address.startswith(f"{base}/#/compare-runs?runs=")
            query = urllib.parse.parse_qs(address.split("?", 1)[1])
            assert json.loads(query["experiments"][0]) == [experiment_id]
            runs = [get("runs/get", run_id=run_id)["run"] for run_id in json.loads(query["runs"][0])]
            # the variants' parent runs (a map's: one per cell, named <variant>/<cell>)
            assert {r["info"]["run_name"].split("/")[0] for r in runs} == set(plan.variants)
            assert all(r["info"]["experiment_id"] == experiment_id for r in runs)
            assert not any(t["key"] == PARENT_TAG for r in runs for t in r["data"].get("tags", []))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_blocklab_ui_stopped_by_a_signal_to_it_alone_leaves_no_process_behind(tmp_path, stop):
    """A service manager or `kill` signals `blocklab ui` itself, not its group: the MLflow server and
    every worker it started must stop with it."""
    uri = f"sqlite:///{tmp_path / 'ui.db'}"
    ensure_store(uri)
    port = free_port()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    with started(["blocklab", "ui", "--port", str(port), "--tracking-uri", uri, "--no-track"], env=env,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as ui:
        wait_until_healthy(f"http://127.0.0.1:{port}", ui)
        tree = tree_of(ui)
        assert any("mlflow" in " ".join(p.cmdline()) for p in tree[1:])  # the server runs under it
        ui.send_signal(stop)
        ui.wait(timeout=60)
        psutil.wait_procs(tree, timeout=20)
        assert not alive(tree), f"left running after {stop.name}: {described(alive(tree))}"


def logged_run_of(project, client, variant: str, seed: int):
    """The MLflow run of the placement run whose results the workspace holds now (found by its run key)."""
    from blocklab.tools.tracking import run_key

    spec = load_params(project.root / "params.yaml").spec("placement", variant)
    key = run_key(spec, seed, project.root / f"data/runs/placement/{variant}/seed{seed}")
    experiment = client.get_experiment_by_name("blocklab/placement")
    (run,) = client.search_runs([experiment.experiment_id], f"tags.`{RUN_KEY_TAG}` = '{key}'")
    return run


def test_each_variants_parent_run_holds_its_seed0_model_loadable_with_equal_logits_and_its_sample(project, monkeypatch):
    import mlflow.pytorch
    import torch

    from blocklab.tools.sampling import read_model

    uri = f"sqlite:///{project.root / 'mlflow.db'}"
    client = client_for(uri)
    experiment = client.get_experiment_by_name("blocklab/placement")
    seed_run = logged_run_of(project, client, "pre", 0)  # the results now in the workspace
    parent = client.get_run(seed_run.data.tags[PARENT_TAG])
    (logged,) = client.search_logged_models([experiment.experiment_id],
                                            filter_string=f"source_run_id = '{parent.info.run_id}'")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # mlflow.set_tracking_uri exports it: put back after the test
    mlflow.set_tracking_uri(uri)
    loaded = mlflow.pytorch.load_model(f"models:/{logged.model_id}")  # a torch.export graph: no train or eval mode
    own, cfg, chars = read_model(project.root / "data/runs/placement/pre/seed0")
    batch = torch.randint(0, len(chars), (4, cfg.context), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(loaded(batch), own(batch))
    sample = Path(client.download_artifacts(parent.info.run_id, "sample.txt", str(project.root / "dl"))).read_text()
    assert sample.startswith("\n") and len(sample) == 201


def test_a_runs_mlflow_times_are_its_training_not_its_logging(project, tmp_path):
    """Created, Duration and the time axis: the start and end of the training, as the train stage recorded.
    (Into a store of its own: a store that already holds the same results, trained earlier, keeps those.)"""
    params = load_params(project.root / "params.yaml")
    only = params.model_copy(update={"ablations": {"placement": params.ablations["placement"]}, "maps": {}})
    baselines = json.loads((project.root / "reports" / "metrics.json").read_text())["baselines"]
    uri = f"sqlite:///{tmp_path / 'times.db'}"
    assert not track(only, project.root / "data" / "runs", baselines, None, uri=uri)["failed"]
    client = client_for(uri)
    timing = json.loads((project.root / "data/runs/placement/pre/seed0/timing.json").read_text())
    experiment = client.get_experiment_by_name("blocklab/placement")
    (run,) = client.search_runs([experiment.experiment_id], "attributes.run_name = 'pre/seed0'")
    assert run.info.start_time == int(timing["started_at"] * 1000)
    assert run.info.end_time == int(timing["ended_at"] * 1000)
    history = client.get_metric_history(run.info.run_id, "train_loss")
    assert run.info.start_time < history[0].timestamp <= history[-1].timestamp == run.info.end_time
    (parent,) = client.search_runs([experiment.experiment_id], "attributes.run_name = 'pre'")
    assert parent.info.start_time <= run.info.start_time and parent.info.end_time >= run.info.end_time

def test_an_experiment_created_from_a_temporary_copy_keeps_its_artifacts_beside_the_store(tmp_path, monkeypatch):
    """A queued experiment logs from `.dvc/tmp/exps/<copy>`, which DVC deletes afterwards: an experiment it
    creates first must not put its artifacts there."""
    from blocklab.tools.tracking.store import client_for, experiment_id_of

    store = tmp_path / "workspace" / "mlflow.db"
    uri = f"sqlite:///{store}"
    ensure_store(uri)
    copy = tmp_path / "workspace" / ".dvc" / "tmp" / "exps" / "tmp1234"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    client = client_for(uri)
    experiment = client.get_experiment(experiment_id_of(client, "blocklab/placement"))
    assert experiment.artifact_location == (store.parent / "mlartifacts" / "blocklab_placement").as_uri()
    run = client.create_run(experiment.experiment_id).info.run_id
    (tmp_path / "note.txt").write_text("x")
    client.log_artifact(run, str(tmp_path / "note.txt"))
    assert (store.parent / "mlartifacts" / "blocklab_placement").exists() and not any(copy.iterdir())


def test_a_project_copys_commands_log_to_its_own_store_whatever_this_process_exported(monkeypatch, tmp_path):
    """A test that calls `mlflow.set_tracking_uri` exports $MLFLOW_TRACKING_URI to the test process; under
    pytest-xdist a later test in that worker then saw its queued experiments log to the other test's store."""
    from conftest import Project

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    env = Project(tmp_path, tmp_path / "corpus.txt").env
    assert not [name for name in env if name.startswith("MLFLOW_")]


def test_logging_a_model_leaves_the_process_environment_as_it_was(project, tmp_path, monkeypatch):
    """MLflow's fluent API exports its tracking URI to the environment: a `dvc exp run` started by the same
    process afterwards would have logged its runs to this store instead of the workspace's."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = load_params(project.root / "params.yaml")
    only = params.model_copy(update={"ablations": {"placement": params.ablations["placement"]}, "maps": {}})
    baselines = json.loads((project.root / "reports" / "metrics.json").read_text())["baselines"]
    result = track(only, project.root / "data" / "runs", baselines, None, uri=f"sqlite:///{tmp_path / 'other.db'}")
    assert not result["failed"] and result["variants"] == len(only.ablations["placement"].variants)
    assert "MLFLOW_TRACKING_URI" not in os.environ


def test_an_interrupted_track_begins_no_more_variants(tmp_path, monkeypatch):
    """Ctrl-C (SIGINT, delivered to the main thread while the first variant is being logged) stops `track` once the
    variants being logged end: the rest are not begun, where draining the pool would log the whole plan first."""
    from blocklab.tools.tracking import log_runs

    params = load_params(ROOT / "params.yaml")
    begun = []

    def logging_a_variant(client, spec, *args):
        begun.append(spec.name)
        if len(begun) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)

    monkeypatch.setattr(log_runs, "_log_variant", logging_a_variant)
    with pytest.raises(KeyboardInterrupt):
        log_runs.track(params, ROOT / "reports/runs", {}, None, uri=f"sqlite:///{tmp_path / 'store.db'}")
    # one variant at a time into SQLite: the interrupted one, and at most the one its thread took up meanwhile
    assert 1 <= len(begun) <= 2 < len(params.all_specs()), len(begun)


def test_two_loggers_whose_since_times_cross_their_creations_both_claim_and_settling_leaves_one_run_nested(tmp_path):
    """The race CI met (two queued experiments' `track` into one server): A creates its run and claims it; B's run,
    whose since-time was taken earlier but whose creation reached the store later, also claims (A's is not
    finished, and B's looks earlier). Both finish; settling leaves the earliest, with every nested run under it."""
    from blocklab.tools.tracking.claiming import COMPLETE, LOGGER_TAG, SINCE_TAG, claim, settle

    uri = f"sqlite:///{tmp_path / 'race.db'}"
    ensure_store(uri)
    client = client_for(uri)
    experiment = client.create_experiment("blocklab/race")
    alive_logger = f"{socket.gethostname()}:{os.getppid()}"  # another live process on this machine

    def created(since: float, key: str = "placement/pre@k", parent: str | None = None) -> str:
        tags = {RUN_KEY_TAG: key, LOGGER_TAG: alive_logger, SINCE_TAG: repr(since)}
        return client.create_run(experiment, tags=tags | ({PARENT_TAG: parent} if parent else {})).info.run_id

    a = created(since=2.0)
    assert claim(client, experiment, "placement/pre@k", a) == a  # nothing else yet
    b = created(since=1.0)  # its time taken before A's, its creation after A's claim
    assert claim(client, experiment, "placement/pre@k", b) == b  # the claim alone lets both stand
    seed_of_a, seed_of_b = created(5.0, "placement/pre/seed0@k", a), created(6.0, "placement/pre/seed1@k", b)
    for run in (a, b):
        client.set_terminated(run, status=COMPLETE)
    assert settle(client, experiment, "placement/pre@k", PARENT_TAG) == b  # whichever process settles it
    assert settle(client, experiment, "placement/pre@k", PARENT_TAG) == b
    left = [r for r in client.search_runs([experiment]) if r.data.tags[RUN_KEY_TAG] == "placement/pre@k"]
    assert [r.info.run_id for r in left] == [b]
    assert {client.get_run(s).data.tags[PARENT_TAG] for s in (seed_of_a, seed_of_b)} == {b}
