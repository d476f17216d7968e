"""The figures an ablation or a map may ask for in params.yaml (`figures:`), beside the ones every ablation gets
(loss curves, gradient norms, final losses). blocklab.analysis.plots and map_plots draw them."""

from __future__ import annotations

from typing import Literal

# An ablation's extra figures; findings - every finding that compares two of its variants paired by seed, a row on
# one axis with its interval, and each of its other findings a panel below, its own quantity with its interval or
# its values against their bound (blocklab.analysis.finding_plots.differences_figure).
FigureKind = Literal["depth", "train_val", "param_shares", "ladder", "difference", "findings"]

# A map's figures: heatmap - final loss per cell, a panel per variant; lr - final loss against the learning rate, a
# panel per group of cells, a line per variant; lr_by_variant - the same, a panel per variant, a line per group
# (e.g. per width); sensitivity - LR sensitivity per group, a line per variant; attention_logits - the largest
# attention logit against the learning rate, a panel per variant, a line per group; depth - final loss against the
# number of blocks, a panel per learning rate, a line per variant; layers - the residual stream's RMS after each
# block, a panel per cell, a line per variant; stream_over_training - the slope of ln RMS over the blocks at each
# evaluation step, a panel per cell, a line per variant; findings - each finding that reads the map's cells, its own quantity
# with its interval, or its values against their bound (blocklab.analysis.finding_plots); trend - each trend finding
# over the map's sizes, a panel per comparison: its paired effect at each size, with its interval, against the
# training compute on a log axis, and the fitted slope (blocklab.analysis.trend_plots).
MapFigureKind = Literal["heatmap", "lr", "lr_by_variant", "sensitivity", "attention_logits", "depth", "layers",
                        "stream_over_training", "findings", "trend"]
