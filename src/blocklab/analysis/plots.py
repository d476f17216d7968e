"""An ablation's figures (matplotlib, PNG), drawn from its runs' curves and metrics: what makes each finding obvious.
A map's figures: blocklab.analysis.map_plots."""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

import matplotlib.ticker
import pandas as pd

from blocklab.analysis.claims import Evidence
from blocklab.analysis.figure_files import plt, save_figure
from blocklab.analysis.finding_plots import QUANTITY_WORDS, differences_figure
from blocklab.analysis.intervals import half_width
from blocklab.analysis.maps import trains
from blocklab.analysis.reference import published
from blocklab.analysis.runs import curve_table, curves_frame, runs_frame
from blocklab.analysis.setting_words import shared_settings
from blocklab.analysis.run_table import PlanEntry, RunTable

SMOOTHING = 10  # steps in the rolling mean drawn over noisy per-step curves
LOSS_LABEL = "loss (nats per character)"
TITLE_WIDTH = 90  # characters a title line holds in an 8-inch figure


def _baselines(ax, baselines: dict) -> None:
    ax.axhline(baselines["unigram"], color="0.35", ls="--", lw=1,
               label=f"unigram baseline (character frequencies), {baselines['unigram']:.3f}")
    ax.axhline(baselines["uniform"], color="0.6", ls=":", lw=1,
               label=f"uniform guess, ln V = {baselines['uniform']:.3f}")


LINE_STYLES = ["-", "--", "-.", ":"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def _styles(count: int) -> list[dict]:
    """A style per line: colours alone for a few, and beyond four a line style and a marker each too, so that
    lines that run close together can still be told apart."""
    if count <= 4:
        return [{"color": f"C{i}"} for i in range(count)]
    return [{"color": f"C{i % 10}", "ls": LINE_STYLES[i % len(LINE_STYLES)], "marker": MARKERS[i % len(MARKERS)],
             "ms": 6, "offset": i} for i in range(count)]


def _heading(name: str, what: str, setting: str) -> str:
    """A figure's title: what it shows, then what its runs share (`shared_settings`), as they trained."""
    return "\n".join([f"{name}: {what}", *textwrap.wrap(setting, TITLE_WIDTH)])


def plain_log_ticks(axis) -> None:
    """A log axis labelled 2, 3, 10 rather than 2x10^0: a reader's numbers."""
    plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)


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
    return save_figure(fig, path)


