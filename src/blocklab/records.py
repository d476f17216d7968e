"""Reading back the files a run leaves (blocklab.run.results writes them): a run's folder under data/runs/, or its
record under reports/runs/, in the same layout (<ablation>/<variant>[/<cell>]/seed<k>/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def run_dir(variant_dir: Path, seed: int) -> Path:
    return Path(variant_dir) / f"seed{seed}"


def read_metrics(directory: Path) -> dict:
    return json.loads((Path(directory) / "metrics.json").read_text())


def read_timing(directory: Path) -> dict:
    return json.loads((Path(directory) / "timing.json").read_text())


def read_curve(directory: Path) -> "pd.DataFrame":
    import pandas as pd

    return pd.read_csv(Path(directory) / "curve.csv")


def read_layers(directory: Path) -> "pd.DataFrame":
    """layers.csv: per evaluation step and block, the residual stream's diagnostics."""
    import pandas as pd

    return pd.read_csv(Path(directory) / "layers.csv")
