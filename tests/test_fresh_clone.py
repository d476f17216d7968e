"""A fresh clone has every run's record and no run: it re-derives every report and verdict from the records,
training nothing, and the README's experiment trains only the runs its knob touches."""

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Project, pristine_copy

pytestmark = pytest.mark.slow

TRAINING = ("Running stage 'train_", "Running stage 'map_")


@pytest.fixture
def fresh_clone(reproduced_project, tmp_path) -> Project:
    """A `git clone` of a small project whose results (records, reports, dvc.lock) are committed: no data/, no
    DVC cache, no run store, no MLflow store."""
    origin = pristine_copy(reproduced_project, tmp_path / "origin")
    origin.commit("the default run's results, records included")
    subprocess.run(["git", "clone", "-q", str(origin.root), str(tmp_path / "clone")], check=True)
    clone = Project(tmp_path / "clone", Path(origin.env["BLOCKLAB_DATA_MIRROR"]))
    assert not (clone.root / "data").exists() and any((clone.root / "reports/runs").rglob("metrics.json"))
    return clone


def _stages_run(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")]


def test_a_changed_analysis_module_re_derives_every_report_on_a_fresh_clone_training_nothing(fresh_clone):
    clone = fresh_clone
    committed = {p: p.read_bytes() for p in (clone.root / "reports").rglob("*") if p.is_file()}
    for module in ("analysis/runs.py", "analysis/plots.py"):  # a line outside the code that computes a run
        with open(clone.root / "src/blocklab" / module, "a") as f:
            f.write("# a changed line\n")
    started = time.perf_counter()
    result = clone.run("dvc", "repro", "--allow-missing")
    seconds = time.perf_counter() - started
    ran = _stages_run(result.stdout)
    print(f"dvc repro --allow-missing on a fresh clone: {', '.join(ran)} in {seconds:.1f} s")
    assert {"evaluate", "report"} <= set(ran), result.stdout
    assert not [stage for stage in ran if stage.startswith(("train@", "map@", "download", "encode"))], ran
    assert not (clone.root / "data/runs").exists()  # zero runs trained, none copied
    after = {p: p.read_bytes() for p in (clone.root / "reports").rglob("*") if p.is_file()}
    changed = sorted(str(p.relative_to(clone.root)) for p in set(committed) | set(after)
                     if committed.get(p) != after.get(p) and p.name != "timings.json")
    assert not changed, changed  # every report as committed, byte for byte
    status = clone.run("git", "status", "--porcelain").stdout.split("\n")
    assert sorted(line[3:] for line in status if line) == ["dvc.lock", "src/blocklab/analysis/plots.py",
                                                         "src/blocklab/analysis/runs.py"]

    # blocklab check decides every finding there as the committed verdicts do, from the records' curves
    clone.run("blocklab", "check", "--out", "verdicts.json")
    assert json.loads((clone.root / "verdicts.json").read_text()) == json.loads(
        (clone.root / "reports/claims.json").read_text())

    # and the track stage, which DVC always runs, logged every run from its record, with no weights here
    records = len(list((clone.root / "reports/runs").rglob("metrics.json")))
    assert f"{records} runs logged, 0 already there" in result.stdout, result.stdout
    again = clone.run("blocklab", "track")
    assert f"0 runs logged, {records} already there" in again.stdout, again.stdout + again.stderr
    assert "NOT logged" not in again.stderr, again.stderr


def test_the_store_holds_every_run_of_a_fresh_clone_and_gains_each_model_when_its_weights_arrive(fresh_clone):
    """Nothing trained, `dvc repro` fills the MLflow store from the records (no models: no weights); one stage
    trained alone (its target's `dvc repro` does not reach the track stage), `blocklab ui` logs the models its
    weights make before it serves; every run key once, every seed under its variant's parent, throughout."""
    from mlflow.tracking import MlflowClient

    from blocklab.params.schema import load_params
    from blocklab.tools.tracking import PARENT_TAG, RUN_KEY_TAG
    from blocklab.tools.tracking.store import MODEL_TAG
    from conftest import free_port, started, wait_until_healthy

    clone = fresh_clone
    params = load_params(clone.root / "params.yaml")
    client = MlflowClient(f"sqlite:///{clone.root / 'mlflow.db'}")

    def stored() -> list:
        experiments = [e.experiment_id for e in client.search_experiments() if e.name.startswith("blocklab/")]
        runs = client.search_runs(experiments, max_results=50000)
        keys = [r.data.tags[RUN_KEY_TAG] for r in runs]
        assert len(keys) == len(set(keys)) and all(r.info.status == "FINISHED" for r in runs)
        by_id = {r.info.run_id: r for r in runs}
        for run in runs:
            if "/seed" in run.info.run_name:  # under the parent of its own variant (or cell)
                assert by_id[run.data.tags[PARENT_TAG]].info.run_name == run.info.run_name.rsplit("/", 1)[0]
        return runs

    clone.run("dvc", "repro", "--allow-missing")
    runs = stored()
    assert len(runs) == sum(len(s.seeds) for s in params.all_specs()) + len(params.all_specs())
    assert not [r for r in runs if MODEL_TAG in r.data.tags]

    # what `blocklab sample` advises when a run's weights are not here, followed word for word
    advice = " ".join(clone.run("blocklab", "sample", "placement/pre", check=False).stderr.split())
    command = re.search(r"; or `(dvc repro [^`]+)` trains them", advice).group(1)
    trained = clone.run(*shlex.split(command)).stdout
    assert "Running stage 'train@placement'" in trained and "Running stage 'track'" not in trained, trained
    port = free_port()
    with started(["blocklab", "ui", "--port", str(port)], cwd=clone.root, env=clone.env, stdout=subprocess.PIPE,
                 stderr=subprocess.DEVNULL, text=True) as ui:
        printed = [ui.stdout.readline().strip() for _ in range(2)]
        placement = params.ablations["placement"].variants
        assert f"0 runs logged, {sum(len(s.seeds) for s in params.all_specs())} already there" in printed[1]
        assert f"; {len(placement)} models added, their weights here now" in printed[1], printed
        wait_until_healthy(f"http://127.0.0.1:{port}", ui)
    with_models = {r.info.run_name for r in stored() if MODEL_TAG in r.data.tags
                   and r.data.tags["blocklab.ablation"] == "placement"}
    assert with_models == set(placement)
    assert "models added" not in clone.run("blocklab", "track").stdout  # nothing twice


def test_the_readmes_experiment_on_a_fresh_clone_trains_only_the_runs_its_knob_touches(fresh_clone):
    clone = fresh_clone
    clone.run("dvc", "repro", "encode")  # the README's first step on a fresh clone: the corpus, encoded
    result = clone.run("dvc", "exp", "run", "--allow-missing", "-S", "ablations.placement.train.lr=0.003")
    trained = [stage for stage in _stages_run(result.stdout) if stage.startswith(("train@", "map@"))]
    assert trained == ["train@placement"], result.stdout
    trained_runs = {str(p.parent.relative_to(clone.root / "data/runs"))
                    for p in (clone.root / "data/runs").rglob("metrics.json")}  # DVC leaves the others' empty folders
    assert {run.split("/")[0] for run in trained_runs} == {"placement"}, trained_runs
    assert {"evaluate", "check", "report"} <= set(_stages_run(result.stdout))
    metrics = json.loads((clone.root / "reports/metrics.json").read_text())["runs"]
    for key, run in metrics.items():  # the knob's runs retrained, every other run as its record has it
        record = json.loads((clone.root / "reports/runs" / key / "metrics.json").read_text())
        assert {k: run[k] for k in record} == record