def grad_norm_curves(curves: pd.DataFrame, title: str, path: Path) -> Path:
    labels = list(dict.fromkeys(curves["label"]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for (label, group), style in zip(curves.groupby("label", sort=False), _styles(len(labels))):
        _band(ax, group, "grad_norm", label, **style)
    ax.set_title(title, fontsize=10)
    ax.set(xlabel="training step", ylabel="gradient norm, all parameters (log scale)", yscale="log")
    ax.legend(fontsize=8, title=f"seed mean, {SMOOTHING}-step smoothing; band = seed range", title_fontsize=8)
    return save_figure(fig, path)


# A claim's call that reads one field of an ablation's runs, the field (if named) in the rest of its arguments
_CALL = re.compile(r'(?P<call>loss|mean|seeds|std|at)\("(?P<entry>[a-z_0-9]+)/[^"]*"(?P<rest>[^)]*)\)')


def _field_read(call: str, named: list[str]) -> str:
    """The field a claim's `call` reads: the one it names, else the expression's own default (`loss` is a run's
    `metric`: blocklab.analysis.claims.Evidence)."""
    if named:
        return named[-1]
    return inspect.signature(getattr(Evidence, "metric" if call == "loss" else call)).parameters["field"].default


def findings_loss(claims: list, name: str, recorded: set[str]) -> str:
    """The loss the findings over ablation `name` read most (of the fields its runs record), the final
    validation loss where none reads one: what its `final` figure shows."""
    read = []
    for claim in claims:
        for call in _CALL.finditer(claim.rule_text()) if claim.kind == "finding" else ():
            field = _field_read(call["call"], re.findall(r'"([a-z_0-9]+)"', call["rest"]))
            if call["entry"] == name and "loss" in field and field in recorded:
                read.append(field)
    return max(dict.fromkeys(read), key=read.count) if read else "val_loss"


def trained_scale(runs: pd.DataFrame, field: str):
    """Of an ablation's `runs`: each run's finite `field` (NaN where none), whether it trained (neither collapsed
    nor blew up), each variant's seed mean and half its 95% interval by label, and the scale (low, high) that
    holds the trained runs and the intervals of the variants all of whose seeds trained, padded; every run's
    where none trained."""
    import numpy as np

    values = pd.to_numeric(runs[field], errors="coerce").where(lambda v: np.isfinite(v))
    trained = runs.apply(lambda run: trains(run.to_dict()), axis=1) & values.notna()
    means = {label: (values[runs["label"] == label].mean(), half_width(values[runs["label"] == label]))
             for label in dict.fromkeys(runs["label"])}
    on_scale = list(values[trained]) + [m + s * h for label, (m, h) in means.items() if h == h
                                          and trained[runs["label"] == label].all() for s in (-1, 1)]
    if not on_scale:  # no run trained: the scale is every run's
        on_scale = list(values.dropna()) or [0.0]
    low, high = min(on_scale), max(on_scale)
    pad = 0.08 * (high - low) or 0.02 * abs(high) or 0.1
    return values, trained, means, (low - pad, high + pad)


def final_values(runs: pd.DataFrame, baselines: dict, field: str, title: str, path: Path) -> Path:
    """Every seed's final `field` (a loss) as a point, and each variant's seed mean with its 95% t interval, on
    the scale of the runs that trained. A run that collapsed (to the unigram baseline) or blew up is marked as
    such, and where it lies off that scale it is drawn on its right edge with its value written, so that it
    does not flatten the differences between the trained ones."""
    labels = list(dict.fromkeys(runs["label"]))
    values, trained, means, (low, high) = trained_scale(runs, field)
    unigram = baselines["unigram" if field.startswith("train") else "unigram_val"]
    fig, ax = plt.subplots(figsize=(8, 0.62 * len(labels) + 2.2))
    shown: set[str] = set()

    def once(name: str) -> str | None:
        return None if name in shown or shown.add(name) else name

    for i, label in enumerate(labels):
        mine = runs["label"] == label
        ax.scatter(values[mine & trained], [i - 0.12] * int((mine & trained).sum()), color="C0", s=22, zorder=3,
                   label=once("one seed"))
        off = []
        for index in runs.index[mine & ~trained]:
            value, run = values[index], runs.loc[index]
            marker, colour, name = ("x", "0.4", "a seed that collapsed (to the unigram baseline)") \
                if run.get("collapsed") else ("^", "#b8322a", "a seed that blew up or diverged")
            at = value if value == value and low <= value <= high else high  # beyond the scale: on its edge
            ax.scatter([at], [i - 0.12], marker=marker, color=colour, s=40, zorder=4, clip_on=False, label=once(name))
            if at == high:
                off.append("no finite value" if value != value else f"{value:.3f}")
        if off:
            ax.annotate(f"off the scale: {', '.join(off)}", (high, i - 0.12), textcoords="offset points",
                        xytext=(-9, 0), fontsize=7, color="0.3", ha="right", va="center")
        mean, half = means[label]
        if mean == mean and low <= mean <= high:
            ax.errorbar([mean], [i + 0.16], xerr=None if half != half else [[min(half, mean - low)],
                                                                            [min(half, high - mean)]],
                        fmt="D", color="k", ms=5, capsize=4, label=once("seed mean, 95% t interval"))
        elif mean == mean:
            ax.annotate(f"seed mean {mean:.3f}, off the scale →", (high, i + 0.16), textcoords="offset points",
                        xytext=(-9, 0), fontsize=7, ha="right", va="center")
    if low <= unigram <= high:
        ax.axvline(unigram, color="0.35", ls="--", lw=1, label=f"unigram baseline, {unigram:.3f}")
    ax.set_xlim(low, high)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    beyond = "" if low <= unigram <= high else f"\n(the unigram baseline, {unigram:.3f}, lies off the scale)"
    ax.set(xlabel=f"{QUANTITY_WORDS.get(field, field)}, nats per character{beyond}")
    fig.suptitle(title, fontsize=11)  # over the figure, not the axes: the variants' labels take the left
    below = (0.85 if beyond else 0.7) / (ax.get_position().height * fig.get_figheight())  # inches under the axis
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -below), ncol=2, frameon=False)
    return save_figure(fig, path)


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
    return save_figure(fig, path)


