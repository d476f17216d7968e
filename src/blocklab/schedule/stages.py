"""The plan's DVC stages that train (dvc.yaml): one per variant of each ablation, `train_<ablation>@<variant>`, and
of each map, `map_<map>@<variant>`. Their names are built and read here, and nowhere else; so are the folders
they read and write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ENCODED = Path("data/encoded")  # the encoded corpus, the train stages' input (the encode stage's output)
RUNS_DIR = Path("data/runs")  # every train and map stage's outputs, weights included: data/runs/<ablation>/<variant>/...
RECORDS_DIR = Path("reports/runs")  # each run's record, committed (a train stage's --records): what analysis reads
STORE_DIR = Path("data/run_store")  # blocklab.schedule.run_store: runs kept by key, outside DVC's outputs
PREFIXES = {False: "train_", True: "map_"}  # by whether the stage trains a map's cells


def stage_name(ablation: str, variant: str | None = None, is_map: bool = False) -> str:
    """The stage that trains `variant` of `ablation` (a map's, with `is_map`); without a variant, the stage group
    that `dvc repro <group>` runs whole (every variant's)."""
    group = f"{PREFIXES[is_map]}{ablation}"
    return group if variant is None else f"{group}@{variant}"


@dataclass(frozen=True)
class TrainStage:
    """A train or map stage of dvc.yaml: its DVC name and the ablation (or map) and variant it trains."""

    name: str
    ablation: str
    variant: str


def train_stage(name: str) -> TrainStage | None:
    """`train_norm_order@post` -> (norm_order, post); None for a stage that trains nothing."""
    prefix = next((p for p in PREFIXES.values() if name.startswith(p)), None)
    if prefix is None or "@" not in name:
        return None
    ablation, variant = name[len(prefix):].split("@", 1)
    return TrainStage(name, ablation, variant)
