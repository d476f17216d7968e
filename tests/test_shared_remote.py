"""A team shares one DVC remote (README, "Sharing results"): a second clone pulls what the first one
trained, with DVC's run cache, and trains nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import Project, pristine_copy


@pytest.mark.slow
def test_a_second_clone_pulls_the_first_ones_results_and_its_repro_trains_nothing(reproduced_project, tmp_path):
    first = pristine_copy(reproduced_project, tmp_path / "first")  # reproduced, its run cache included
    remote = tmp_path / "remote"  # a local-directory remote: what an s3://, ssh:// or gs:// one does, here
    first.run("dvc", "remote", "add", "-d", "shared", str(remote))
    first.run("dvc", "push", "--run-cache")
    first.commit("results of the default run")  # dvc.lock and the remote's config, as a team commits them

    clone = tmp_path / "second"
    first.run("git", "clone", "-q", str(first.root), str(clone))
    second = Project(clone, Path(first.env["BLOCKLAB_DATA_MIRROR"]))
    second.env["BLOCKLAB_DATA_MIRROR"] = str(tmp_path / "nowhere.txt")  # it must not need the corpus either
    pulled = second.run("dvc", "pull", "--run-cache")
    assert "files" in pulled.stdout and "added" in pulled.stdout, pulled.stdout
    repro = second.run("dvc", "repro")
    # Nothing runs but the track stage, which always does (it logs the pulled runs to MLflow): the wall times
    # (the runs' timing.json, reports/timings.json) are no output DVC records, so the pulled outputs are the
    # whole of what dvc.lock promises.
    assert re.findall(r"Running stage '([^']+)'", repro.stdout) == ["track"], repro.stdout
    assert json.loads(second.run("dvc", "status", "--json").stdout) == {"track": ["always changed"]}
    for run in json.loads((clone / "reports/metrics.json").read_text())["runs"].values():
        assert run["device"] == "cpu" and run["torch_version"]  # where each restored result was trained

    second.run("blocklab", "check")
    verdicts = [json.loads((p.root / "reports/claims.json").read_text()) for p in (first, second)]
    assert verdicts[0] == verdicts[1]
    runs = clone / "data/runs"
    assert {p.relative_to(runs) for p in runs.rglob("metrics.json")} == {
        p.relative_to(first.root / "data/runs") for p in (first.root / "data/runs").rglob("metrics.json")}
