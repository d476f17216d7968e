"""Every former spelling of params.yaml and of a name on the command line still reads as today's, saying once
what it is called now (blocklab.params.former), and trains the same runs: a clone from before a rename, and the
commands its reader learnt, keep working. (Former option names: tests/test_cli.py.)"""

import copy
import re
from pathlib import Path

import pytest
import yaml

from blocklab.params.former import GRADIENT_SETTINGS, MODEL_SETTINGS, PLAN_NAMES, RESIDUAL_VALUES, name_today
from blocklab.params.problems import ParamsError
from blocklab.params.schema import load_params, parse_params

from conftest import ROOT


def _today():
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def _formerly(raw: dict) -> dict:
    """params.yaml as it was written before the rename: every spelling blocklab.params.former reads."""
    raw = copy.deepcopy(raw)
    back = {new: old for old, new in MODEL_SETTINGS.items()}
    values = {new: old for old, new in RESIDUAL_VALUES.items()}

    def model(section: dict) -> dict:
        section = {back.get(k, k): v for k, v in section.items()}
        if section.get("residual") in values:
            section["residual"] = values[section["residual"]]
        return section

    raw["defaults"]["model"] = model(raw["defaults"]["model"])
    raw["gradients"] = {({v: k for k, v in GRADIENT_SETTINGS.items()}).get(k, k): v for k, v in raw["gradients"].items()}
    for group in ("ablations", "maps"):
        for plan in raw[group].values():
            plan["model"] = model(plan["model"])
            for variant in plan["variants"].values():
                if "model" in variant:
                    variant["model"] = model(variant["model"])
    for old, new in PLAN_NAMES.items():
        raw["ablations"][old] = raw["ablations"].pop(new)
    return raw


def test_the_former_spellings_are_all_in_use_before_the_rename_and_none_after():
    written = yaml.safe_dump(_formerly(_today()))
    assert "norm: post" in written and "residual: false" in written and "norms:" in written
    assert "norm_order:" in written
    today = (ROOT / "params.yaml").read_text()
    assert not any(re.search(rf"(?<!\w){old}:", today) for old in [*MODEL_SETTINGS, *GRADIENT_SETTINGS, *PLAN_NAMES])
    assert "residual: true" not in today and "residual: false" not in today


def test_a_params_file_in_the_former_spelling_resolves_every_run_as_today_and_says_so_once_per_spelling(capsys):
    today = parse_params(_today())
    capsys.readouterr()
    former = parse_params(_formerly(_today()))
    notices = capsys.readouterr().err.splitlines()
    assert notices == [
        "note: in params.yaml, model: {norm: ...} is now model: {placement: ...} (the old spelling still works)",
        "note: in params.yaml, residual: true is now residual: plain (the old spelling still works)",
        "note: in params.yaml, gradients: {norms: ...} is now gradients: {placements: ...} (the old spelling still "
        "works)",
        "note: in params.yaml, residual: false is now residual: none (the old spelling still works)",
    ]
    renamed = {new: old for old, new in PLAN_NAMES.items()}
    specs = {(renamed.get(s.ablation, s.ablation), s.variant, s.cell): (s.model, s.train, s.seeds)
             for s in today.all_specs()}
    assert {(s.ablation, s.variant, s.cell): (s.model, s.train, s.seeds) for s in former.all_specs()} == specs
    assert former.gradients == today.gradients


def test_a_map_axis_in_the_former_spelling_makes_the_same_cells():
    raw = _today()
    stability = raw["maps"]["stability"]
    today = parse_params(raw).map_specs("stability")
    stability["axes"]["model"] = {"norm": ["post", "pre"]}
    stability["variants"], stability["labels"] = {"plain": {"model": {"residual": True}}}, {}
    former = parse_params(raw).map_specs("stability")
    assert [c.model.placement for c in former] == ["post"] * 10 + ["pre"] * 10
    assert {c.cell.split("_", 1)[1] for c in former} == {c.cell for c in today}
    assert {c.model.residual for c in former} == {"plain"}


def test_dvc_exp_run_s_under_a_former_ablation_name_is_refused_with_the_spelling_to_write(tmp_path):
    """`dvc exp run -S ablations.norm_order.train.lr=0.003` on today's params.yaml adds an entry of one override
    beside the renamed ablation; DVC would make a stage of it, so it is refused, naming the command to write."""
    raw = _today()
    raw["ablations"]["norm_order"] = {"train": {"lr": 0.003}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError, match=r"ablations.norm_order is now ablations.placement: write "
                                          r"ablations.placement.… \(e.g. dvc exp run -S ablations.placement.train.lr"):
        load_params(path)


@pytest.mark.parametrize("former, today", [
    ("norm_order", "placement"), ("norm_order/post", "placement/post"), ("norm_order/post/seed1", "placement/post/seed1"),
    ("train@norm_order", "train@placement"), ("placement/post", "placement/post"), ("train@warmup", "train@warmup"),
])
def test_a_name_on_the_command_line_in_its_former_spelling_is_read_as_todays(capsys, former, today):
    assert name_today(former) == today
    said = capsys.readouterr().err
    assert said == (f"note: {former} is now {today} (the old name still works)\n" if former != today else "")


@pytest.mark.parametrize("args", [["sample", "{name}/pre"], ["audit", "--run", "{name}/nowhere/seed0"]],
                         ids=["sample", "audit"])
def test_a_command_given_a_former_ablation_name_does_what_it_does_with_todays_and_says_so(tmp_path, args):
    """The same outcome under either name (here: no weights on this machine; no such run), one notice more."""
    import subprocess
    import sys

    blocklab = str(Path(sys.executable).with_name("blocklab"))

    def run(name):
        return subprocess.run([blocklab, *[a.format(name=name) for a in args], "--params", str(ROOT / "params.yaml")]
                              + (["--weights", str(tmp_path)] if args[0] == "sample" else []),
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)

    today, former = run("placement"), run("norm_order")
    assert today.returncode == former.returncode == 1, (today.stderr, former.stderr)
    notice, rest = former.stderr.split("\n", 1)
    assert notice.startswith("note: norm_order/") and " is now placement/" in notice
    assert rest == today.stderr and former.stdout == today.stdout
