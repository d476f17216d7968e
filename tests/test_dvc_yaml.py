"""dvc.yaml keeps up with params.yaml: every ablation and every map trains in a stage written once for all of them
(`foreach`), and has its plot, listing every variant. Adding an ablation or a variant is params.yaml (and
claims.yaml for its findings); where dvc.yaml then lacks a plot, this test says exactly what to paste."""

import pytest
import yaml

from conftest import ROOT

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
PIPELINE = yaml.safe_load((ROOT / "dvc.yaml").read_text())


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
    from blocklab.analysis.maps import lr_plot_columns
    from blocklab.analysis.run_table import read_run_table

    return lr_plot_columns(read_run_table(ROOT / "params.yaml"), name)


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


def test_every_ablation_and_map_trains_in_one_stage_written_once_depending_on_what_its_keys_hash():
    """One definition per kind, `foreach` over params.yaml's own sections: an ablation or a map added there has
    its stage, with nothing pasted."""
    stages = PIPELINE["stages"]
    for group, section in (("train", "ablations"), ("map", "maps")):
        stage = stages[group]
        assert stage["foreach"] == f"${{{section}}}"
        assert stage["do"]["deps"] == ["src/blocklab/run", "data/encoded"]
        assert set(stage["do"]["params"]) >= {"defaults", f"{section}.${{key}}.train", f"{section}.${{key}}.variants"}
        assert "labels" not in " ".join(stage["do"]["params"])  # renaming a variant's label retrains nothing
    assert not [name for name in stages if name.startswith(("train_", "map_"))]


@pytest.mark.parametrize("ablation", list(PARAMS["ablations"]))
def test_every_ablation_has_a_loss_plot_listing_every_variant(ablation):
    variants = list(PARAMS["ablations"][ablation]["variants"])
    plot = _plots().get(f"{ablation}_loss")
    message = f"dvc.yaml: add (or correct) this entry under `plots:`\n\n{loss_plot(ablation, variants)}"
    assert plot is not None, message
    assert plot == yaml.safe_load(loss_plot(ablation, variants))[0][f"{ablation}_loss"], message


@pytest.mark.parametrize("name", list(PARAMS.get("maps", {})))
def test_every_map_has_its_lr_plot_in_dvc_yaml(name):
    plot = _plots().get(f"{name}_lr")
    message = f"dvc.yaml: add (or correct) this entry under `plots:`\n\n{map_plot(name)}"
    assert plot == yaml.safe_load(map_plot(name))[0][f"{name}_lr"], message


def test_no_plot_is_left_for_an_ablation_or_map_params_yaml_no_longer_has():
    plotted = {name.removesuffix("_loss") for name in _plots() if name.endswith("_loss")}
    assert plotted == set(PARAMS["ablations"])
    assert {name.removesuffix("_lr") for name in _plots() if name.endswith("_lr")} == set(PARAMS.get("maps", {}))


def test_the_check_prints_the_plot_to_add(monkeypatch):
    monkeypatch.setitem(PARAMS["ablations"], "my_ablation", {"variants": {"a": {}, "b": {}}})
    with pytest.raises(AssertionError) as unplotted:
        test_every_ablation_has_a_loss_plot_listing_every_variant("my_ablation")
    assert "reports/curves/my_ablation_loss.csv: [a, b]" in str(unplotted.value)
