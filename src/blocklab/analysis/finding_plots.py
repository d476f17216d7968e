"""Findings as figures, what a reader checks a finding's words against (Cumming's "estimation" plots). A map's: one
panel per finding, its own quantity (the paired difference its rule decides, or the value an equivalence test bands)
with its interval, on an axis that holds zero (or the band), coloured by its verdict; a finding decided value by
value, its values against their bound. An ablation's: a row per paired difference of two variants on one axis, its
other findings as panels below."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

from blocklab.analysis.claims import bound_of
from blocklab.analysis.figure_files import plt, save_figure

COLUMNS = 3  # of a findings figure's panels
TREND_KIND = "trend"  # a trend finding's rule, and the map figure that draws every one
TRANSFER_RULES = ("agreement", "rank_agreement")  # does the smallest size predict the largest: the trend figure's too
VERDICT_COLOURS = {"holds": "#2a7f3f", "fails": "#b8322a", "inconclusive": "0.45"}
# What a finding's expression reads, in words (a field the runs record): the panel's axis label.
QUANTITY_WORDS = {
    "val_loss": "final validation loss", "val_loss_batches": "validation loss (random batches)",
    "train_loss_last25": "final training loss", "resid_rms_last": "RMS of the stream after the last block",
    "resid_max_abs_last": "largest |h| after the last block", "log_rms_slope": "slope of ln RMS over the blocks",
    "skip_delta_deep": "loss rise when a deep block is skipped", "max_grad_norm": "largest gradient norm",
    "resid_growth": "stream growth, last block over first", "block_cos_deep": "deep blocks' cos(input, output)",
    "attn_logit_max": "largest attention logit", "logit_log_z": "the output's mean log Z",
    "grad_norm": "gradient norm, late over early",
}
_FIELD = re.compile(r'(?:mean|seeds|at|window|std)\("[^"]+"(?:, [0-9]+)*, "(?P<field>[a-z_0-9]+)"\)')
# A quantity a function derives over a map's cells, in words
# the first whose call a finding's rule holds names its quantity (so a call inside another comes after it)
DERIVED_WORDS = {"lr_sensitivity(": "LR sensitivity", "best_lr(": "log10 of the best learning rate",
                 "log10(max_trainable_lr(": "log10 of the largest trainable learning rate",
                 "max_trainable_lr(": "largest trainable learning rate", "untrained(": "seeds that did not train",
                 "lowest(": "final validation loss", "highest(": "final validation loss",
                 "slope_at(": "slope of ln RMS over the blocks at one evaluation"}


def reads_map(claim, name: str) -> bool:
    """Whether `claim` (a finding) reads a cell of map `name` (or a run of ablation `name`)."""
    return claim.kind == "finding" and f'"{name}/' in claim.rule_text()


_RUN = re.compile(r'"(?P<entry>[a-z_0-9]+)/(?P<variant>[a-z_0-9]+)"')


def _pair(claim, name: str) -> list[str] | None:
    """The two variants of ablation `name` a finding's rule compares, left then right; None unless two."""
    variants = list(dict.fromkeys(m["variant"] for m in _RUN.finditer(claim.rule_text()) if m["entry"] == name))
    return variants if len(variants) == 2 else None


def _quantity(claim) -> str:
    """The field a finding's rule reads, in words (the first it names)."""
    rule = claim.rule_text()
    derived = [words for call, words in DERIVED_WORDS.items() if call in rule]
    if derived:
        return derived[0]
    found = _FIELD.search(rule)
    field = found["field"] if found else "train_loss_last25"
    return QUANTITY_WORDS.get(field, field.replace("_", " "))


def _rows(claim, verdict: dict) -> list[tuple[str, list[float]]]:
    """(row label, interval) per interval the verdict holds: one for a comparison, one per step of a monotone."""
    interval = verdict.get("interval")
    if not interval:
        return []
    if isinstance(interval[0], list):
        return [(f"step {i + 1}", step) for i, step in enumerate(interval) if step]
    return [("", interval)]


def _axis_words(claim, verdict: dict) -> str:
    if claim.rule == "within":  # an equivalence holds on its 90% interval; it fails on its 95% one
        confidence = "95%" if verdict.get("verdict") == "fails" else "90%"
        return f"value − expected, {confidence} interval (band ±{claim.tolerance:g})"
    if claim.rule == "monotone":
        return "each value − the one before, 95% interval"
    return f"left − right, 95% interval (claimed: {claim.op} 0)"


