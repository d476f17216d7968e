"""A fresh clone has every run's record and no run: it re-derives every report and verdict from the records,
training nothing, and the README's experiment trains only the runs its knob touches."""

import json
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
    for module in ("analysis/report.py", "analysis/plots.py"):  # a line outside the code that computes a run
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
                                                         "src/blocklab/analysis/report.py"]

    # blocklab check decides every finding there as the committed verdicts do, from the records' curves
    clone.run("blocklab", "check", "--out", "verdicts.json")
    assert json.loads((clone.root / "verdicts.json").read_text()) == json.loads(
        (clone.root / "reports/claims.json").read_text())

    # and blocklab track logs every run from its record, with no weights here
    records = len(list((clone.root / "reports/runs").rglob("metrics.json")))
    logged = clone.run("blocklab", "track")
    assert f"{records} runs logged, 0 already there" in logged.stdout, logged.stdout + logged.stderr
    assert "NOT logged" not in logged.stderr, logged.stderr


def test_the_readmes_experiment_on_a_fresh_clone_trains_only_the_runs_its_knob_touches(fresh_clone):
    clone = fresh_clone
    clone.run("dvc", "repro", "encode")  # the README's first step on a fresh clone: the corpus, encoded
    result = clone.run("dvc", "exp", "run", "--allow-missing", "-S", "ablations.norm_order.train.lr=0.003")
    trained = [stage for stage in _stages_run(result.stdout) if stage.startswith(("train@", "map@"))]
    assert trained == ["train@norm_order"], result.stdout
    trained_runs = {str(p.parent.relative_to(clone.root / "data/runs"))
                    for p in (clone.root / "data/runs").rglob("metrics.json")}  # DVC leaves the others' empty folders
    assert {run.split("/")[0] for run in trained_runs} == {"norm_order"}, trained_runs
    assert {"evaluate", "check", "report"} <= set(_stages_run(result.stdout))
    metrics = json.loads((clone.root / "reports/metrics.json").read_text())["runs"]
    for key, run in metrics.items():  # the knob's runs retrained, every other run as its record has it
        record = json.loads((clone.root / "reports/runs" / key / "metrics.json").read_text())
        assert {k: run[k] for k in record} == record
