"""The plan's DVC stages that train (dvc.yaml): one per ablation, `train@<ablation>`, and one per map,
`map@<map>`, each training every variant's runs (every seed; a map's, every cell). dvc.yaml writes each kind once
(`foreach` over params.yaml's `ablations` and `maps`), so that an ablation or a map added to params.yaml has its
stage. Their names are built and read here, and nowhere else; so are the folders they read and write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from blocklab.errors import BlocklabError

ENCODED = Path("data/encoded")  # the encoded corpus, the train stages' input (the encode stage's output)
RUNS_DIR = Path("data/runs")  # every train and map stage's outputs, weights included: data/runs/<ablation>/<variant>/...
RECORDS_DIR = Path("reports/runs")  # each run's record, committed (a train stage's --records): what analysis reads
STORE_DIR = Path("data/run_store")  # blocklab.schedule.run_store: runs kept by key, outside DVC's outputs
GROUPS = {False: "train", True: "map"}  # by whether the stage trains a map's cells


def require_encoded(encoded: str | Path, why: str) -> None:
    """An error saying what to run when the encoded corpus a command needs is missing (only then: a command
    whose options need no corpus runs without one)."""
    if not Path(encoded).is_dir():
        raise BlocklabError(f"{encoded} does not exist: {why}; run `dvc repro encode` first")


def stage_name(ablation: str, is_map: bool = False) -> str:
    """The stage that trains every run of `ablation` (a map's, with `is_map`)."""
    return f"{GROUPS[is_map]}@{ablation}"


@dataclass(frozen=True)
class TrainStage:
    """A train or map stage of dvc.yaml: its DVC name and the ablation (or map) it trains."""

    name: str
    ablation: str


def train_stage(name: str) -> TrainStage | None:
    """`train@placement` -> placement; None for a stage that trains nothing."""
    group, _, ablation = name.partition("@")
    return TrainStage(name, ablation) if group in GROUPS.values() and ablation else None
