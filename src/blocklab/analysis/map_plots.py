"""A map's figures (matplotlib, PNG): heatmaps of every cell, final loss against the learning rate (Wortsman et
al. 2023's plot), LR sensitivity per group, and the largest attention logit. Two panels a row at most, one shared
legend, so that they stay legible at a README's 800 px."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib
import pandas as pd

from blocklab.analysis.finding_plots import findings_figure, reads_map
from blocklab.analysis.maps import cell_table, map_runs_frame, trains
from blocklab.analysis.figure_files import plt, save_figure
from blocklab.analysis.plots import LOSS_LABEL, TITLE_WIDTH
from blocklab.analysis.runs import BLOWN_UP_MARGIN
from blocklab.analysis.setting_words import shared_settings
from blocklab.analysis.trend_plots import trend_figure, trend_maps
from blocklab.params.words import in_words, rate
from blocklab.analysis.run_table import RunTable


COLLAPSED_COLOUR, BLOWN_UP_COLOUR = "0.82", "#e8a09a"  # cells where no seed trained: apart from the scale
ROW_INCHES = 8.0  # a row of panels a README shows at 800 px


def _wrapped(title: str) -> str:
    """A title's lines (what the figure shows; what its runs share), each wrapped to the figure's width."""
    return "\n".join(textwrap.fill(line, TITLE_WIDTH) for line in title.split("\n"))


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
    # a panel per variant, wide enough for its learning rates; a map of one or two variants wide enough for its
    # title and legend
    width = max(0.62 * len(lrs) + 1.0, 6.5 / min(len(variants), 3))
    # narrow panels (few learning rates) go more to a row, so that the legend and the titles fit
    fig, panels = _panels(len(variants), width, 0.48 * len(groups) + 1.0, columns=max(2, int(ROW_INCHES // width)),
                          sharey=True)
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
        ax.set_title(textwrap.fill(label, int(10 * width)), fontsize=10)  # 10 characters an inch fit
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
    fig.suptitle(_wrapped(title), fontsize=10)
    return save_figure(fig, path)


def _shared_legend(fig, panels, title: str) -> None:
    """One legend for every panel (their lines are the same), below them."""
    handles, labels = panels[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 3), fontsize=8, title=title,
               title_fontsize=8, frameon=False)


def _trained_points(cells: pd.DataFrame) -> pd.DataFrame:
    """The cell table (`maps.cell_table`) as the figures draw it: `mean` and `ci95` over the seeds that trained
    (NaN where none did, or where one did for the interval), `failed` the seeds that did not."""
    return cells.assign(mean=cells["val_loss_trained_mean"].astype(float),
                        ci95=cells["val_loss_trained_ci95"].astype(float),
                        failed=cells["seeds"] - cells["trained"])


def _trained_scale(points: pd.DataFrame, baselines: dict) -> tuple[float, float]:
    """(low, top) of a loss axis set by the trained seeds' means: a wide interval runs off it and is cut at
    its edge; `top`, above every trained mean, is where a cell with no trained seed sits."""
    trained = points["mean"].dropna()
    low, high = (float(trained.min()), float(trained.max())) if len(trained) else (baselines["unigram_val"],) * 2
    pad = 0.12 * max(high - low, 0.05)
    return low - pad, high + 2 * pad


def _trained_line(ax, x, line: pd.DataFrame, colour: str, label: str, top: float) -> None:
    """One line of `_trained_points` against `x`: the trained seeds' means with their 95% intervals; a cell where
    some seeds did not train a hollow marker with their count, one where none did a triangle on the top edge (the
    lines set apart by `_dodged`, so are their triangles)."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    ax.errorbar(x, line["mean"], yerr=line["ci95"].fillna(0), marker="o", ms=4, capsize=3, color=colour, label=label)
    for at, (_, cell) in zip(x, line.iterrows()):
        if cell["failed"] <= 0:
            continue
        count = f"{cell['failed']}/{cell['seeds']}"
        if np.isnan(cell["mean"]):  # every seed: the triangle says so (a count beside each would overlap)
            ax.plot([at], [top], marker="^", ms=8, color=colour, clip_on=False, zorder=3, mec="white", mew=0.5)
        else:
            ax.scatter([at], [cell["mean"]], s=80, facecolors="none", edgecolors=colour, zorder=3)
            ax.annotate(count, (at, cell["mean"]), fontsize=7, textcoords="offset points", xytext=(5, 3),
                        color=colour)


def _dodged(values: pd.Series, i: int, count: int, step: float = 1.025) -> pd.Series:
    """Values on a log axis set a little apart per line, so that intervals at one value do not hide each other."""
    return values * step ** (i - (count - 1) / 2)


