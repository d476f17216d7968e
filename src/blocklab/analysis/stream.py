"""What the 2025 papers on the norm's placement read of a trained model's residual stream, derived in stage
`evaluate` from each run's record (metrics.json's per-block lists at the last evaluation, layers.csv at every one):

- `resid_rms_last`, `resid_max_abs_last`: the stream's root mean square and its largest |h| after the last block,
  absolute (Kim et al. 2025: pre-norm's stream grows large, Peri-LN's stays bounded). Not a ratio to the first
  block's, which divides out the growth of a stream that is large from its first block on.
- `log_rms_slope`: the least-squares slope of ln RMS over the blocks, per block (Sun et al. 2025: under pre-norm
  the stream's variance grows with depth, so its deep blocks' outputs shrink against it).
- `skip_delta_deep`: the mean change of the validation loss when one block of the deeper half is skipped (its
  output its input), from metrics.json's `skip_loss_delta` (Sun et al. 2025's fig. 1: near 0, those blocks do
  little). Only for runs trained with `layer_skip`.
- `log_rms_slope_by_step`: `log_rms_slope` at every evaluation step, from layers.csv ([step, slope] pairs in the
  order of the steps; JSON would sort a mapping's keys as text): the stream's
  growth over depth as it develops while the run trains (both papers read it at several steps, not only the last).
"""

from __future__ import annotations

import math

import pandas as pd
from scipy.stats import linregress


def log_rms_slope(rms: list[float | None]) -> float | None:
    """The slope of ln RMS against the block's index (1, 2, ...): 0 for a stream of one size throughout, ln 2
    for one that doubles each block. None for fewer than two blocks or a value missing or not positive."""
    if len(rms) < 2 or any(v is None or not v > 0 or not math.isfinite(v) for v in rms):
        return None
    return float(linregress(range(1, len(rms) + 1), [math.log(v) for v in rms]).slope)


def deep_half_mean(values: list[float | None]) -> float | None:
    """The mean over the deeper half of the blocks (the last n // 2 of n; of one block, that block)."""
    deep = values[len(values) // 2:] if len(values) > 1 else values
    return sum(deep) / len(deep) if deep and None not in deep else None


def stream_metrics(metrics: dict, layers: pd.DataFrame | None = None) -> dict:
    """The stream's measures of one run from its metrics.json and its layers.csv (a run without blocks: None
    each; without a layers.csv, no `log_rms_slope_by_step`)."""
    rms, max_abs = metrics.get("resid_rms") or [], metrics.get("resid_max_abs") or []
    derived = {"resid_rms_last": rms[-1] if rms else None, "resid_max_abs_last": max_abs[-1] if max_abs else None,
               "log_rms_slope": log_rms_slope(rms)}
    if "skip_loss_delta" in metrics:
        derived["skip_delta_deep"] = deep_half_mean(metrics["skip_loss_delta"])
    if layers is not None and len(layers):
        derived["log_rms_slope_by_step"] = [[int(step), None if slope is None or slope != slope else slope]
                                            for step, slope in slopes_over_training(layers).items()]
    return derived


def slopes_over_training(layers: pd.DataFrame) -> pd.Series:
    """`log_rms_slope` at each evaluation step of one run's layers.csv (step -> slope): how the stream's growth
    over depth develops while it trains."""
    return layers.sort_values(["step", "layer"]).groupby("step")["resid_rms"].apply(
        lambda rms: log_rms_slope([None if pd.isna(v) else float(v) for v in rms]))
