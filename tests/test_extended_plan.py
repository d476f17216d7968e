"""The extended plan (params.yaml's `plan: extended`): what does not fit `make repro`'s budget trains with `make
repro-extended`; `make repro` and `blocklab prefetch` leave it out, its committed records read, and CI's check that
the pipeline is up to date after `make repro` does not count its missing runs, but does count anything else."""

from __future__ import annotations

import copy

import pytest
import yaml
from click.testing import CliRunner

from blocklab.params.problems import ParamsError
from blocklab.params.schema import parse_params
from blocklab.schedule.prefetch import in_default_plan
from blocklab.schedule.train_stages import TrainStage, stage_name
from blocklab.tools.pipeline_status import left_after_repro

from conftest import ROOT

RAW = yaml.safe_load((ROOT / "params.yaml").read_text())


def with_plan(name: str, plan: str) -> dict:
    raw = copy.deepcopy(RAW)
    section = "maps" if name in raw["maps"] else "ablations"
    raw[section][name]["plan"] = plan
    return raw


def test_an_ablation_or_a_map_is_in_the_default_plan_unless_it_says_extended():
    params = parse_params(with_plan("residual", "extended"))
    assert "residual" in params.in_plan("extended") and "residual" not in params.in_plan("default")
    assert set(params.in_plan("default")) | set(params.in_plan("extended")) == {*params.ablations, *params.maps}
    assert not set(params.in_plan("default")) & set(params.in_plan("extended"))


def test_a_plan_is_default_or_extended_and_the_error_says_so():
    with pytest.raises(ParamsError, match="default.*extended"):
        parse_params(with_plan("residual", "someday"))


def test_moving_a_map_between_the_plans_changes_no_runs_settings():
    """`plan` is not a run's setting: its runs keep their keys, so moving it retrains nothing."""
    name = next(iter(RAW["maps"]))
    before, after = parse_params(RAW), parse_params(with_plan(name, "extended"))
    assert before.map_specs(name) == after.map_specs(name)


def test_prefetch_leaves_the_extended_plans_stages_out():
    params = parse_params(with_plan("residual", "extended"))
    stages = [TrainStage(stage_name("placement"), "placement"), TrainStage(stage_name("residual"), "residual")]
    assert in_default_plan(params, stages) == ([stages[0]], [stages[1]])


def test_blocklab_params_lists_each_plans_stages_as_dvc_names_them(tmp_path):
    from blocklab.cli import main

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(with_plan(next(iter(RAW["maps"])), "extended"), sort_keys=False))
    params = parse_params(with_plan(next(iter(RAW["maps"])), "extended"))
    for plan in ("default", "extended"):
        result = CliRunner().invoke(main, ["params", "--stages", plan, "--params", str(path)])
        assert result.exit_code == 0, result.output
        assert result.output.split() == [stage_name(n, n in params.maps) for n in params.in_plan(plan)]


def test_make_repro_copies_the_default_plans_runs_and_reads_the_extended_ones_records():
    makefile = (ROOT / "Makefile").read_text()
    repro = makefile.split("\nrepro:")[1].split("\n\n")[0]
    assert "blocklab prefetch\n" in repro and "--extended" not in repro
    assert "dvc repro --single-item $$(blocklab params --stages default)" in repro
    assert "dvc repro --allow-missing" in repro
    extended = makefile.split("\nrepro-extended:")[1].split("\n\n")[0]
    assert "blocklab prefetch --extended" in extended and "\tdvc repro\n" in extended + "\n"


def test_after_make_repro_an_extended_stage_may_only_miss_its_runs():
    outputs = {"data/runs/x", "data/runs/y", "data/runs/z"}
    missing = [{"changed outs": {"data/runs/x": "not in cache"}}]
    changed = [{"changed deps": {"params.yaml": {"maps.z.train": "modified"}}}, {"changed outs": {"data/runs/z":
                                                                                                 "not in cache"}}]
    status = {"map@x": missing, "map@y": [{"changed outs": {"data/runs/y": "not in cache"}}], "map@z": changed,
              "track": ["always changed"]}
    assert left_after_repro(status, outputs, {"map@x", "map@z"}) == {"map@y": status["map@y"], "map@z": changed}
    assert left_after_repro({"map@x": missing}, outputs, {"map@x"}) == {}


def test_ci_reads_the_status_through_the_same_rule():
    reproduce = (ROOT / ".ci" / "reproduce").read_text()
    assert "from blocklab.tools.pipeline_status import left_after_repro, stage_outputs" in reproduce
    assert "blocklab params --stages extended" in reproduce