def _untrained_words(points: pd.DataFrame, baselines: dict) -> str:
    """The legend's words for the markers of `_trained_line`, when some cell has seeds that did not train."""
    if not points["failed"].any():
        return ""
    return ("; hollow: k of n seeds did not train (collapsed or blew up); ▲ on the top edge: no seed trained "
            f"(the unigram baseline, validation, is {baselines['unigram_val']:.3f})")


def _lr_lines(cells: pd.DataFrame, baselines: dict, title: str, path: Path, panels: str, lines: str) -> Path:
    """Final validation loss against learning rate (log axis): a panel per value of `panels`, a line per value
    of `lines` (columns of the cell table), the mean of the seeds that trained with its 95% interval. Seeds that
    did not train (collapsed or blew up) are kept off the trained scale (`_trained_line`): a loss far above it
    would flatten every other line."""
    points = _trained_points(cells)
    low, top = _trained_scale(points, baselines)
    values = list(dict.fromkeys(points[panels]))
    fig, axes = _panels(len(values), 4.2, 3.8, sharey=True)
    for ax, value in zip(axes, values):
        panel = points[points[panels] == value]
        mine = panel.groupby(lines, sort=False)
        for i, (label, line) in enumerate(mine):
            line = line.sort_values("lr")
            _trained_line(ax, _dodged(line["lr"], i, mine.ngroups, 1.04), line, f"C{i % 10}", label, top)
        if low <= baselines["unigram_val"] <= top:
            ax.axhline(baselines["unigram_val"], color="0.35", ls="--", lw=1)
        rates = sorted(set(points["lr"]))
        ax.set(xscale="log", ylim=(low, top))
        ax.set_xticks(rates, [rate(lr) for lr in rates])
        ax.minorticks_off()
        ax.set_title(panel["group_label"].iloc[0] if panels == "group" else value, fontsize=10)
        ax.set_xlabel("learning rate (log scale)", fontsize=8)
        ax.tick_params(labelsize=8)
    for ax in axes[::2]:
        ax.set_ylabel(f"final validation {LOSS_LABEL}\n(mean of the seeds that trained)", fontsize=8)
    _shared_legend(fig, axes, textwrap.fill("bars: 95% interval over the seeds that trained (cut at the panel's edge)"
                                            + _untrained_words(points, baselines), 110))
    fig.suptitle(_wrapped(title), fontsize=10)
    return save_figure(fig, path, dpi=100)