def loss_by_depth(runs: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """Final validation loss against the number of layers, one line with residuals and one without."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for residual, group in runs.groupby("residual", sort=False):
        by_depth = group.groupby("n_layers")["val_loss"]
        name = "without residuals" if residual == "none" else "with residuals"
        ax.scatter(group["n_layers"], group["val_loss"], s=15, alpha=0.5)
        line, = ax.plot(by_depth.mean().index, by_depth.mean(), "o-", label=f"{name} (seed mean)")
        halves = by_depth.agg(half_width).fillna(0)
        ax.errorbar(halves.index, by_depth.mean(), yerr=halves, fmt="none", ecolor=line.get_color(), capsize=4)
    _baselines(ax, baselines)
    ax.set(title=title, xlabel="layers (blocks)", xscale="log",
           ylabel=f"final validation {LOSS_LABEL} (bars: 95% t interval of the mean)")
    ax.set_xticks(sorted(runs["n_layers"].unique()), [str(d) for d in sorted(runs["n_layers"].unique())])
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def train_vs_validation(curves: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, group) in enumerate(curves.groupby("label", sort=False)):
        _band(ax, group, "loss", f"{label}: training", color=f"C{i}")
        val = group.dropna(subset=["val_loss"]).groupby("step")["val_loss"].mean()
        ax.plot(val.index, val, "o--", color=f"C{i}", ms=3, label=f"{label}: validation")
    _baselines(ax, baselines)
    ax.set(title=title, xlabel="training step", ylabel=f"{LOSS_LABEL} (seed mean)")
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


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
    return save_figure(fig, path)


def residual_stream(runs: pd.DataFrame, title: str, path: Path) -> Path:
    """What each block does to the residual stream at the last evaluation, a line per variant (seed mean, band =
    seed range): left, the stream's RMS after each block (log scale; Kim et al. 2025's growth with depth);
    right, the cosine of each block's input and output (near 1: the block barely changes the stream; Sun et al.
    2025's "near-identity" deep blocks)."""
    labels = list(dict.fromkeys(runs["label"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
    for (label, group), style in zip(runs.groupby("label", sort=False), _styles(len(labels))):
        style = {k: v for k, v in style.items() if k != "offset"}
        for ax, field in ((left, "resid_rms"), (right, "block_cos")):
            per_seed = pd.DataFrame([v for v in group[field] if isinstance(v, list)], dtype=float)
            if per_seed.empty:
                continue
            layers = list(range(1, per_seed.shape[1] + 1))
            line, = ax.plot(layers, per_seed.mean(), label=label, lw=1.3, **style)
            if len(per_seed) > 1:
                ax.fill_between(layers, per_seed.min(), per_seed.max(), color=line.get_color(), alpha=0.15, lw=0)
    left.set(xlabel="block", ylabel="RMS of the residual stream after the block (log scale)", yscale="log")
    plain_log_ticks(left.yaxis)
    right.set(xlabel="block", ylabel="cos(block input, block output), mean over positions")
    for ax in (left, right):
        ax.xaxis.get_major_locator().set_params(integer=True)
    left.legend(fontsize=7, title="seed mean; band = seed range", title_fontsize=7)
    fig.suptitle(title, fontsize=10)  # _heading's lines, already wrapped
    return save_figure(fig, path)


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
    return save_figure(fig, path)


def gradient_depths(table: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, by_depth in table.items():
        placement, residual = key.split("/")
        depths = sorted(by_depth, key=int)
        ax.plot([int(d) for d in depths], [by_depth[d] for d in depths], "o-",
                label=f"{placement}-norm, {residual} residuals")
    ax.set(title="Gradient reaching the input through a stack of blocks", xlabel="blocks in the stack (log scale)",
           ylabel="norm of d loss / d input (log scale)", xscale="log", yscale="log")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def ablation_figures(name: str, ablation: PlanEntry, setting: str, curves: pd.DataFrame, runs: pd.DataFrame,
                     baselines: dict, out_dir: Path, published: dict[str, float] | None = None,
                     claims: list | None = None, verdicts: dict | None = None) -> dict[str, Path]:
    """Every figure of one ablation: loss curves, gradient norms, final losses, the residual stream block by
    block, and its extra kinds, each titled with what it shows and what its runs share (`setting`);
    `published` marks the lesson's figures by variant on the ladder (none on another corpus); `claims` and their
    `verdicts` are what its findings figure draws."""
    def heading(what: str) -> str:
        return _heading(name, what, setting)

    figures = {
        "loss": loss_curves(curves, baselines, heading("training loss"), out_dir / f"{name}_loss.png"),
        "grad_norm": grad_norm_curves(curves, heading("gradient norm during training"),
                                      out_dir / f"{name}_grad_norm.png"),
        "final": final_values(runs, baselines, field := findings_loss(claims or [], name, set(runs.columns)),
                              heading(f"{QUANTITY_WORDS.get(field, field)}, every seed"), out_dir / f"{name}_final.png"),
        "layers": residual_stream(runs, heading("the residual stream, block by block, at the end of training"),
                                  out_dir / f"{name}_layers.png"),
    }
    extras = {
        "param_shares": lambda: parameters_and_shares(runs, heading("parameters"), out_dir / f"{name}_params.png"),
        "depth": lambda: loss_by_depth(runs, baselines, heading("final loss vs depth"), out_dir / f"{name}_depth.png"),
        "train_val": lambda: train_vs_validation(curves, baselines, heading("training vs validation loss"),
                                                 out_dir / f"{name}_train_val.png"),
        "difference": lambda: paired_difference(curves, baselines,
                                                heading("training loss, and each variant's difference to the first"),
                                                out_dir / f"{name}_difference.png"),
        "ladder": lambda: ladder(runs, baselines, published or {}, heading("validation loss rung by rung"),
                                 out_dir / f"{name}_ladder.png"),
        "findings": lambda: differences_figure(
            claims or [], verdicts or {}, dict(zip(runs["variant"], runs["label"])), name,
            heading("each finding's paired difference or own quantity with its interval, or its values against "
                    "their bound"), out_dir / f"{name}_findings.png"),
    }
    for kind in ablation.figures:
        if (drawn := extras[kind]()) is not None:  # a findings figure with no finding to draw is not drawn
            figures[kind] = drawn
    return figures


def ablation_outputs(table: RunTable, ablation: str, runs_dir: Path, metrics: dict, reports_dir: Path,
                     reference: dict | None = None, claims: list | None = None,
                     verdicts: dict | None = None) -> dict[str, str]:
    """One ablation's figures (reports/figures) and `dvc plots` tables (reports/curves); returns the figures'
    paths relative to `reports_dir`, by kind. Ablations are independent: the report stage draws them side by
    side, in worker processes."""
    entry = table.ablations[ablation]
    curves = curves_frame(table, ablation, runs_dir)
    runs = runs_frame(table, ablation, metrics)
    marks = {variant: value for variant in entry.variants
             if (value := published(reference or {}, ablation, variant, table.corpus_sha256)) is not None}
    setting = shared_settings(entry.specs)
    drawn = ablation_figures(ablation, entry, setting, curves, runs, metrics["baselines"],
                             reports_dir / "figures", marks, claims, verdicts)
    tables_dir = reports_dir / "curves"
    tables_dir.mkdir(parents=True, exist_ok=True)
    curve_table(curves).to_csv(tables_dir / f"{ablation}.csv", index=False)
    return {kind: str(path.relative_to(reports_dir)) for kind, path in drawn.items()}
