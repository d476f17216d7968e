"""Trends as a figure: small multiples, one panel per trend finding (claims.yaml's `rule: trend`), its paired effect
at each size with the 95% interval against the training compute on a log axis, zero marked, the fitted slope
drawn through the sizes, the panel coloured by the finding's verdict; after them a panel for each finding on
whether the smallest size predicts the largest (the share of comparisons whose verdict agrees at both ends, the
blocks' ranks at both ends); and the trends as a table for the summary. Both read the verdicts (reports/claims.json:
a trend's `sizes` and slope, an agreement's `agreements`, a ranking's `ranking`), as the words beside them do."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from matplotlib.ticker import NullFormatter

from blocklab.analysis.figure_files import plt, save_figure
from blocklab.analysis.finding_plots import TRANSFER_RULES, TREND_KIND, VERDICT_COLOURS

COLUMNS = 3
QUANTITY_WORDS = {"val_loss": "final validation loss", "lr_sensitivity": "LR sensitivity"}


def trend_claims(claims: list, verdicts: dict) -> list:
    """The trend findings of `claims` whose verdict has its sizes (they ran), in claims.yaml's order."""
    return [c for c in claims if c.kind == "finding" and c.rule == TREND_KIND and verdicts.get(c.id, {}).get("sizes")]


def transfer_claims(claims: list, verdicts: dict) -> list:
    """The findings of `claims` on whether the smallest size predicts the largest (blocklab.analysis.claims.transfer)
    that have run, in claims.yaml's order."""
    return [c for c in claims if c.kind == "finding" and c.rule in TRANSFER_RULES
            and (verdicts.get(c.id, {}).get("agreements") or verdicts.get(c.id, {}).get("ranking"))]


def trend_maps(claims: list) -> list[str]:
    """The maps the trend findings of `claims` read, in claims.yaml's order."""
    return list(dict.fromkeys(c.map for c in claims if c.kind == "finding" and c.rule == TREND_KIND))


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


def _agreement_panel(ax, claim, verdict: dict) -> None:
    """The share of comparisons whose smallest size's verdict is the largest's, its exact 95% interval, on the
    whole range of shares, the share it is tested against marked."""
    colour = VERDICT_COLOURS.get(verdict["verdict"], "0.45")
    agreeing = sum(a["agrees"] for a in verdict["agreements"])
    ax.plot(verdict["interval"], [0, 0], color=colour, lw=3, solid_capstyle="butt")
    ax.plot([verdict["measured"]], [0], "o", color=colour, ms=6)
    ax.axvline(claim.than, color="0.2", lw=0.8, ls="--")
    ax.annotate(f"tested against {claim.than:g}", (claim.than, 0.6), fontsize=7, color="0.35", ha="center")
    differing = [a["comparison"].split(".", 1)[-1] for a in verdict["agreements"] if not a["agrees"]]
    ax.annotate("\n".join(["differ at the ends:", *differing]) if differing else "none differ", (0.02, -0.9),
                fontsize=6.5, color="0.35", va="bottom", bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    ax.set(xlim=(0, 1), ylim=(-1, 1), yticks=[])
    ax.set_title(f"does the smallest size decide as the largest?\n{agreeing} of {len(verdict['agreements'])} "
                 f"comparisons: {verdict['verdict']}\nshare {verdict['measured']:.2f} "
                 f"[{verdict['interval'][0]:.2f}, {verdict['interval'][1]:.2f}]", fontsize=8, color=colour)
    ax.set_xlabel("share of comparisons with the same verdict at both ends", fontsize=8)
    ax.tick_params(labelsize=7)


def _ranking_panel(ax, claim, verdict: dict, labels: dict[str, str]) -> None:
    """Each variant's rank at the smallest size joined to its rank at the largest (1, the lowest loss, on top)."""
    colour = VERDICT_COLOURS.get(verdict["verdict"], "0.45")
    ranking = verdict["ranking"]
    for variant, found in ranking["variants"].items():
        ends = found["rank_smallest"], found["rank_largest"]
        ax.plot([0, 1], ends, "o-", color=colour, lw=1, ms=4)
        ax.annotate(f"{labels.get(variant, variant)}  {ends[0]}", (0, ends[0]), xytext=(-4, 0),
                    textcoords="offset points", ha="right", va="center", fontsize=6.5)
        ax.annotate(f"{ends[1]}  {labels.get(variant, variant)}", (1, ends[1]), xytext=(4, 0),
                    textcoords="offset points", ha="left", va="center", fontsize=6.5)
    ax.set(xlim=(-1.1, 2.1), xticks=[0, 1], xticklabels=[ranking["smallest"], ranking["largest"]], yticks=[])
    ax.invert_yaxis()
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{claim.map}: do the blocks keep their order?\nrank by final validation loss (1: the lowest) at "
                 f"both ends\nKendall's tau {verdict['measured']:+.2f}, p {verdict['p_value']:.2g}: "
                 f"{verdict['verdict']}", fontsize=8, color=colour)
    ax.tick_params(labelsize=7)