def verdict_words(verdict: dict) -> str:
    """A finding's verdict as its figure writes it: its own, marked where known to fail, and where Holm's
    correction across the family changes it, the verdict after it (blocklab.analysis.claims.family)."""
    marked = ", known to fail" if verdict.get("known_to_fail") else ""
    family = verdict.get("verdict_holm")
    after = f"; after Holm {family}" if verdict.get("p_holm") is not None and family != verdict["verdict"] else ""
    return f"{verdict['verdict']}{marked}{after}"


def _saved(fig, title: str, path: Path) -> Path:
    """A findings figure titled with `title`'s lines, each wrapped to the figure's width, saved to `path`."""
    fig.suptitle("\n".join(textwrap.fill(line, 120) for line in title.split("\n")), fontsize=10)
    return save_figure(fig, path, dpi=100)


def _values(verdict: dict) -> list[float]:
    """The values a finding decided without an interval measured (each seed's, or one run's or count's), and
    none when its verdict has an interval or `expected` sets no number to read them against (claims.bound_of)."""
    if verdict.get("interval") or bound_of(verdict.get("expected", "")) is None:
        return []
    measured = verdict.get("measured")
    values = measured if isinstance(measured, list) else [measured]
    return [v for v in values if isinstance(v, (int, float))]


def _panel_drawable(claim, verdict: dict) -> bool:
    """Whether a findings panel draws `claim`: its interval, or its values against the number they are held to (a
    trend finding, and one on whether the smallest size predicts the largest, is drawn in the trend figure instead:
    blocklab.analysis.trend_plots)."""
    return (claim.kind == "finding" and claim.rule not in (TREND_KIND, *TRANSFER_RULES)
            and bool(_rows(claim, verdict) or _values(verdict)))


