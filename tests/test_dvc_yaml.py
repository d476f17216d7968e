"""dvc.yaml keeps up with params.yaml by itself: every ablation and every map trains in a stage written once for all
of them (`foreach`), and is drawn by a plot written once for all of them (a folder of long tables). Adding an
ablation or a variant is params.yaml (and claims.yaml for its findings), nothing in dvc.yaml."""

import yaml

from conftest import ROOT

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
PIPELINE = yaml.safe_load((ROOT / "dvc.yaml").read_text())


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


def test_every_plot_is_written_once_for_all_ablations_and_maps_and_names_no_variant():
    """An ablation's loss curves and a map's lines against the learning rate are each one entry over a folder of
    long tables, drawn by a template of .dvc/plots a line per variant: nothing to paste when params.yaml grows."""
    plots = PIPELINE["plots"]
    folders = {name: plot for entry in plots if isinstance(entry, dict) for name, plot in entry.items()}
    assert set(folders) == {"reports/curves", "reports/maps/lr"}
    for plot in folders.values():
        assert (ROOT / ".dvc" / "plots" / f"{plot['template']}.json").is_file()
    text = (ROOT / "dvc.yaml").read_text()
    variants = {v for section in ("ablations", "maps") for plan in PARAMS.get(section, {}).values()
                for v in plan["variants"]}
    listed = {v for v in variants if f"[{v}," in text or f" {v}," in text or f", {v}]" in text}
    assert not listed, f"dvc.yaml names variants: {sorted(listed)}"


def test_every_ablation_and_map_has_its_plot_table_with_every_variant():
    import pandas as pd

    for ablation, plan in PARAMS["ablations"].items():
        table = pd.read_csv(ROOT / "reports" / "curves" / f"{ablation}.csv")
        assert list(dict.fromkeys(table["variant"])) == list(plan["variants"]), ablation
    for name, plan in PARAMS.get("maps", {}).items():
        if "lr" in plan["axes"].get("train", {}):
            table = pd.read_csv(ROOT / "reports" / "maps" / "lr" / f"{name}.csv")
            assert set(table["variant"]) <= set(plan["variants"]) and table["val_loss_mean"].notna().all(), name