def lr_sensitivity_lines(cells: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """Wortsman et al.'s figure: final validation loss against learning rate, one line per variant, one panel
    per group (e.g. warmup)."""
    return _lr_lines(cells, baselines, title, path, panels="group", lines="label")


def lr_lines_by_variant(cells: pd.DataFrame, baselines: dict, title: str, path: Path) -> Path:
    """Wortsman et al.'s figure 1: final validation loss against learning rate, one panel per variant, one line
    per group (e.g. per width)."""
    return _lr_lines(cells, baselines, title, path, panels="label", lines="group_label")


def sensitivity_by_group(cells: pd.DataFrame, summary: dict[str, dict], name: str, title: str, path: Path) -> Path:
    """LR sensitivity (reports/maps.json) against the group of cells (e.g. the width), one line per variant,
    its 95% interval as error bars: Wortsman et al.'s LR sensitivity against model size. Where no seed of a
    variant trains at any rate its sensitivity, near 0 by the definition, measures nothing: a cross, said so."""
    groups = list(dict.fromkeys(cells["group"]))
    words = dict(zip(cells["group"], cells["group_label"]))
    fig, ax = plt.subplots(figsize=(6.5, 5.2), layout="constrained")
    nowhere, lines = False, cells.groupby(["variant", "label"], sort=False)
    for i, ((variant, label), _) in enumerate(lines):
        entries = [summary.get(f"{name}/{variant}/{group}", {}) for group in groups]
        x = [g + 0.03 * (i - (lines.ngroups - 1) / 2) for g in range(len(groups))]  # apart, so intervals show
        ax.errorbar(x, [e.get("lr_sensitivity") for e in entries], yerr=[e.get("lr_sensitivity_ci95", 0) for e in entries],
                    marker="o", capsize=3, color=f"C{i % 10}", label=label)
        for at, entry in zip(x, entries):
            if entry and not any(entry.get("trainable_lr_max_by_seed") or []):
                nowhere = True
                ax.plot([at], [entry["lr_sensitivity"]], marker="X", ms=11, color=f"C{i % 10}", mec="black", mew=0.6,
                        zorder=3)
    ax.set_xticks(range(len(groups)), [textwrap.fill(words[g], 14) for g in groups], fontsize=8)
    ax.set(xlabel="group of cells", ylabel="LR sensitivity (nats; lower is more robust)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8, frameon=False,
               title="seed mean, 95% interval" + ("; ✕: no seed trains at any rate of the grid (the sensitivity, "
                                                  "near 0 then, measures nothing)" if nowhere else ""),
               title_fontsize=8)
    fig.suptitle(_wrapped(title), fontsize=10)
    return save_figure(fig, path)


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
    fig.suptitle(_wrapped(title), fontsize=10)
    return save_figure(fig, path, dpi=100)


def loss_by_depth(cells: pd.DataFrame, baselines: dict, title: str, path: Path, others: tuple[str, ...] = ()
                  ) -> Path:
    """Final validation loss against depth (log axis), one line per variant (and per value of the map's `others`
    axes, a width say), one panel per learning rate: the mean of the seeds that trained with its 95% interval.
    The scale is the means'; an interval wider than it is cut at its edge. Seeds that did not train (collapsed or
    blew up) are kept off that scale: a cell where some did is a hollow marker with the count; one where none
    trained is a triangle on the panel's top edge, apart from the lines."""
    points = _trained_points(cells)
    low, top = _trained_scale(points, baselines)
    rates = sorted(set(points["lr"]))
    fig, axes = _panels(len(rates), 5.2, 3.8, sharey=True)
    for ax, lr in zip(axes, rates):
        lines_of = points[points["lr"] == lr].groupby(["variant", "label", *others], sort=False)
        for i, ((_, label, *values), line) in enumerate(lines_of):
            line = line.sort_values("n_layers")
            label = ", ".join([label, *(f"{field} {in_words(field, value)}" for field, value in zip(others, values))])
            _trained_line(ax, _dodged(line["n_layers"], i, lines_of.ngroups), line, f"C{i % 10}", label, top)
        if low <= baselines["unigram_val"] <= top:
            ax.axhline(baselines["unigram_val"], color="0.35", ls="--", lw=1)
        depths = sorted(set(points["n_layers"]))
        ax.set(xscale="log", title=f"lr {rate(lr)}", xlabel="blocks (log scale)", ylim=(low, top))
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.minorticks_off()
    axes[0].set_ylabel(f"final validation {LOSS_LABEL}\n(mean of the seeds that trained)", fontsize=8)
    _shared_legend(fig, axes, textwrap.fill("bars: 95% interval over the seeds that trained (cut at the panel's edge)"
                                            + _untrained_words(points, baselines), 110))
    fig.suptitle(_wrapped(title), fontsize=10)
    return save_figure(fig, path, dpi=100)


def _stream_panels(table: RunTable, name: str, metrics: dict, profile, title: str, path: Path, ylabel: str,
                   xlabel: str, log: bool) -> Path:
    """One panel per cell of map `name`, one line per variant: `profile(run)` -> (x values, y values) or None of
    each seed that trained, their mean (geometric on a log axis) as the line and their range as a band. A variant
    none of whose seeds trained in a cell is named in the panel's title, not drawn: its stream says nothing of
    a trained model's."""
    import numpy as np

    specs, grid = table.maps[name].specs, table.maps[name].axes
    cells = list(dict.fromkeys(spec.cell for spec in specs))
    variants = list(dict.fromkeys((spec.variant, spec.label) for spec in specs))
    fig, axes = _panels(len(cells), 4.6, 3.2)
    for ax, cell in zip(axes, cells):
        untrained = []
        for i, (variant, label) in enumerate(variants):
            spec = next(s for s in specs if s.cell == cell and s.variant == variant)
            runs = [metrics["runs"][spec.key(seed)] for seed in spec.seeds]
            profiles = [profile(run) for run in runs if trains(run)]
            profiles = [p for p in profiles if p is not None]
            if not profiles:
                untrained.append(label)
                continue
            x = profiles[0][0]
            ys = np.array([y for _, y in profiles if len(y) == len(x)], dtype=float)
            centre = np.exp(np.log(ys).mean(axis=0)) if log else ys.mean(axis=0)
            ax.plot(x, centre, color=f"C{i % 10}", lw=1.2, label=label)
            if len(ys) > 1:
                ax.fill_between(x, ys.min(axis=0), ys.max(axis=0), color=f"C{i % 10}", alpha=0.15, lw=0)
        spec = next(s for s in specs if s.cell == cell)
        settings = {"model": spec.model, "train": spec.train}
        where = ", ".join(f"{field} {in_words(field, getattr(settings[section], field))}" for section, field, _ in grid)
        missing = "\n" + textwrap.fill(f"(no seed trained: {', '.join(untrained)})", 60) if untrained else ""
        ax.set_title(where + missing, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.tick_params(labelsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in axes[::2]:
        ax.set_ylabel(ylabel, fontsize=8)
    # every variant in the legend, also one drawn in no panel of the first
    handles = [matplotlib.lines.Line2D([], [], color=f"C{i % 10}", lw=1.2, label=label)
               for i, (_, label) in enumerate(variants)]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3), fontsize=8, frameon=False,
               title="the seeds that trained: line, their mean; band, their range", title_fontsize=8)
    fig.suptitle(_wrapped(title), fontsize=10)
    return save_figure(fig, path, dpi=100)


def _rms_by_block(run: dict):
    rms = run.get("resid_rms")
    return (list(range(1, len(rms) + 1)), rms) if isinstance(rms, list) and rms and None not in rms else None


def _slope_by_step(run: dict):
    pairs = run.get("log_rms_slope_by_step") or []
    if not pairs or any(slope is None for _, slope in pairs):
        return None
    return [step for step, _ in pairs], [slope for _, slope in pairs]


def residual_stream_by_cell(table: RunTable, name: str, metrics: dict, title: str, path: Path) -> Path:
    """The residual stream's RMS after each block (log axis) at the last evaluation, one line per variant, one
    panel per cell: what each placement does to the stream as the block deepens."""
    return _stream_panels(table, name, metrics, _rms_by_block, title, path, "RMS after the block\n(log scale)",
                          "block", log=True)


def stream_slope_over_training(table: RunTable, name: str, metrics: dict, title: str, path: Path) -> Path:
    """The slope of ln RMS over the blocks (metrics.json's `log_rms_slope_by_step`) at every evaluation step, one
    line per variant, one panel per cell: how the stream's growth with depth develops while the model trains."""
    return _stream_panels(table, name, metrics, _slope_by_step, title, path,
                          "slope of ln RMS over the blocks\n(per block)", "training step", log=False)


def map_outputs(table: RunTable, name: str, metrics: dict, reports_dir: Path, summary: dict[str, dict],
                claims: list, verdicts: dict) -> dict[str, str]:
    """Map `name`'s figures (reports/figures/<map>_<kind>.png, the kinds its `figures` lists): their paths
    relative to `reports_dir`, by kind. `summary`: reports/maps.json; `claims` and `verdicts` (reports/claims.json):
    what the findings figure draws, the findings that read this map's cells."""
    runs = map_runs_frame(table, name, metrics)
    cells = cell_table(runs)
    baselines, out = metrics["baselines"], Path(reports_dir) / "figures"
    setting = shared_settings(table.maps[name].specs)  # an axis's setting differs between cells: left out
    others = tuple(field for _, field, _ in table.maps[name].axes if field not in ("n_layers", "lr"))

    def heading(what: str) -> str:
        return f"{name}: {what}\n{setting}"

    draw = {
        "heatmap": lambda path: map_heatmaps(cells, baselines, heading("final validation loss per cell"), path),
        "lr": lambda path: lr_sensitivity_lines(
            cells, baselines, heading("final validation loss against learning rate (Wortsman et al. 2023)"), path),
        "lr_by_variant": lambda path: lr_lines_by_variant(
            cells, baselines, heading("final validation loss against learning rate (Wortsman et al. 2023, fig. 1)"),
            path),
        "sensitivity": lambda path: sensitivity_by_group(
            cells, summary, name, heading("LR sensitivity (Wortsman et al. 2023) per group of cells"), path),
        "attention_logits": lambda path: attention_logits(
            cells, heading("the largest attention logit at the end of training, against learning rate"), path),
        "depth": lambda path: loss_by_depth(cells, baselines, heading("final validation loss against depth"), path,
                                            others),
        "layers": lambda path: residual_stream_by_cell(
            table, name, metrics, heading("the residual stream's RMS after each block at the end of training "
                                           "(Kim et al. 2025)"), path),
        "stream_over_training": lambda path: stream_slope_over_training(
            table, name, metrics, heading("the residual stream's growth over the blocks (the slope of ln RMS) at "
                                          "each evaluation while the model trains (Sun et al. 2025)"), path),
        "findings": lambda path: findings_figure(
            [c for c in claims if reads_map(c, name)], verdicts,
            heading("each finding's own quantity with its interval, or its values against their bound; zero, "
                    "or an equivalence test's band, marked"), path),
        "trend": lambda path: trend_figure(
            claims, verdicts, {n: e.labels for n, e in table.maps.items()},
            f"Does the verdict survive growth? Each trend finding's paired effect at each size (95% interval) against "
            f"its training compute, the fitted slope dashed; a hollow point: a run of the pair did not train "
            f"(collapsed or diverged; a diverged run counts at its initial loss); a flat finding's margin shaded; and "
            f"does the smallest size predict the largest\n"
            + "\n".join(f"{m}: {shared_settings(table.maps[m].specs)}" for m in trend_maps(claims) if m in table.maps),
            path),
    }
    drawn = {kind: draw[kind](out / f"{name}_{kind}.png") for kind in table.maps[name].figures}
    return {kind: str(path.relative_to(reports_dir)) for kind, path in drawn.items() if path is not None}
