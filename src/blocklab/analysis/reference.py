"""The published figures (reference.yaml): what the lesson measured, and on which corpus.

Each table names the sha256 of the corpus its figures were measured on, or none for an untrained probe.
A figure is shown beside ours, and a claim compares with it, only on that corpus: elsewhere it is not
comparable."""

from __future__ import annotations

from pathlib import Path

import yaml

from blocklab.errors import BlocklabError

REFERENCE_FILE = "reference.yaml"


def load_reference(path: str | Path = REFERENCE_FILE) -> dict:
    """`{table: {"corpus": sha256 | None, "figures": {key: value}}}`; a malformed table is an error."""
    path = Path(path)
    reference = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    for name, table in reference.items():
        if not isinstance(table, dict) or "corpus" not in table or not isinstance(table.get("figures"), dict):
            raise BlocklabError(f"{path}: table '{name}' needs `corpus:` (the sha256 of the corpus it was published "
                                f"on, or null for an untrained probe) and `figures:` (key: value)")
    return reference


def comparable(reference: dict, table: str, corpus: str | None) -> bool:
    """Whether `table`'s figures apply to a run on `corpus` (its sha256)."""
    published_on = reference.get(table, {}).get("corpus")
    return published_on is None or published_on == corpus


def published(reference: dict, table: str, key: str, corpus: str | None) -> float | None:
    """The published figure `key` of `table` for a run on `corpus`: None if there is none, or it was
    published on another corpus."""
    if table not in reference or not comparable(reference, table, corpus):
        return None
    return reference[table]["figures"].get(key)


def published_loss(reference: dict, run_key: str, corpus: str | None) -> float | None:
    """The lesson's train_loss_last25 for a run key such as `placement/post/seed0` (table A), if
    published on `corpus`."""
    return published(reference, "table_a", run_key, corpus)