def _interval_panel(ax, claim, verdict: dict, colour) -> list[float]:
    rows_ = _rows(claim, verdict)
    for y, (label, (low, high)) in enumerate(rows_):
        ax.plot([low, high], [y, y], color=colour, lw=3, solid_capstyle="butt")
        ax.plot([(low + high) / 2], [y], "o", color=colour, ms=5)
    ends = [v for _, pair in rows_ for v in pair] + [0.0]
    if claim.rule == "within":
        ax.axvspan(-claim.tolerance, claim.tolerance, color="0.9", zorder=0)
        ends += [-claim.tolerance, claim.tolerance]
    ax.axvline(0, color="0.2", lw=0.8)
    ax.set_ylim(-0.7, len(rows_) - 0.3)
    ax.set_yticks(range(len(rows_)), [label for label, _ in rows_], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(textwrap.fill(f"{_quantity(claim)}: {_axis_words(claim, verdict)}", 52), fontsize=7)
    return ends


def _values_panel(ax, claim, verdict: dict, colour) -> list[float]:
    """Each value a finding decided value by value, as a point on one row, against what it is held to, shaded:
    the side of its bound (a line) or its band."""
    values = _values(verdict)
    first, second = bound_of(verdict["expected"])
    each = "each " if len(values) > 1 else ""
    ax.plot(values, [0] * len(values), "o", color=colour, ms=5, alpha=0.8, mfc="none" if len(values) > 1 else colour)
    if isinstance(first, str):  # (op, bound): its side shaded as far as the axis reaches
        ends = [*values, second]
        reach = (max(ends) - min(ends) or 1.0) * 2
        ax.axvspan(*((second - reach, second) if first.startswith("<") else (second, second + reach)), color="0.9",
                   zorder=0)
        ax.axvline(second, color="0.2", lw=0.8)
        words = f"claimed: {each}{first} {second:g}"
    else:  # (centre, tolerance)
        ax.axvspan(first - second, first + second, color="0.9", zorder=0)
        ax.axvline(first, color="0.2", lw=0.8)
        ends = [*values, first - second, first + second]
        words = f"claimed: {each}within {first:g} ± {second:g}"
    ax.set_ylim(-0.7, 0.7)
    ax.set_yticks([0], ["every seed" if len(values) > 1 else "one value"], fontsize=7)
    ax.set_xlabel(textwrap.fill(f"{_quantity(claim)}, decided value by value ({words}, shaded)", 52), fontsize=7)
    return ends


def _draw_panels(container, claims: list, verdicts: dict) -> None:
    """One panel per finding of `claims` (each drawable) in a grid of three columns on `container` (a figure or
    a subfigure): its interval, or its values, on an axis that holds zero (or the bound), coloured by its verdict."""
    axes = container.subplots(math.ceil(len(claims) / COLUMNS), COLUMNS, squeeze=False)
    panels = [ax for row in axes for ax in row]
    for spare in panels[len(claims):]:
        spare.set_visible(False)
    for ax, claim in zip(panels, claims):
        verdict = verdicts[claim.id]
        colour = VERDICT_COLOURS.get(verdict["verdict"], "0.45")
        draw = _interval_panel if _rows(claim, verdict) else _values_panel
        ends = draw(ax, claim, verdict, colour)
        span = max(ends) - min(ends) or 1.0
        ax.set_xlim(min(ends) - 0.08 * span, max(ends) + 0.08 * span)
        ax.set_title(textwrap.fill(f"{claim.id.split('.', 1)[-1]}: {verdict_words(verdict)}", 44),
                     fontsize=8, color=colour)
        ax.tick_params(axis="x", labelsize=7)


def _panels_height(count: int) -> float:
    return 1.75 * math.ceil(count / COLUMNS)


def findings_figure(claims: list, verdicts: dict, title: str, path: Path) -> Path | None:
    """One panel per finding of `claims` that a panel draws: its interval as a bar, its middle as a point, zero as
    a line (an equivalence test's band shaded); a finding decided value by value, its values against their bound;
    coloured by the verdict. None when there is none to draw."""
    drawable = [c for c in claims if _panel_drawable(c, verdicts.get(c.id, {}))]
    if not drawable:
        return None
    fig = plt.figure(figsize=(11, _panels_height(len(drawable)) + 0.9), layout="constrained")
    _draw_panels(fig, drawable, verdicts)
    return _saved(fig, title, path)


def _shift(claim) -> float | None:
    """Where a finding that decides one paired difference on an absolute scale puts it: 0 for a comparison, or an
    equivalence test of one variant against another (value - expected is the difference); the number an
    equivalence test of a difference holds it to; None for any other finding."""
    if claim.rule == "compare":
        return 0.0
    if claim.rule != "within" or claim.relative:
        return None
    try:
        return float(claim.expected)
    except (TypeError, ValueError):
        return 0.0 if isinstance(claim.expected, str) and claim.expected.startswith("mean(") else None


def _difference_row(claim, verdict: dict, name: str) -> list[str] | None:
    """The two variants of ablation `name` (left, right) that `differences_figure` draws `claim` as a row of, if
    it draws it: a finding over two of its variants whose verdict has an interval, one paired difference."""
    if not reads_map(claim, name) or not verdict.get("interval") or _shift(claim) is None:
        return None
    return _pair(claim, name)


def _draw_differences(ax, rows: list, verdicts: dict, labels: dict[str, str]) -> None:
    """`rows` ((claim, (left, right)) each) as rows on one axis: B - A with its interval, coloured by its verdict."""
    quantities = list(dict.fromkeys(_quantity(claim) for claim, _ in rows))
    ends = [0.0]
    for y, (claim, (left, right)) in enumerate(rows):
        verdict = verdicts[claim.id]
        shift = _shift(claim)  # value - expected, back to the value
        low, high = (v + shift for v in verdict["interval"])
        colour = VERDICT_COLOURS.get(verdict["verdict"], "0.45")
        if claim.rule == "within":
            ax.fill_betweenx([y - 0.38, y + 0.38], shift - claim.tolerance, shift + claim.tolerance, color="0.88",
                             lw=0, zorder=0)
            ends += [shift - claim.tolerance, shift + claim.tolerance]
        ax.plot([low, high], [y, y], color=colour, lw=3, solid_capstyle="butt")
        ax.plot([(low + high) / 2], [y], "o", color=colour, ms=6)
        ax.annotate(f"{(low + high) / 2:+.3f}", ((low + high) / 2, y), textcoords="offset points", xytext=(0, 6),
                    ha="center", fontsize=7)
        ax.annotate(verdict_words(verdict), (1.01, y), xycoords=("axes fraction", "data"), fontsize=7,
                    color=colour, va="center")
        ends += [low, high]
    ax.axvline(0, color="0.2", lw=0.8)
    span = max(ends) - min(ends) or 1.0
    ax.set_xlim(min(ends) - 0.06 * span, max(ends) + 0.06 * span)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_yticks(range(len(rows)), [f"{labels.get(right, right)} → {labels.get(left, left)}"
                                     for _, (left, right) in rows], fontsize=8)
    ax.set_xlabel(textwrap.fill(f"change in {' / '.join(quantities)} from A to B (B − A, paired by seed): the "
                                f"mean and its 95% interval; 90% where an equivalence test's band is shaded. "
                                f"Left of 0, B is lower", 110), fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title("green: holds; red: fails; grey: inconclusive\n(the verdict on the right, and after Holm's "
                 "correction across every finding where that differs)", fontsize=8)


def differences_figure(claims: list, verdicts: dict, labels: dict[str, str], name: str, title: str,
                       path: Path) -> Path | None:
    """Every finding that compares two variants of ablation `name`, paired by seed, as a row on one axis: "A → B",
    B's value minus A's (the finding's left minus its right) with its interval, coloured by its verdict; an
    equivalence test's band shaded on its row; zero, no change, a line. Below it, a panel for each other finding
    that reads the ablation (a trend, a value against a published figure, a value decided seed by seed), as
    `findings_figure` draws it. None when there is no finding to draw."""
    rows = [(claim, pair) for claim in claims if (pair := _difference_row(claim, verdicts.get(claim.id, {}), name))]
    drawn = {claim.id for claim, _ in rows}
    others = [c for c in claims if c.id not in drawn and reads_map(c, name) and _panel_drawable(c, verdicts.get(c.id, {}))]
    if not rows and not others:
        return None
    heights = [0.42 * len(rows) + 2.2 if rows else 0.0, _panels_height(len(others)) + 0.3 if others else 0.0]
    fig = plt.figure(figsize=(11, sum(heights) + (0.6 if others else 0.0)), layout="constrained")
    parts = fig.subfigures(2, 1, height_ratios=heights) if rows and others else [fig] * 2
    if rows:
        _draw_differences(parts[0].subplots(), rows, verdicts, labels)
    if others:
        _draw_panels(parts[1], others, verdicts)
        if rows:
            parts[1].suptitle("the ablation's other findings, each its own quantity with its interval (or its "
                              "values against their bound)", fontsize=9)
    return _saved(fig, title, path)


FINDINGS_KIND = "findings"  # the figure kind that draws each finding's own quantity with its interval


def figure_of(claim, verdict: dict, figures: dict[str, tuple[str, ...]]) -> str | None:
    """The findings figure that draws `claim` (its file name in reports/figures), if any: the first ablation or map
    it reads whose figure kinds (`figures`, by name) hold `findings`, where a finding a panel draws is drawn (an
    ablation's `differences_figure`: a row, or a panel below; a map's `findings_figure`: a panel). A trend finding
    is drawn in the first map figure of kind `trend`, which draws every one (blocklab.analysis.trend_plots), and so
    is a finding on whether the smallest size predicts the largest."""
    if claim.kind == "finding" and claim.rule in (TREND_KIND, *TRANSFER_RULES):
        return next((f"{name}_{TREND_KIND}.png" for name, kinds in figures.items() if TREND_KIND in kinds), None)
    if not _panel_drawable(claim, verdict):
        return None
    return next((f"{name}_{FINDINGS_KIND}.png" for name, kinds in figures.items()
                 if FINDINGS_KIND in kinds and reads_map(claim, name)), None)


def drawn_in(table, claims: list, verdicts: dict) -> dict[str, str]:
    """{finding: the findings figure that draws it, as reports/summary.md links it (figures/<file>)}, over the
    plan `table` (a RunTable: its ablations' and maps' figure kinds)."""
    figures = {name: entry.figures for name, entry in {**table.ablations, **table.maps}.items()}
    found = {c.id: figure_of(c, verdicts.get(c.id, {}), figures) for c in claims}
    return {cid: f"figures/{name}" for cid, name in found.items() if name}
