"""Trends as a figure: small multiples, one panel per trend finding (claims.yaml's `rule: trend`), its paired effect
at each size with the 95% interval against the training compute on a log axis, zero marked, the fitted slope
drawn through the sizes, the panel coloured by the finding's verdict; and the same as a table for the summary.
Both read the verdicts (reports/claims.json: a trend's `sizes` and slope), as the words beside them do."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from matplotlib.ticker import NullFormatter

from blocklab.analysis.figure_files import plt, save_figure
from blocklab.analysis.finding_plots import TREND_KIND, VERDICT_COLOURS

COLUMNS = 3
QUANTITY_WORDS = {"val_loss": "final validation loss", "lr_sensitivity": "LR sensitivity"}


def trend_claims(claims: list, verdicts: dict) -> list:
    """The trend findings of `claims` whose verdict has its sizes (they ran), in claims.yaml's order."""
    return [c for c in claims if c.kind == "finding" and c.rule == TREND_KIND and verdicts.get(c.id, {}).get("sizes")]


def comparison_words(claim, labels: dict[str, dict[str, str]]) -> str:
    """`scale: post-norm − pre-norm`: the map, and its variants' labels (their names where it has none)."""
    names = labels.get(claim.map, {})
    return f"{claim.map}: {names.get(claim.left, claim.left)} − {names.get(claim.right, claim.right)}"


def _slope_words(claim, verdict: dict) -> str:
    """The slope and its interval, with the interval's confidence where it is not 95% (a flat trend's 90%)."""
    interval = verdict.get("interval")
    shown = "" if not interval else f" [{interval[0]:+.3f}, {interval[1]:+.3f}]"
    return f"{verdict['measured']:+.3f}{shown}" + (" (90%)" if interval and claim.expect == "flat" else "")


def compute_span(verdict: dict) -> float:
    """How many times the largest size's training compute is the smallest's."""
    return verdict["sizes"][-1]["flops"] / verdict["sizes"][0]["flops"]


def _fitted(verdict: dict) -> tuple[list[float], list[float]]:
    """The fitted line at each size: through the effects' mean at the sizes' mean log10 compute, at the slope."""
    logs = [math.log10(s["flops"]) for s in verdict["sizes"]]
    centre = math.fsum(logs) / len(logs)
    level = math.fsum(s["effect"] for s in verdict["sizes"]) / len(logs)
    return logs, [level + verdict["measured"] * (v - centre) for v in logs]


def _panel(ax, claim, verdict: dict, words: str) -> None:
    colour = VERDICT_COLOURS.get(verdict["verdict"], "0.45")
    sizes = verdict["sizes"]
    x = [s["flops"] for s in sizes]
    for xi, size in zip(x, sizes):
        if size["interval"]:
            ax.plot([xi, xi], size["interval"], color=colour, lw=2.5, solid_capstyle="butt")
        ax.plot([xi], [size["effect"]], "o", color=colour, ms=5, mfc="white" if size["untrained"] else colour)
        ax.annotate(size["size"], (xi, size["effect"]), textcoords="offset points", xytext=(6, -3), fontsize=7,
                    color="0.35")
    logs, line = _fitted(verdict)
    ax.plot(x, line, "--", color=colour, lw=1)
    if claim.expect == "flat":  # every line through the same point whose slope lies within the margin
        centre, level = math.fsum(logs) / len(logs), math.fsum(line) / len(line)
        ax.fill_between(x, [level - claim.margin * (v - centre) for v in logs],
                        [level + claim.margin * (v - centre) for v in logs], color="0.9", zorder=0)
    ax.axhline(0, color="0.2", lw=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # the decades only: the minor ticks' labels overlap
    ax.margins(x=0.12)
    ax.set_title(f"{textwrap.fill(words, 48)}\nexpected {claim.expect}: {verdict['verdict']}\nslope per 10x compute "
                 f"{_slope_words(claim, verdict)}", fontsize=8, color=colour)
    ax.set_xlabel("training FLOPs", fontsize=8)
    ax.set_ylabel(f"Δ {QUANTITY_WORDS[claim.quantity]}", fontsize=8)
    ax.tick_params(labelsize=7)


def trend_figure(claims: list, verdicts: dict, labels: dict[str, dict[str, str]], title: str, path: Path
                 ) -> Path | None:
    """Every trend finding of `claims` that has run, a panel each (see the module's docstring); None when none
    has. `labels`: each map's variants' labels."""
    drawable = trend_claims(claims, verdicts)
    if not drawable:
        return None
    rows = math.ceil(len(drawable) / COLUMNS)
    fig, axes = plt.subplots(rows, COLUMNS, figsize=(11, 3.3 * rows + 1.0), layout="constrained", squeeze=False)
    for ax, claim in zip(axes.flat, drawable):
        _panel(ax, claim, verdicts[claim.id], comparison_words(claim, labels))
    for ax in list(axes.flat)[len(drawable):]:
        ax.set_visible(False)
    fig.suptitle("\n".join(textwrap.fill(line, 120) for line in title.split("\n")), fontsize=10)
    return save_figure(fig, path, dpi=100)


def trend_table(claims: list, verdicts: dict, labels: dict[str, dict[str, str]]) -> str:
    """The trend findings as a markdown table: the comparison, its effect at each size (mean and 95% interval, the
    compute beside it), the slope per tenfold compute with its interval, what was expected and the verdict."""
    lines = ["| comparison | effect at each size, 95% interval (training FLOPs) | compute, largest over smallest | "
             "slope per tenfold compute, 95% interval | expected | verdict |", "|---|---|---|---|---|---|"]
    for claim in trend_claims(claims, verdicts):
        verdict = verdicts[claim.id]
        cells = [f"{s['size']}: {s['effect']:+.3f}" + (f" [{s['interval'][0]:+.3f}, {s['interval'][1]:+.3f}]"
                                                        if s["interval"] else "") + f" ({s['flops']:.1e})"
                 for s in verdict["sizes"]]
        lines.append(f"| {comparison_words(claim, labels)} ({QUANTITY_WORDS[claim.quantity]}) | {'; '.join(cells)} | "
                     f"{compute_span(verdict):.0f}x | {_slope_words(claim, verdict)} | {verdict['expected']} | "
                     f"{verdict['verdict']} |")
    return "\n".join(lines)
