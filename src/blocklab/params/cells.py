"""How a map's grid point (a cell) is named: `lr0.01_w0` is lr 0.01 and warmup 0, `d128` d_model 128; any other
setting by its own name. The name is a folder and a label; a run's key never holds it."""

from __future__ import annotations

AXIS_ABBREVIATIONS = {"lr": "lr", "warmup": "w", "d_model": "d", "n_layers": "l"}


def spelled(value) -> str:
    """An axis value as a cell's name writes it: 0.01, 1e-05, 100, true."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def cell_name(axes: list[tuple[str, object]]) -> str:
    """The cell whose axes take these (setting, value) pairs, in the map's axis order."""
    return "_".join(f"{AXIS_ABBREVIATIONS.get(field, field)}{spelled(value)}" for field, value in axes)
