import re

import pytest
import yaml

from blocklab.params.problems import ParamsError

from blocklab.params.schema import load_params, parse_params

from conftest import ROOT


def minimal(**ablation) -> dict:
    base = {"seeds": [0], "model": {}, "train": {}, "variants": {"v": {}}}
    return {"data": {"url": "http://x", "sha256": "0" * 64}, "ablations": {"a": {**base, **ablation}}}


def test_the_repository_params_resolve_to_the_lessons_settings():
    params = load_params(ROOT / "params.yaml")
    post_warmup = params.spec("placement", "post_warmup")
    assert post_warmup.model.placement == "post" and post_warmup.model.n_layers == 6
    assert post_warmup.train.lr == 1e-2 and post_warmup.train.steps == 250 and post_warmup.train.warmup == 100
    assert post_warmup.seeds[:2] == (0, 1)
    without = params.spec("residual", "without")
    assert without.model.residual == "none" and without.model.placement == "pre"
    assert without.train.lr == 3e-3 and without.train.steps == 200 and without.seeds == (0,)


def test_a_number_that_dvc_wrote_as_a_string_is_read_as_the_number():
    # `dvc exp run -S ...lr=1e-05` writes 1e-05, which YAML 1.1 readers load as the string '1e-05'.
    params = parse_params(minimal(train={"lr": "1e-05", "steps": "30"}))
    spec = params.spec("a", "v")
    assert spec.train.lr == 1e-05 and spec.train.steps == 30


def test_a_variant_overrides_the_ablation_which_overrides_the_defaults():
    raw = minimal(model={"n_layers": 3}, train={"lr": 0.5})
    raw["ablations"]["a"]["variants"]["v"] = {"model": {"n_layers": 2}}
    spec = parse_params(raw).spec("a", "v")
    assert spec.model.n_layers == 2 and spec.train.lr == 0.5 and spec.model.d_model == 64


def test_a_misspelt_key_names_the_key_and_suggests_the_right_one():
    raw = minimal()
    raw["ablations"]["a"]["variants"]["v"] = {"model": {"placment": "post"}}
    with pytest.raises(ParamsError, match=r"unknown key 'ablations.a.variants.v.model.placment'.*did you mean 'placement'\?"):
        parse_params(raw)


def test_a_bad_value_names_the_key_the_value_and_what_is_allowed():
    with pytest.raises(ParamsError, match=r"'ablations.a.model.placement' = 'side': Input should be 'pre', 'post', 'peri', 'reordered' or 'mix'"):
        parse_params(minimal(model={"placement": "side"}))


def test_an_unknown_variant_is_named_with_a_suggestion():
    with pytest.raises(ParamsError, match=r"unknown variant of ablation 'a' 'w'.*known: v"):
        parse_params(minimal()).spec("a", "w")


# Numbers a description may hold: years and the names of papers and models, which no parameter holds.
NAMED_NUMBERS = re.compile(r"\b(1[89]|20)\d\d\b|\b(Llama|OLMo|Qwen|exercise|fig\.) \d+\b")


def test_no_description_states_a_value_that_a_parameter_holds():
    """The figures' titles and the summary write the settings from the resolved runs: a description that said
    "lr 1e-2" kept saying it after `dvc exp run -S ...lr=0.003`. So a description says what the comparison is,
    never a number (a year or a model's name apart)."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    plans = {f"{group}.{name}": plan for group in ("ablations", "maps") for name, plan in raw[group].items()}
    stating = {where: text for where, plan in plans.items()
               if re.search(r"\d", NAMED_NUMBERS.sub("", text := plan.get("description", "")))}
    assert not stating, stating
    assert re.search(r"\d", NAMED_NUMBERS.sub("", "at 6 layers, as in 2017")), "the test sees a stated value"


def test_no_label_states_a_value_that_a_parameter_holds():
    """A legend said "post-norm + 100-step warmup" after the warmup had moved: a label writes a number its run
    trains with as a setting (`{warmup}-step warmup`), filled from the run's resolved settings."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    labels = {f"{group}.{name}.labels.{variant}": label for group in ("ablations", "maps")
              for name, plan in raw[group].items() for variant, label in plan.get("labels", {}).items()}
    stating = {where: label for where, label in labels.items()
               if re.search(r"\d", NAMED_NUMBERS.sub("", re.sub(r"\{[^{}]*\}", "", label)))}
    assert not stating, stating
    assert re.search(r"\d", NAMED_NUMBERS.sub("", re.sub(r"\{[^{}]*\}", "", "{warmup}-step, 6 layers")))


def test_a_label_is_written_from_the_settings_its_run_trains_with():
    raw = minimal(model={"n_layers": 1}, train={"warmup": 100, "steps": 200},
                  labels={"v": "{n_layers:layer}, {warmup}-step warmup, {n_heads:head} of {head_size}"})
    assert parse_params(raw).spec("a", "v").label == "1 layer, 100-step warmup, 4 heads of 16"
    raw["ablations"]["a"]["model"]["n_layers"] = 6
    raw["ablations"]["a"]["train"].update(warmup=150, z_loss=1e-4, lr=0.003)
    raw["ablations"]["a"]["labels"]["v"] += " {z_loss} {lr}"
    assert parse_params(raw).spec("a", "v").label == "6 layers, 150-step warmup, 4 heads of 16 1e-4 3e-3"


def test_a_label_naming_an_unknown_setting_says_which_are_known():
    with pytest.raises(ParamsError, match=r"unknown setting in ablations.a.labels.v 'n_layer'.*n_layers"):
        parse_params(minimal(labels={"v": "{n_layer:layer}"})).spec("a", "v")


def test_a_maps_label_may_not_write_an_axis_its_cells_differ_in():
    raw = minimal()
    raw["maps"] = {"m": {"seeds": [0], "model": {}, "train": {}, "variants": {"v": {}},
                         "axes": {"train": {"lr": [0.001, 0.01]}}, "labels": {"v": "at {lr}"}}}
    with pytest.raises(ParamsError, match=r"label of variant 'v' writes lr, an axis of the map"):
        parse_params(raw)
