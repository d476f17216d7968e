"""What params.yaml used to spell another way: each former spelling is read as today's, with a one-line notice on
standard error naming the new spelling, so an old params.yaml (or an old `dvc exp run -S ...`) still works.

Today's names are in docs/pipeline.md ("One name for each thing"). A setting of a run keeps its former spelling
here for as long as a clone from before the rename may exist: what a run trains with is the same either way.
"""

from __future__ import annotations

import sys
from typing import Any

# A model setting's former name -> its name now.
MODEL_SETTINGS = {"norm": "placement"}
# `residual` took a bool before it took one of four schemes.
RESIDUAL_VALUES = {True: "plain", False: "none"}
# The gradient probe's former keys -> their names now.
GRADIENT_SETTINGS = {"norms": "placements"}
RENAMED_KEYS = {**MODEL_SETTINGS, **GRADIENT_SETTINGS}
# An ablation's former name -> its name now (an override under the former name alone, as `dvc exp run -S
# ablations.norm_order.train.lr=0.003` writes, is refused with the new spelling: DVC makes a stage of every entry).
PLAN_NAMES = {"norm_order": "placement"}


def _notice(old: str, new: str, said: set[str]) -> None:
    """Once per spelling, however many places of params.yaml write it."""
    line = f"note: in params.yaml, {old} is now {new} (the old spelling still works)"
    if line not in said:
        said.add(line)
        print(line, file=sys.stderr)


def _model_section(section: Any, said: set[str]) -> Any:
    """A `model:` mapping with its former spellings renamed (anything else returned as it is, for the schema to
    report)."""
    if not isinstance(section, dict):
        return section
    renamed = {}
    for key, value in section.items():
        if key in MODEL_SETTINGS and MODEL_SETTINGS[key] not in section:
            _notice(f"model: {{{key}: ...}}", f"model: {{{MODEL_SETTINGS[key]}: ...}}", said)
            key = MODEL_SETTINGS[key]
        if key == "residual" and isinstance(value, bool):
            _notice(f"residual: {str(value).lower()}", f"residual: {RESIDUAL_VALUES[value]}", said)
            value = RESIDUAL_VALUES[value]
        renamed[key] = value
    return renamed


def _axes(axes: Any, said: set[str]) -> Any:
    if not isinstance(axes, dict) or not isinstance(axes.get("model"), dict):
        return axes
    model = {}
    for key, values in axes["model"].items():
        if key in MODEL_SETTINGS and MODEL_SETTINGS[key] not in axes["model"]:
            _notice(f"axes: {{model: {{{key}: [...]}}}}", f"axes: {{model: {{{MODEL_SETTINGS[key]}: [...]}}}}", said)
            key = MODEL_SETTINGS[key]
        if key == "residual" and isinstance(values, list) and any(isinstance(v, bool) for v in values):
            _notice("residual: [true, false]", "residual: [plain, none]", said)
            values = [RESIDUAL_VALUES[v] if isinstance(v, bool) else v for v in values]
        model[key] = values
    return {**axes, "model": model}


def _plan(plan: Any, said: set[str]) -> Any:
    """An ablation or a map, its own settings and its variants' read in today's spelling."""
    if not isinstance(plan, dict):
        return plan
    plan = dict(plan)
    if "model" in plan:
        plan["model"] = _model_section(plan["model"], said)
    if "axes" in plan:
        plan["axes"] = _axes(plan["axes"], said)
    if isinstance(plan.get("variants"), dict):
        plan["variants"] = {
            name: {**variant, "model": _model_section(variant["model"], said)}
            if isinstance(variant, dict) and "model" in variant else variant
            for name, variant in plan["variants"].items()}
    return plan


def former_plan_names(raw: Any) -> list[str]:
    """The problems of a plan entered under a former name beside its new one (`ablations.norm_order` holding an
    override alone): each names the spelling to write instead."""
    problems = []
    for group in ("ablations", "maps"):
        plans = raw.get(group) if isinstance(raw, dict) else None
        if not isinstance(plans, dict):
            continue
        for old, new in PLAN_NAMES.items():
            if old in plans and new in plans and not (isinstance(plans[old], dict) and "variants" in plans[old]):
                problems.append(f"{group}.{old} is now {group}.{new}: write {group}.{new}.… (e.g. dvc exp run -S "
                                f"{group}.{new}.train.lr=0.003), and remove {group}.{old} from params.yaml")
    return problems


def today(raw: Any) -> Any:
    """`raw` (params.yaml as YAML reads it) in today's spelling; one notice on standard error per former spelling."""
    if not isinstance(raw, dict):
        return raw
    said: set[str] = set()
    raw = dict(raw)
    defaults = raw.get("defaults")
    if isinstance(defaults, dict) and "model" in defaults:
        raw["defaults"] = {**defaults, "model": _model_section(defaults["model"], said)}
    gradients = raw.get("gradients")
    if isinstance(gradients, dict):
        renamed = {}
        for key, value in gradients.items():
            if key in GRADIENT_SETTINGS and GRADIENT_SETTINGS[key] not in gradients:
                _notice(f"gradients: {{{key}: ...}}", f"gradients: {{{GRADIENT_SETTINGS[key]}: ...}}", said)
                key = GRADIENT_SETTINGS[key]
            renamed[key] = value
        raw["gradients"] = renamed
    for group in ("ablations", "maps"):
        if isinstance(raw.get(group), dict):
            raw[group] = {name: _plan(plan, said) for name, plan in raw[group].items()}
    return raw


def name_today(name: str) -> str:
    """A run, variant, ablation or stage named on the command line (`norm_order/post/seed1`, `train@norm_order`)
    with a former ablation name replaced by today's; one notice on standard error when it was."""
    stage, at, rest = name.rpartition("@")
    first, slash, tail = rest.partition("/")
    if first not in PLAN_NAMES:
        return name
    today_name = f"{stage}{at}{PLAN_NAMES[first]}{slash}{tail}"
    print(f"note: {name} is now {today_name} (the old name still works)", file=sys.stderr)
    return today_name
