"""dvc.yaml keeps up with params.yaml: every ablation has its train block and its loss plot, listing
every variant. Adding an ablation or a variant is params.yaml (and claims.yaml for its findings); where
dvc.yaml then lacks something, this test says exactly what to paste."""

import pytest
import yaml

from conftest import ROOT

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
PIPELINE = yaml.safe_load((ROOT / "dvc.yaml").read_text())


def stage_block(name: str, section: str = "ablations") -> str:
    """The dvc.yaml block of an ablation's train stages, or (`section="maps"`) of a map's stages."""
    stage, extra = ("map", f"        - maps.{name}.axes\n") if section == "maps" else ("train", "")
    return f"""  {stage}_{name}:
    foreach: ${{{section}.{name}.variants}}
    do:
      cmd: python stages/train.py --ablation {name} --variant ${{key}} --checkpoints data/checkpoints/{name}/${{key}} --records reports/runs/{name}/${{key}} data/encoded data/runs/{name}/${{key}}
      deps: *train_deps
      params:
        - defaults
        - {section}.{name}.seeds
        - {section}.{name}.model
        - {section}.{name}.train
{extra}        - {section}.{name}.variants.${{key}}
      outs:
        - data/runs/{name}/${{key}}
        - reports/runs/{name}/${{key}}:
            cache: false
"""


def train_block(ablation: str) -> str:
    return stage_block(ablation)


def map_block(name: str) -> str:
    return stage_block(name, "maps")


def map_plot(name: str) -> str:
    return f"""  - {name}_lr:
      title: "{name}: final validation loss against learning rate (seed mean per cell)"
      template: linear
      x: log10_lr
      y:
        reports/maps/{name}_lr.csv: [{", ".join(_map_lines(name))}]
      x_label: log10 learning rate
      y_label: validation loss (nats per character)
"""


def _map_lines(name: str) -> list[str]:
    from blocklab.params.schema import load_params
    from blocklab.analysis.maps import lr_plot_columns

    return lr_plot_columns(load_params(ROOT / "params.yaml"), name)


def loss_plot(ablation: str, variants: list[str]) -> str:
    return f"""  - {ablation}_loss:
      title: "{ablation}: training loss (seed mean, 10-step mean)"
      x: step
      y:
        reports/curves/{ablation}_loss.csv: [{", ".join(variants)}]
      x_label: training step
      y_label: loss (nats per character)
"""


def _plots() -> dict:
    return {name: plot for entry in PIPELINE["plots"] if isinstance(entry, dict) for name, plot in entry.items()}


@pytest.mark.parametrize("ablation", list(PARAMS["ablations"]))
def test_every_ablation_has_its_train_block_in_dvc_yaml(ablation):
    expected = yaml.safe_load(train_block(ablation).replace("*train_deps", "[]"))[f"train_{ablation}"]
    found = PIPELINE["stages"].get(f"train_{ablation}")
    message = f"dvc.yaml: add (or correct) this block under `stages:`\n\n{train_block(ablation)}"
    assert found is not None, message
    assert {k: v for k, v in found["do"].items() if k != "deps"} == {
        k: v for k, v in expected["do"].items() if k != "deps"}, message
    assert found["foreach"] == expected["foreach"], message
    assert found["do"]["deps"] == PIPELINE["stages"]["train_norm_order"]["do"]["deps"], message


@pytest.mark.parametrize("ablation", list(PARAMS["ablations"]))
def test_every_ablation_has_a_loss_plot_listing_every_variant(ablation):
    variants = list(PARAMS["ablations"][ablation]["variants"])
    plot = _plots().get(f"{ablation}_loss")
    message = f"dvc.yaml: add (or correct) this entry under `plots:`\n\n{loss_plot(ablation, variants)}"
    assert plot is not None, message
    assert plot == yaml.safe_load(loss_plot(ablation, variants))[0][f"{ablation}_loss"], message


@pytest.mark.parametrize("name", list(PARAMS.get("maps", {})))
def test_every_map_has_its_stage_and_its_lr_plot_in_dvc_yaml(name):
    expected = yaml.safe_load(map_block(name).replace("*train_deps", "[]"))[f"map_{name}"]
    found = PIPELINE["stages"].get(f"map_{name}")
    message = f"dvc.yaml: add (or correct) this block under `stages:`\n\n{map_block(name)}"
    assert found is not None, message
    assert {k: v for k, v in found["do"].items() if k != "deps"} == {
        k: v for k, v in expected["do"].items() if k != "deps"}, message
    assert found["foreach"] == expected["foreach"], message
    assert found["do"]["deps"] == PIPELINE["stages"]["train_norm_order"]["do"]["deps"], message
    plot = _plots().get(f"{name}_lr")
    message = f"dvc.yaml: add (or correct) this entry under `plots:`\n\n{map_plot(name)}"
    assert plot == yaml.safe_load(map_plot(name))[0][f"{name}_lr"], message


def test_no_train_block_or_plot_is_left_for_an_ablation_params_yaml_no_longer_has():
    trained = {name.removeprefix("train_") for name in PIPELINE["stages"] if name.startswith("train_")}
    plotted = {name.removesuffix("_loss") for name in _plots() if name.endswith("_loss")}
    assert trained == plotted == set(PARAMS["ablations"])
    mapped = {name.removeprefix("map_") for name in PIPELINE["stages"] if name.startswith("map_")}
    assert mapped == {name.removesuffix("_lr") for name in _plots() if name.endswith("_lr")} == set(
        PARAMS.get("maps", {}))


def test_the_check_names_the_missing_block_and_prints_the_yaml_to_add(monkeypatch):
    monkeypatch.setitem(PARAMS["ablations"], "my_ablation", {"variants": {"a": {}, "b": {}}})
    with pytest.raises(AssertionError) as missing:
        test_every_ablation_has_its_train_block_in_dvc_yaml("my_ablation")
    assert "train_my_ablation:" in str(missing.value)
    assert "foreach: ${ablations.my_ablation.variants}" in str(missing.value)
    with pytest.raises(AssertionError) as unplotted:
        test_every_ablation_has_a_loss_plot_listing_every_variant("my_ablation")
    assert "reports/curves/my_ablation_loss.csv: [a, b]" in str(unplotted.value)
