"""Figures that make each finding obvious (matplotlib, PNG), drawn from the runs' curves and metrics."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from blocklab.config import Ablation, Params, load_params  # noqa: E402
from blocklab.intervals import half_width  # noqa: E402
from blocklab.maps import cell_table  # noqa: E402
from blocklab.maps import runs_frame as map_runs_frame  # noqa: E402
from blocklab.reference import published  # noqa: E402
from blocklab.report import BLOWN_UP_MARGIN, curves_frame, plot_table, runs_frame  # noqa: E402

SMOOTHING = 10  # steps in the rolling mean drawn over noisy per-step curves
LOSS_LABEL = "loss (nats per character)"
TITLE_WIDTH = 90  # characters a title line holds in an 8-inch figure


def _baselines(ax, baselines: dict) -> None:
    ax.axhline(baselines["unigram"], color="0.35", ls="--", lw=1,
               label=f"unigram baseline (character frequencies), {baselines['unigram']:.3f}")
    ax.axhline(baselines["uniform"], color="0.6", ls=":", lw=1,
               label=f"uniform guess, ln V = {baselines['uniform']:.3f}")


def _save(fig, path: Path, dpi: int = 110) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


LINE_STYLES = ["-", "--", "-.", ":"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def _styles(count: int) -> list[dict]:
    """A style per line: colours alone for a few, and beyond four a line style and a marker each too, so that
    lines that run close together can still be told apart."""
    if count <= 4:
        return [{"color": f"C{i}"} for i in range(count)]
    return [{"color": f"C{i % 10}", "ls": LINE_STYLES[i % len(LINE_STYLES)], "marker": MARKERS[i % len(MARKERS)],
             "ms": 6, "offset": i} for i in range(count)]


def _heading(name: str, what: str, description: str | None) -> str:
    """A figure's title: what it shows, then the ablation's description in at most two more lines."""
    if not description:
        return f"{name}: {what}"
    return f"{name}: {what}\n" + textwrap.fill(textwrap.shorten(description, 2 * TITLE_WIDTH, placeholder=" …"),
                                                TITLE_WIDTH)


def _band(ax, curves: pd.DataFrame, column: str, label: str, smooth: bool = True, **style) -> None:
    """Seed mean as a line and the seeds' spread (min to max) as a band."""
    wide = curves.pivot_table(index="step", columns="seed", values=column)
    if smooth:
        wide = wide.rolling(SMOOTHING, min_periods=1).mean()
    if "marker" in style:  # eight markers a line, each line's at other steps, so that they do not hide each other
        every = max(1, len(wide) // 8)
        style = {**style, "markevery": (style.get("offset", 0) * every // 8 % every, every)}
    style.pop("offset", None)
    line, = ax.plot(wide.index, wide.mean(axis=1), label=label, lw=1.3, **style)
    if wide.shape[1] > 1:
        ax.fill_between(wide.index, wide.min(axis=1), wide.max(axis=1), color=line.get_color(), alpha=0.2, lw=0)


def loss_curves(curves: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    labels = list(dict.fromkeys(curves["label"]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for (label, group), style in zip(curves.groupby("label", sort=False), _styles(len(labels))):
        _band(ax, group, "loss", label, **style)
    _baselines(ax, baselines)
    ax.set_title(title, fontsize=10)
    ax.set(xlabel="training step", ylabel=f"training {LOSS_LABEL}")
    ax.legend(fontsize=8, title=f"seed mean, {SMOOTHING}-step smoothing; band = seed range", title_fontsize=8)
    return _save(fig, path)


def grad_norm_curves(curves: pd.DataFrame, title: str, path: Path) -> Path:
    labels = list(dict.fromkeys(curves["label"]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for (label, group), style in zip(curves.groupby("label", sort=False), _styles(len(labels))):
        _band(ax, group, "grad_norm", label, **style)
    ax.set_title(title, fontsize=10)
    ax.set(xlabel="training step", ylabel="gradient norm, all parameters (log scale)", yscale="log")
    ax.legend(fontsize=8, title=f"seed mean, {SMOOTHING}-step smoothing; band = seed range", title_fontsize=8)
    return _save(fig, path)


def final_losses(runs: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """Every seed's final training loss as a point, the seed mean as a bar."""
    labels = list(dict.fromkeys(runs["label"]))
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(labels) + 2))
    for i, label in enumerate(labels):
        losses = runs.loc[runs["label"] == label, "train_loss_last25"]
        ax.barh(i, losses.mean(), color="C0", alpha=0.35)
        ax.scatter(losses, [i] * len(losses), color="C0", zorder=3, label="one seed" if i == 0 else None)
        half = half_width(losses)
        if half == half:  # two seeds or more
            ax.errorbar(losses.mean(), i, xerr=half, fmt="none", ecolor="k", capsize=4,
                        label="95% t interval of the seed mean" if i == 0 else None)
    ax.axvline(baselines["unigram"], color="0.35", ls="--", lw=1, label=f"unigram baseline, {baselines['unigram']:.3f}")
    ax.axvline(baselines["uniform"], color="0.6", ls=":", lw=1, label=f"uniform, ln V = {baselines['uniform']:.3f}")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set(title=title, xlabel=f"final training {LOSS_LABEL}: mean of the last 25 steps (bar = seed mean)")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def parameters_and_shares(runs: pd.DataFrame, title: str, path: Path) -> Path:
    """Left: total parameters against validation loss. Right: where the parameters are."""
    per_variant = runs.groupby("label", sort=False).agg(
        n_params=("n_params", "first"), val_loss=("val_loss", "mean"),
        attention=("share_attention", "first"), feed_forward=("share_feed_forward", "first"))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    left.scatter(runs["n_params"], runs["val_loss"], color="0.6", s=15, label="one seed")
    left.plot(per_variant["n_params"], per_variant["val_loss"], "o-", label="seed mean")
    for label, row in per_variant.iterrows():
        left.annotate(label, (row["n_params"], row["val_loss"]), textcoords="offset points", xytext=(5, 5), fontsize=8)
    left.set(title="Parameters vs final validation loss", xlabel="parameters (total)",
             ylabel=f"validation {LOSS_LABEL}")
    left.legend(fontsize=8)
    other = 1 - per_variant["attention"] - per_variant["feed_forward"]
    names = list(per_variant.index)
    right.bar(names, per_variant["attention"], label="attention")
    right.bar(names, per_variant["feed_forward"], bottom=per_variant["attention"], label="feed-forward")
    right.bar(names, other, bottom=per_variant["attention"] + per_variant["feed_forward"],
              label="embeddings, norms, head")
    right.set(title="Share of parameters", ylabel="share of all parameters", ylim=(0, 1))
    right.tick_params(axis="x", labelrotation=20, labelsize=8)
    right.legend(fontsize=8)
    fig.suptitle(title)
    return _save(fig, path)


def loss_by_depth(runs: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """Final validation loss against the number of layers, one line with residuals and one without."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for residual, group in runs.groupby("residual", sort=False):
        by_depth = group.groupby("n_layers")["val_loss"]
        name = "with residuals" if residual else "without residuals"
        ax.scatter(group["n_layers"], group["val_loss"], s=15, alpha=0.5)
        line, = ax.plot(by_depth.mean().index, by_depth.mean(), "o-", label=f"{name} (seed mean)")
        halves = by_depth.agg(half_width).fillna(0)
        ax.errorbar(halves.index, by_depth.mean(), yerr=halves, fmt="none", ecolor=line.get_color(), capsize=4)
    _baselines(ax, baselines)
    ax.set(title=title, xlabel="layers (blocks)", xscale="log",
           ylabel=f"final validation {LOSS_LABEL} (bars: 95% t interval of the mean)")
    ax.set_xticks(sorted(runs["n_layers"].unique()), [str(d) for d in sorted(runs["n_layers"].unique())])
    ax.legend(fontsize=8)
    return _save(fig, path)


def train_vs_validation(curves: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, group) in enumerate(curves.groupby("label", sort=False)):
        _band(ax, group, "loss", f"{label}: training", color=f"C{i}")
        val = group.dropna(subset=["val_loss"]).groupby("step")["val_loss"].mean()
        ax.plot(val.index, val, "o--", color=f"C{i}", ms=3, label=f"{label}: validation")
    _baselines(ax, baselines)
    ax.set(title=title, xlabel="training step", ylabel=f"{LOSS_LABEL} (seed mean)")
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def ladder(runs: pd.DataFrame, baselines: dict, published: dict[str, float], title: str, path: Path) -> Path:
    """One bar per rung: the seed mean of the lecture-style validation loss, its seed range as an error bar,
    the lecture's figure marked where it gave one, the unigram baseline drawn."""
    field = "val_loss_batches" if "val_loss_batches" in runs else "val_loss"
    by_rung = runs.groupby("variant", sort=False).agg(label=("label", "first"), mean=(field, "mean"),
                                                      half=(field, half_width), n=(field, "count"),
                                                      low=(field, "min"))
    x = range(len(by_rung))
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.bar(x, by_rung["mean"], color="C0", alpha=0.6, label="blocklab, seed mean")
    ax.errorbar(x, by_rung["mean"], yerr=by_rung["half"].fillna(0), fmt="none", ecolor="k", capsize=4,
                label=f"95% t interval of the mean ({by_rung['n'].min()}-{by_rung['n'].max()} seeds)"
                if by_rung["n"].min() != by_rung["n"].max() else f"95% t interval of the mean ({by_rung['n'].min()} seeds)")
    for i, (_, rung) in enumerate(by_rung.iterrows()):
        seeds = runs.loc[runs["variant"] == rung.name, field]
        ax.scatter([i] * len(seeds), seeds, color="0.3", s=8, zorder=3, label="one seed" if i == 0 else None)
    marked = [(i, published[v]) for i, v in enumerate(by_rung.index) if v in published]
    ax.scatter([i for i, _ in marked], [p for _, p in marked], marker="_", s=900, color="C3", zorder=3,
               linewidths=2.5, label="the lecture's figure")
    ax.axhline(baselines["unigram_val"], color="0.35", ls="--", lw=1,
               label=f"unigram baseline (validation), {baselines['unigram_val']:.3f}")
    ax.set_xticks(list(x), by_rung["label"], rotation=15, fontsize=8)
    lows = min(by_rung["low"].min(), (by_rung["mean"] - by_rung["half"].fillna(0)).min(),
               *(p for _, p in marked))
    ax.set(title=title, ylabel=f"validation {LOSS_LABEL}", ylim=(lows - 0.15, baselines["unigram_val"] + 0.15))
    ax.legend(fontsize=8)
    return _save(fig, path)


def paired_difference(curves: pd.DataFrame, baselines: dict, title: str, path: Path, smoothing: int = 100) -> Path:
    """Above: each variant's seed-mean training curve with its seed range. Below: each variant's paired
    difference to the first variant (the same seed sees the same batches), seed by seed, over steps: its
    mean and 95% Student-t band. Both smoothed over `smoothing` steps (the per-step loss is noisy)."""
    labels = list(dict.fromkeys(curves["label"]))
    wide = {label: curves[curves["label"] == label].pivot_table(index="step", columns="seed", values="loss")
                   .rolling(smoothing, min_periods=1).mean() for label in labels}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 8), sharex=True, height_ratios=[3, 2])
    for i, label in enumerate(labels):
        line, = top.plot(wide[label].index, wide[label].mean(axis=1), label=label, color=f"C{i}")
        top.fill_between(wide[label].index, wide[label].min(axis=1), wide[label].max(axis=1), color=f"C{i}",
                         alpha=0.2, lw=0)
    _baselines(top, baselines)
    top.set(title=title, ylabel=f"training {LOSS_LABEL}")
    top.legend(fontsize=8, title=f"seed mean, {smoothing}-step smoothing; band = seed range", title_fontsize=8)
    reference = labels[0]
    bottom.axhline(0, color="0.35", lw=1)
    seeds = list(wide[reference].columns)
    for i, label in enumerate(labels[1:], start=1):
        seeds = [s for s in wide[label].columns if s in wide[reference].columns]
        difference = wide[label][seeds] - wide[reference][seeds]
        mean, half = difference.mean(axis=1), difference.apply(half_width, axis=1)
        bottom.plot(difference.index, mean, color=f"C{i}", label=f"{label} - {reference}")
        bottom.fill_between(difference.index, mean - half, mean + half, color=f"C{i}", alpha=0.25, lw=0)
    bottom.set(xlabel="training step", ylabel="difference in training loss (nats)")
    bottom.legend(fontsize=8, title=f"paired by seed: mean and 95% t interval ({len(seeds)} seeds)", title_fontsize=8)
    return _save(fig, path)


def gradient_depths(table: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, by_depth in table.items():
        norm, residual = key.split("/")
        depths = sorted(by_depth, key=int)
        ax.plot([int(d) for d in depths], [by_depth[d] for d in depths], "o-",
                label=f"{norm}-norm, {residual} residuals")
    ax.set(title="Gradient reaching the input through a stack of blocks", xlabel="blocks in the stack (log scale)",
           ylabel="norm of d loss / d input (log scale)", xscale="log", yscale="log")
    ax.legend(fontsize=8)
    return _save(fig, path)


def ablation_figures(name: str, ablation: Ablation, curves: pd.DataFrame, runs: pd.DataFrame, baselines: dict,
                     out_dir: Path, published: dict[str, float] | None = None) -> dict[str, Path]:
    """Every figure of one ablation: loss curves, gradient norms, final losses, and its extra kinds;
    `published` marks the lesson's figures by variant on the ladder (none on another corpus)."""
    title = _heading(name, "training loss", ablation.description)
    figures = {
        "loss": loss_curves(curves, baselines, title, out_dir / f"{name}_loss.png"),
        "grad_norm": grad_norm_curves(curves, f"{name}: gradient norm during training",
                                      out_dir / f"{name}_grad_norm.png"),
        "final": final_losses(runs, baselines, f"{name}: final training loss, every seed",
                              out_dir / f"{name}_final.png"),
    }
    extras = {
        "param_shares": lambda: parameters_and_shares(runs, _heading(name, "parameters", ablation.description),
                                                      out_dir / f"{name}_params.png"),
        "depth": lambda: loss_by_depth(runs, baselines, f"{name}: final loss vs depth", out_dir / f"{name}_depth.png"),
        "train_val": lambda: train_vs_validation(curves, baselines, f"{name}: training vs validation loss",
                                                 out_dir / f"{name}_train_val.png"),
        "difference": lambda: paired_difference(curves, baselines, f"{name}: training loss, and each variant's "
                                                                   f"difference to the first",
                                                out_dir / f"{name}_difference.png"),
        "ladder": lambda: ladder(runs, baselines, published or {},
                                 f"{name}: validation loss rung by rung", out_dir / f"{name}_ladder.png"),
    }
    for kind in ablation.figures:
        figures[kind] = extras[kind]()
    return figures


def ablation_outputs(params_file: str, ablation: str, runs_dir: Path, metrics: dict,
                     reports_dir: Path, reference: dict | None = None) -> dict[str, str]:
    """One ablation's figures (reports/figures) and `dvc plots` tables (reports/curves); returns the figures'
    paths relative to `reports_dir`, by kind. Ablations are independent: the report stage draws them side by
    side, in worker processes (hence a params file: the parsed params do not pickle)."""
    params = load_params(params_file)
    curves = curves_frame(params, ablation, runs_dir)
    runs = runs_frame(params, ablation, metrics)
    marks = {variant: value for variant in params.ablations[ablation].variants
             if (value := published(reference or {}, ablation, variant, params.data.sha256)) is not None}
    drawn = ablation_figures(ablation, params.ablations[ablation], curves, runs, metrics["baselines"],
                             reports_dir / "figures", marks)
    tables_dir = reports_dir / "curves"
    tables_dir.mkdir(parents=True, exist_ok=True)
    plot_table(curves, "loss").to_csv(tables_dir / f"{ablation}_loss.csv", index=False)
    plot_table(curves, "grad_norm").to_csv(tables_dir / f"{ablation}_grad_norm.csv", index=False)
    return {kind: str(path.relative_to(reports_dir)) for kind, path in drawn.items()}


COLLAPSED_COLOUR, BLOWN_UP_COLOUR = "0.82", "#e8a09a"  # cells where no seed trained: apart from the scale


def _panels(count: int, width: float, height: float, columns: int = 2, **options):
    """A figure of `count` panels, at most `columns` a row (legible at a README's 800 px), the spare ones hidden;
    returns (figure, the panels in reading order)."""
    import math

    columns = min(columns, count)
    rows = math.ceil(count / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False,
                             layout="constrained", **options)
    panels = [ax for row in axes for ax in row]
    for spare in panels[count:]:
        spare.set_visible(False)
    return fig, panels[:count]


def _compact(value: float) -> str:
    """A loss as a cell holds it: 2.34, 12.3, 1,325."""
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"


def _heatmap_cell(cell, norm, colours) -> tuple[object, str]:
    """(colour, text) of one map cell: on the scale where a seed trained, else grey (every seed collapsed) or red
    (every seed blew up); seeds that did not train are counted in words."""
    seeds, mean = int(cell["seeds"]), cell["val_loss_mean"]
    collapsed, blown_up = int(cell["collapsed"]), int(cell["blown_up"])
    if collapsed == seeds:
        return COLLAPSED_COLOUR, f"{_compact(mean)}\ncollapsed"
    if blown_up == seeds:
        return BLOWN_UP_COLOUR, "diverged" if mean is None or mean != mean else f"{_compact(mean)}\nblew up"
    failed = collapsed + blown_up
    return colours(norm(mean)), _compact(mean) + (f"\n× {failed}/{seeds}" if failed else "")


def map_heatmaps(cells: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """One panel per variant: learning rate (columns) x the other axes (rows, e.g. warmup). Colour: the seed-mean
    final validation loss, on a scale set by the cells where every seed trained (a cell above it shows the
    scale's top, its value written); a cell where every seed collapsed is grey, one where every seed blew up
    red, and a cell where some seeds did not train says how many."""
    import numpy as np
    from matplotlib.colors import Normalize
    from matplotlib.patches import Patch

    variants = list(dict.fromkeys(cells["label"]))
    lrs = sorted(cells["lr"].unique())
    groups = list(dict.fromkeys(cells["group"]))
    words = dict(zip(cells["group"], cells["group_label"]))
    trained = cells.loc[cells["trained"] == cells["seeds"], "val_loss_mean"].dropna()
    scale = trained if len(trained) else cells["val_loss_mean"].dropna()
    norm = Normalize(float(scale.min()), float(scale.max()), clip=True)
    colours = matplotlib.colormaps["viridis_r"]
    fig, panels = _panels(len(variants), 0.62 * len(lrs) + 1.0, 0.48 * len(groups) + 1.0, sharey=True)
    for ax, label in zip(panels, variants):
        mine = cells[cells["label"] == label].set_index(["group", "lr"])
        image = np.ones((len(groups), len(lrs), 4))
        for i, g in enumerate(groups):
            for j, lr in enumerate(lrs):
                if (g, lr) not in mine.index:
                    continue
                colour, text = _heatmap_cell(mine.loc[(g, lr)], norm, colours)
                image[i, j] = matplotlib.colors.to_rgba(colour)
                dark = np.dot(image[i, j, :3], [0.299, 0.587, 0.114]) < 0.5
                ax.text(j, i, text, ha="center", va="center", fontsize=7, linespacing=1.1,
                        color="white" if dark else "black")
        ax.imshow(image, aspect="auto")
        ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs], fontsize=8)
        ax.set_yticks(range(len(groups)), [words[g] for g in groups], fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("learning rate", fontsize=8)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm, colours), ax=panels, shrink=0.9, extend="max")
    bar.set_label(f"final validation loss, seed mean (scale: the cells\nwhere every seed trained, "
                  f"{norm.vmin:.2f} to {norm.vmax:.2f})", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    fig.legend(handles=[Patch(color=COLLAPSED_COLOUR, label=f"every seed collapsed (to the unigram baseline, "
                                                            f"{baselines['unigram_val']:.2f})"),
                        Patch(color=BLOWN_UP_COLOUR, label=f"every seed blew up (ln V + {BLOWN_UP_MARGIN:g} or "
                                                           f"more) or diverged (not finite)"),
                        Patch(color="white", label="× k/n: k of n seeds collapsed or blew up")],
               loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(textwrap.fill(title, TITLE_WIDTH), fontsize=10)
    return _save(fig, path)


OFF_SCALE = 1.0  # nats above the unigram baseline where a learning-rate figure's axis stops


def _shared_legend(fig, panels, title: str) -> None:
    """One legend for every panel (their lines are the same), below them."""
    handles, labels = panels[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 3), fontsize=8, title=title,
               title_fontsize=8, frameon=False)


def _lr_lines(cells: pd.DataFrame, baselines: dict, title: str, path: Path, panels: str, lines: str,
              legend_baseline: str) -> Path:
    """Final validation loss against learning rate (log axis): a panel per value of `panels`, a line per value
    of `lines` (columns of the cell table), the seeds' range as a band, the unigram baseline dashed."""
    values = list(dict.fromkeys(cells[panels]))
    # A cell far above the unigram baseline has blown up; drawn to scale it would flatten every other line, so
    # the axis stops at OFF_SCALE above the baseline and such a cell is a triangle on the edge with its value.
    top = baselines["unigram_val"] + OFF_SCALE
    clipped = bool((cells["val_loss_max"] > top).any())
    fig, axes = _panels(len(values), 4.2, 3.3, sharey=True)
    for ax, value in zip(axes, values):
        mine = cells[cells[panels] == value]
        for label, curve in mine.groupby(lines, sort=False):
            curve = curve.sort_values("lr")
            line, = ax.plot(curve["lr"], curve["val_loss_mean"].clip(upper=top), marker="o", ms=4, label=label)
            ax.fill_between(curve["lr"], curve["val_loss_min"].clip(upper=top), curve["val_loss_max"].clip(upper=top),
                            color=line.get_color(), alpha=0.2, lw=0)
            for lr, loss in zip(curve["lr"], curve["val_loss_mean"]):
                if loss > top:
                    ax.plot([lr], [top], marker="^", ms=8, color=line.get_color(), clip_on=False)
                    ax.annotate(_compact(loss), (lr, top), textcoords="offset points", xytext=(-6, -12), fontsize=7,
                                ha="right", color=line.get_color())
        if clipped:
            ax.set_ylim(top=top)
        ax.axhline(baselines["unigram_val"], color="0.35", ls="--", lw=1, label=legend_baseline)
        ax.set_xscale("log")
        ax.set_title(mine["group_label"].iloc[0] if panels == "group" else value, fontsize=10)
        ax.set_xlabel("learning rate", fontsize=8)
        ax.tick_params(labelsize=8)
    for ax in axes[::2]:
        ax.set_ylabel(f"final validation {LOSS_LABEL}", fontsize=8)
    _shared_legend(fig, axes, "seed mean; band = seed range" + ("; ▲ off the axis, with its value" if clipped else ""))
    fig.suptitle(textwrap.fill(title, TITLE_WIDTH), fontsize=10)
    return _save(fig, path, dpi=100)


def lr_sensitivity_lines(cells: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """Wortsman et al.'s figure: final validation loss against learning rate, one line per variant, one panel
    per group (e.g. warmup)."""
    return _lr_lines(cells, baselines, title, path, panels="group", lines="label",
                     legend_baseline=f"unigram baseline (validation), {baselines['unigram_val']:.3f}")


def lr_lines_by_variant(cells: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """Wortsman et al.'s figure 1: final validation loss against learning rate, one panel per variant, one line
    per group (e.g. per width)."""
    return _lr_lines(cells, baselines, title, path, panels="label", lines="group_label",
                     legend_baseline=f"unigram baseline (validation), {baselines['unigram_val']:.3f}")


def sensitivity_by_group(cells: pd.DataFrame, summary: dict[str, dict], name: str, title: str, path: Path) -> Path:
    """LR sensitivity (reports/maps.json) against the group of cells (e.g. the width), one line per variant,
    its 95% interval as error bars: Wortsman et al.'s LR sensitivity against model size."""
    groups = list(dict.fromkeys(cells["group"]))
    words = dict(zip(cells["group"], cells["group_label"]))
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for (variant, label), _ in cells.groupby(["variant", "label"], sort=False):
        entries = [summary.get(f"{name}/{variant}/{group}", {}) for group in groups]
        ax.errorbar(range(len(groups)), [e.get("lr_sensitivity") for e in entries],
                    yerr=[e.get("lr_sensitivity_ci95", 0) for e in entries], marker="o", capsize=3, label=label)
    ax.set_xticks(range(len(groups)), [textwrap.fill(words[g], 14) for g in groups], fontsize=8)
    ax.set(xlabel="group of cells", ylabel="LR sensitivity (nats; lower is more robust)")
    ax.legend(fontsize=8, title="seed mean, 95% interval", title_fontsize=7)
    fig.suptitle(textwrap.fill(title, TITLE_WIDTH), fontsize=10)
    return _save(fig, path)


def attention_logits(cells: pd.DataFrame, title: str, path: Path) -> Path:
    """The largest attention logit at the last evaluation (seed mean, log axis) against learning rate, one panel
    per variant, one line per group: Wortsman et al.'s attention-logit growth, and what qk-layernorm does."""
    variants = list(dict.fromkeys(cells["label"]))
    fig, axes = _panels(len(variants), 4.2, 3.3, sharey=True)
    for ax, label in zip(axes, variants):
        for group, lines in cells[cells["label"] == label].groupby("group_label", sort=False):
            lines = lines.sort_values("lr")
            ax.plot(lines["lr"], lines["attn_logit_max_mean"], marker="o", ms=4, label=group)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("learning rate", fontsize=8)
        ax.tick_params(labelsize=8)
    for ax in axes[::2]:
        ax.set_ylabel("largest attention logit\n(seed mean, log scale)", fontsize=8)
    _shared_legend(fig, axes, "")
    fig.suptitle(textwrap.fill(title, TITLE_WIDTH), fontsize=10)
    return _save(fig, path, dpi=100)


def map_outputs(params: Params, name: str, metrics: dict, reports_dir: Path, summary: dict[str, dict]
                ) -> dict[str, str]:
    """Map `name`'s figures (reports/figures/<map>_<kind>.png, the kinds its `figures` lists): their paths
    relative to `reports_dir`, by kind. `summary`: reports/maps.json."""
    cells = cell_table(map_runs_frame(params, name, metrics))
    baselines, out = metrics["baselines"], Path(reports_dir) / "figures"
    draw = {
        "heatmap": lambda path: map_heatmaps(cells, baselines, f"{name}: final validation loss per cell", path),
        "lr": lambda path: lr_sensitivity_lines(
            cells, baselines, f"{name}: final validation loss against learning rate (Wortsman et al. 2023)", path),
        "lr_by_variant": lambda path: lr_lines_by_variant(
            cells, baselines, f"{name}: final validation loss against learning rate (Wortsman et al. 2023, fig. 1)",
            path),
        "sensitivity": lambda path: sensitivity_by_group(
            cells, summary, name, f"{name}: LR sensitivity (Wortsman et al. 2023) per group of cells", path),
        "attention_logits": lambda path: attention_logits(
            cells, f"{name}: the largest attention logit at the end of training, against learning rate", path),
    }
    drawn = {kind: draw[kind](out / f"{name}_{kind}.png") for kind in params.maps[name].figures}
    return {kind: str(path.relative_to(reports_dir)) for kind, path in drawn.items()}
