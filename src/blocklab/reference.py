"""The published figures (reference.yaml): what the lesson measured, for reports and checks."""

from __future__ import annotations

from pathlib import Path

import yaml

REFERENCE_FILE = "reference.yaml"


def load_reference(path: str | Path = REFERENCE_FILE) -> dict:
    path = Path(path)
    return yaml.safe_load(path.read_text()) if path.exists() else {}


def published_loss(reference: dict, run_key: str) -> float | None:
    """The lesson's train_loss_last25 for a run key such as `norm_order/post/seed0`, if published."""
    return reference.get("table_a", {}).get(run_key)
