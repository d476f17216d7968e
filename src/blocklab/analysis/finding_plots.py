"""A map's findings as a figure: one panel per finding, its own quantity (the paired difference its rule decides,
or the value an equivalence test bands) with its interval, on an axis that holds zero (or the band), coloured by
its verdict. What a reader checks a finding's words against (issue 65 item 4; Cumming's "estimation" plots)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from blocklab.analysis.figure_files import plt, save_figure

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


def findings_figure(claims: list, verdicts: dict, title: str, path: Path) -> Path | None:
    """One panel per finding of `claims` whose verdict has an interval: the interval as a bar, its middle as a
    point, zero as a line (an equivalence test's band shaded), the bar coloured by the verdict; a finding without
    an interval (a count of seeds) is listed beside its panel-less verdict in the title of the last panel. None
    when no finding has an interval."""
    import math

    drawable = [c for c in claims if _rows(c, verdicts.get(c.id, {}))]
    if not drawable:
        return None
    columns = 3
    rows = math.ceil(len(drawable) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(11, 1.75 * rows + 0.9), squeeze=False, layout="constrained")
    panels = [ax for row in axes for ax in row]
    for spare in panels[len(drawable):]:
        spare.set_visible(False)
    for ax, claim in zip(panels, drawable):
        verdict = verdicts[claim.id]
        colour = VERDICT_COLOURS.get(verdict["verdict"], "0.45")
        rows_ = _rows(claim, verdict)
        for y, (label, (low, high)) in enumerate(rows_):
            ax.plot([low, high], [y, y], color=colour, lw=3, solid_capstyle="butt")
            ax.plot([(low + high) / 2], [y], "o", color=colour, ms=5)
        ends = [v for _, pair in rows_ for v in pair] + [0.0]
        if claim.rule == "within":
            ax.axvspan(-claim.tolerance, claim.tolerance, color="0.9", zorder=0)
            ends += [-claim.tolerance, claim.tolerance]
        ax.axvline(0, color="0.2", lw=0.8)
        span = max(ends) - min(ends) or 1.0
        ax.set_xlim(min(ends) - 0.08 * span, max(ends) + 0.08 * span)
        ax.set_ylim(-0.7, len(rows_) - 0.3)
        ax.set_yticks(range(len(rows_)), [label for label, _ in rows_], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(textwrap.fill(f"{claim.id.split('.', 1)[1]}: {verdict_words(verdict)}", 44),
                     fontsize=8, color=colour)
        ax.set_xlabel(textwrap.fill(f"{_quantity(claim)}: {_axis_words(claim, verdict)}", 52), fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
    return _saved(fig, title, path)


def _difference_of_two(claim) -> bool:
    """Whether a finding decides one paired difference on an absolute scale: a comparison, or an equivalence test
    of a difference against a number."""
    if claim.rule == "compare":
        return True
    if claim.rule != "within" or claim.relative:
        return False
    try:
        float(claim.expected)
    except (TypeError, ValueError):
        return False
    return True


def _difference_row(claim, verdict: dict, name: str) -> list[str] | None:
    """The two variants of ablation `name` (left, right) that `differences_figure` draws `claim` as a row of, if
    it draws it: a finding over two of its variants whose verdict has an interval, one paired difference."""
    if not reads_map(claim, name) or not verdict.get("interval") or not _difference_of_two(claim):
        return None
    return _pair(claim, name)


def differences_figure(claims: list, verdicts: dict, labels: dict[str, str], name: str, title: str,
                       path: Path) -> Path | None:
    """Every finding that compares two variants of ablation `name`, paired by seed, as a row on one axis: "A → B",
    B's value minus A's (the finding's left minus its right) with its interval, coloured by its verdict; an
    equivalence test's band shaded on its row; zero, no change, a line. None when no finding compares two."""
    rows = [(claim, pair) for claim in claims if (pair := _difference_row(claim, verdicts.get(claim.id, {}), name))]
    if not rows:
        return None
    quantities = list(dict.fromkeys(_quantity(claim) for claim, _ in rows))
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 2.2), layout="constrained")
    ends = [0.0]
    for y, (claim, (left, right)) in enumerate(rows):
        verdict = verdicts[claim.id]
        shift = float(claim.expected) if claim.rule == "within" else 0.0  # value - expected, back to the value
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
    return _saved(fig, title, path)


FINDINGS_KIND = "findings"  # the figure kind that draws each finding's own quantity with its interval


def figure_of(claim, verdict: dict, figures: dict[str, tuple[str, ...]], ablations: set[str]) -> str | None:
    """The findings figure that draws `claim` (its file name in reports/figures), if any: the first ablation or map
    it reads whose figure kinds (`figures`, by name) hold `findings` and that draws it there, as `differences_figure`
    (an ablation's, `ablations`) or `findings_figure` (a map's) would."""
    for name, kinds in figures.items():
        if FINDINGS_KIND not in kinds or not reads_map(claim, name):
            continue
        drawn = _difference_row(claim, verdict, name) if name in ablations else _rows(claim, verdict)
        if drawn:
            return f"{name}_{FINDINGS_KIND}.png"
    return None


def drawn_in(table, claims: list, verdicts: dict) -> dict[str, str]:
    """{finding: the findings figure that draws it, as reports/summary.md links it (figures/<file>)}, over the
    plan `table` (a RunTable: its ablations' and maps' figure kinds)."""
    figures = {name: entry.figures for name, entry in {**table.ablations, **table.maps}.items()}
    found = {c.id: figure_of(c, verdicts.get(c.id, {}), figures, set(table.ablations)) for c in claims}
    return {cid: f"figures/{name}" for cid, name in found.items() if name}
