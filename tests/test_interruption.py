"""Killing a training stage leaves nothing DVC accepts as finished; the next `dvc repro` resumes the
runs from their checkpoints and ends with exactly the uninterrupted results."""

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import make_small_project

STAGE = "train@placement"


@pytest.fixture(scope="module")
def long_project(tmp_path_factory):
    """A small project whose placement runs (pre-norm's only) last long enough to be interrupted, trained once."""
    project = make_small_project(tmp_path_factory.mktemp("interrupted"))
    params = project.params
    placement = params["ablations"]["placement"]
    placement["variants"] = {"pre": placement["variants"]["pre"]}
    placement["labels"] = {k: v for k, v in placement.get("labels", {}).items() if k == "pre"}
    placement["train"]["steps"] = 3000  # 6 checkpoint intervals
    params["defaults"]["train"]["checkpoint_every"] = 500
    project.params = params
    project.run("dvc", "repro", STAGE)
    project.reference = {p.relative_to(project.root): p.read_bytes()
                         for p in (project.root / "data/runs/placement/pre").rglob("*") if p.name != "timing.json"
                         and p.is_file()}
    return project


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_training_stage_is_not_accepted_and_the_rerun_equals_an_uninterrupted_run(long_project, sig):
    project = long_project
    shutil.rmtree(project.root / "data/runs/placement/pre")  # as if never trained: DVC must train it,
    shutil.rmtree(project.root / "data/run_store")  # and the run store must not hold it either
    process = subprocess.Popen(["dvc", "repro", "--force", "--single-item", STAGE], cwd=project.root,
                               env=project.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    checkpoint = project.root / "data/checkpoints/placement/pre/seed0.pt"
    seen = b""
    deadline = time.time() + 120
    while not checkpoint.exists():  # killed mid-run, right after its first checkpoint (written whole, then renamed):
        assert time.time() < deadline and process.poll() is None, seen.decode(errors="replace")
        seen += os.read(process.stdout.fileno(), 4096)
    os.killpg(process.pid, sig)  # with 5 of the run's 6 parts still to train, on a machine of any speed
    process.wait(timeout=60)
    assert process.returncode != 0

    status = project.run("dvc", "status", STAGE).stdout
    assert STAGE in status  # not accepted as finished
    assert checkpoint.exists()

    project.run("dvc", "repro", "--force", "--single-item", STAGE)  # resumes from the checkpoint
    assert not checkpoint.exists()
    resumed_from = json.loads((project.root / "data/runs/placement/pre/seed0/timing.json").read_text())
    assert resumed_from["resumed_from_step"] >= 500  # from a checkpoint, not from step 0
    rerun = {p.relative_to(project.root): p.read_bytes()
             for p in (project.root / "data/runs/placement/pre").rglob("*") if p.name != "timing.json" and p.is_file()}
    assert rerun == project.reference
    assert "up to date" in project.run("dvc", "status", STAGE).stdout