def trend_figure(claims: list, verdicts: dict, labels: dict[str, dict[str, str]], title: str, path: Path
                 ) -> Path | None:
    """Every trend finding of `claims` that has run, a panel each (see the module's docstring), then each finding
    on whether the smallest size predicts the largest; None when no trend finding has run. `labels`: each map's
    variants' labels."""
    drawable = trend_claims(claims, verdicts)
    if not drawable:
        return None
    transfer = transfer_claims(claims, verdicts)
    rows = math.ceil((len(drawable) + len(transfer)) / COLUMNS)
    fig, axes = plt.subplots(rows, COLUMNS, figsize=(11, 3.3 * rows + 1.4), layout="constrained", squeeze=False)
    for ax, claim in zip(axes.flat, drawable):
        _panel(ax, claim, verdicts[claim.id], comparison_words(claim, labels))
    for ax, claim in zip(list(axes.flat)[len(drawable):], transfer):
        if claim.rule == "agreement":
            _agreement_panel(ax, claim, verdicts[claim.id])
        else:
            _ranking_panel(ax, claim, verdicts[claim.id], labels.get(claim.map, {}))
    for ax in list(axes.flat)[len(drawable) + len(transfer):]:
        ax.set_visible(False)
    fig.suptitle("\n".join(textwrap.fill(line, 120) for line in title.split("\n")), fontsize=10)
    return save_figure(fig, path, dpi=100)


def agreement_table(claims: list, verdicts: dict, labels: dict[str, dict[str, str]]) -> str:
    """Does the smallest size decide as the largest: each trend comparison's verdict at both ends, from the first
    agreement finding that has run (a markdown table; empty when none has)."""
    agreeing = next((c for c in transfer_claims(claims, verdicts) if c.rule == "agreement"), None)
    if agreeing is None:
        return ""
    trends = {c.id: c for c in claims if c.rule == TREND_KIND}
    lines = ["| comparison | at the smallest size | at the largest size | the same verdict | the same variant lower "
             "on the mean |", "|---|---|---|---|---|"]
    for found in verdicts[agreeing.id]["agreements"]:
        claim = trends.get(found["comparison"])
        name = comparison_words(claim, labels) if claim else found["comparison"]
        lines.append(f"| {name} | {found['smallest']}: {found['at_smallest']} | {found['largest']}: "
                     f"{found['at_largest']} | {'yes' if found['agrees'] else 'no'} | "
                     f"{'yes' if found['same_winner'] else 'no'} |")
    return "\n".join(lines)


def trend_table(claims: list, verdicts: dict, labels: dict[str, dict[str, str]]) -> str:
    """The trend findings as a markdown table: the comparison, its effect at each size (mean and 95% interval, the
    compute beside it), the slope per tenfold compute with its interval, what was expected and the verdict; then,
    where it has run, each comparison's verdict at its smallest and largest size (agreement_table)."""
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
    agreement = agreement_table(claims, verdicts, labels)
    return "\n".join(lines) + (f"\n\nDoes the smallest size decide as the largest? (left lower, right lower: which "
                               f"variant of the comparison ends lower, decided at 95%)\n\n{agreement}" if agreement else "")
