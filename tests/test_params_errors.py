"""Every mistake a person makes in params.yaml is reported once, in words: key, value, what is allowed."""

import subprocess
import sys

import pytest
import yaml

from blocklab.params.problems import ParamsError

from blocklab.params.schema import load_params

from conftest import ROOT

REPO_PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def set_key(params: dict, dotted: str, value) -> dict:
    *parents, last = dotted.split(".")
    node = params
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return params


def with_change(dotted: str, value) -> dict:
    return set_key(yaml.safe_load(yaml.safe_dump(REPO_PARAMS)), dotted, value)


MISTAKES = {
    "a post-norm gradient probe": (
        "gradients.placements", ["pre", "post"],
        r"'gradients.placements' = \['pre', 'post'\]: .*the gradient probe measures pre-norm stacks only.*use placements: \[pre\]"),
    "heads not dividing the width": (
        "defaults.model.n_heads", 5, r"n_heads=5 must divide d_model=64"),
    "zero steps": (
        "ablations.placement.train.steps", 0, r"'ablations.placement.train.steps' = 0: Input should be greater than 0"),
    "negative learning rate": (
        "ablations.placement.train.lr", -0.01, r"'ablations.placement.train.lr' = -0.01: Input should be greater than 0"),
    "zero batch size": (
        "defaults.train.batch_size", 0, r"'defaults.train.batch_size' = 0: Input should be greater than 0"),
    "zero context": ("defaults.model.context", 0, r"'defaults.model.context' = 0: Input should be greater than 0"),
    "negative width": (
        "ablations.residual.model.d_model", -64, r"'ablations.residual.model.d_model' = -64: Input should be greater than 0"),
    "zero layers": (
        "ablations.depth.variants.l1.model.n_layers", 0,
        r"'ablations.depth.variants.l1.model.n_layers' = 0: Input should be greater than 0"),
    "zero feed-forward multiplier": (
        "ablations.ffn_mult.variants.x1.model.ffn_mult", 0,
        r"'ablations.ffn_mult.variants.x1.model.ffn_mult' = 0: Input should be greater than 0"),
    "unknown placement": (
        "ablations.placement.variants.post.model.placement", "middle",
        r"'ablations.placement.variants.post.model.placement' = 'middle': Input should be 'pre', 'post', 'peri', "
        r"'reordered' or 'mix'"),
    "a setting in its former spelling beside its new one": (
        "ablations.placement.variants.post.model.norm", "pre",
        r"unknown key 'ablations.placement.variants.post.model.norm' .*; it is the former spelling of 'placement', "
        r"which is set here too: keep one"),
    "unknown activation": (
        "ablations.activation.variants.relu.model.activation", "tanh",
        r"'ablations.activation.variants.relu.model.activation' = 'tanh': Input should be 'gelu', 'relu' or 'silu'"),
    "unknown residual scheme": (
        "ablations.residual.variants.with.model.residual", "maybe",
        r"'ablations.residual.variants.with.model.residual' = 'maybe': Input should be 'plain', 'none', "
        r"'rezero' or 'deepnorm'$"),
    "unknown norm type": (
        "ablations.norm_type.variants.rmsnorm.model.norm_type", "batchnorm",
        r"'ablations.norm_type.variants.rmsnorm.model.norm_type' = 'batchnorm': Input should be 'layernorm', "
        r"'rmsnorm', 'dyt' or 'none'"),
    "deepnorm with pre-norm": (
        "ablations.residual_scheme.variants.deepnorm.model.placement", "pre",
        r"residual: deepnorm is a post-norm scheme"),
    "a warmup longer than the run": (
        "ablations.warmup.variants.w200.train.warmup", 300,
        r"ablations.warmup.variants.w200: a warmup of 300 steps is longer than the run's 250 steps"),
    "negative warmup": (
        "ablations.warmup.variants.w25.train.warmup", -25,
        r"'ablations.warmup.variants.w25.train.warmup' = -25: Input should be greater than or equal to 0"),
    "empty seed list": (
        "ablations.placement.seeds", [], r"'ablations.placement.seeds' = \[\]: List should have at least 1 item"),
    "variant override naming a key that does not exist": (
        "ablations.placement.variants.post.model.placment", "post",
        r"unknown key 'ablations.placement.variants.post.model.placment' .*did you mean 'placement'\?"),
    "validation fraction of 1": (
        "data.val_fraction", 1.0, r"'data.val_fraction' = 1.0: Input should be less than 1"),
    "validation fraction of 0": (
        "data.val_fraction", 0, r"'data.val_fraction' = 0: Input should be greater than 0"),
    "unknown ablation field": (
        "ablations.placement.lerning_rate", 0.1,
        r"unknown key 'ablations.placement.lerning_rate' \(allowed here: .*\)"),
    "a seed twice": (
        "ablations.placement.seeds", [0, 0],
        r"'ablations.placement.seeds' = \[0, 0\]: each seed once: 0 repeated"),
    "YAML's infinity as a learning rate": (
        "ablations.placement.train.lr", float("inf"), r"'ablations.placement.train.lr' = inf: Input should be a finite number"),
    "a label for no variant": (
        "ablations.placement.labels.prex", "pre-norm, mistyped",
        r"'ablations.placement': unknown variant in labels 'prex' .*did you mean 'pre'\?"),
    "misspelt training key": (
        "ablations.placement.train.warmpu", 10, r"unknown key 'ablations.placement.train.warmpu'.*did you mean 'warmup'\?"),
}


@pytest.mark.parametrize("dotted, value, message", MISTAKES.values(), ids=MISTAKES.keys())
def test_a_bad_parameter_is_named_with_its_value_and_what_is_allowed(tmp_path, dotted, value, message):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(with_change(dotted, value)))
    with pytest.raises(ParamsError, match=message):
        load_params(path)


def test_a_stage_with_a_bad_parameter_fails_before_writing_anything(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(with_change("ablations.placement.train.steps", -5)))
    out = tmp_path / "runs"
    result = subprocess.run(
        [sys.executable, str(ROOT / "stages" / "train.py"), "--ablation", "placement", "--variant", "post",
         "--params", str(params), str(tmp_path), str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert "Error: params.yaml has 1 problem" in result.stderr
    assert "'ablations.placement.train.steps' = -5" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("where", ["ablation", "variant"])
def test_a_name_that_is_not_a_plain_identifier_is_refused_naming_its_key(tmp_path, where):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    if where == "ablation":
        raw["ablations"]["my ablation"] = raw["ablations"].pop("placement")
        key = "'ablations'"
    else:
        variants = raw["ablations"]["placement"]["variants"]
        variants["pre norm"] = variants.pop("pre")
        raw["ablations"]["placement"]["labels"].pop("pre")
        key = "'ablations.placement.variants'"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError) as error:
        load_params(path)
    name = "my ablation" if where == "ablation" else "pre norm"
    assert f"{key}: '{name}': a name must be a plain identifier" in str(error.value)
    assert "it names DVC stages and folders" in str(error.value)
