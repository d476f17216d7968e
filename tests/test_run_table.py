"""The plan resolved once (blocklab.analysis.run_table): what every stage after training reads, and the only way
the analysis reaches params.yaml."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from blocklab.analysis.run_table import RunTable, read_run_table
from blocklab.params.problems import ParamsError
from blocklab.params.schema import load_params

from conftest import ROOT

ANALYSIS = ROOT / "src" / "blocklab" / "analysis"


def test_the_table_holds_every_run_of_the_plan_with_the_settings_params_resolves():
    params = load_params(ROOT / "params.yaml")
    table = RunTable.of(params)
    assert table.runs() == params.runs()  # the same specs (settings, seeds, labels, cells), in the same order
    assert list(table.ablations) == list(params.ablations) and list(table.maps) == list(params.maps)
    stages = table.training_stages()
    assert len(stages) == len(params.runs())
    assert stages["placement/post/seed0"] == "train@placement"
    assert all(stage == f"map@{key.split('/')[0]}" for key, stage in stages.items() if key.split("/")[0] in params.maps)
    for name, entry in table.maps.items():
        assert entry.axes == tuple((s, f, tuple(v)) for s, f, v in params.maps[name].axes.grid())
        assert list(entry.specs) == params.map_specs(name)
    ladder = table.ablations["ladder"]
    assert ladder.variants == list(params.ablations["ladder"].variants)
    assert [table.spec("ladder", v).label for v in ladder.variants] == list(ladder.labels.values())


def test_the_table_travels_whole_to_a_drawing_worker():
    table = read_run_table(ROOT / "params.yaml")
    assert pickle.loads(pickle.dumps(table)) == table


def test_an_unknown_name_is_refused_with_the_names_there_are():
    table = read_run_table(ROOT / "params.yaml")
    with pytest.raises(ParamsError, match="did you mean 'placement'"):
        table.spec("placemnt", "pre")
    with pytest.raises(ParamsError, match="variant of ablation 'placement'"):
        table.spec("placement", "sideways")
    with pytest.raises(ParamsError, match="ablation or map"):
        table.entry("nowhere")


def _names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    return names


def test_no_analysis_function_goes_back_to_params_yaml():
    """The stage reads params.yaml once, into the table; an analysis module that loads or parses it itself (or
    takes the unresolved Params) would resolve the plan a second time, its own way."""
    going_back = {"load_params", "parse_params", "Params"}
    offenders = {str(path.relative_to(ANALYSIS)): sorted(_names_used(path) & going_back)
                 for path in ANALYSIS.rglob("*.py") if path.name != "run_table.py"}
    assert {path: names for path, names in offenders.items() if names} == {}
