"""The verdicts in words: the count, the claims that fail first with their numbers, the marked ones, and the
summary's section (Markdown)."""

from __future__ import annotations

from blocklab.analysis.claims.rules import CLAIMS_FILE, claims_count
from blocklab.analysis.intervals import MAX_SEEDS


def count_in_words(count: dict[str, int]) -> str:
    """"N of M findings hold, K inconclusive, J not comparable; C of C invariants hold; with Holm's correction
    of the T tested, N' findings hold and F' fail" (family.py)."""
    extra = "".join(f", {count[f'findings_{key}']} {word}" for key, word in
                    (("fail", "fail"), ("inconclusive", "inconclusive"), ("not_comparable", "not comparable"))
                    if count[f"findings_{key}"])
    family = (f"; with Holm's correction of the {count['findings_tested']} tested, "
              f"{count['findings_hold_holm']} findings hold and {count['findings_fail_holm']} fail"
              if count.get("findings_tested") else "")
    not_run = f"; {count['not_run_yet']} claims not run yet" if count.get("not_run_yet") else ""
    return (f"{count['findings_hold']} of {count['findings_total']} findings hold{extra}; "
            f"{count['invariants_hold']} of {count['invariants_total']} invariants hold{family}{not_run}")


def _in_words(cid: str, words: dict[str, str], verdict: dict) -> str:
    text = (f"{cid}: {words.get(cid, '(not in the claims file)')} Measured {verdict['measured']}, "
            f"expected {verdict['expected']}")
    if verdict.get("interval") is not None:
        text += f"; {verdict.get('note') or 'interval'} {verdict['interval']} ({verdict['statistic']})"
    if verdict.get("verdict") == "inconclusive":
        needed = verdict.get("seeds_needed")
        text += (f"; about {needed} seeds would decide it at the spread measured" if needed else
                 f"; at the spread measured not even {MAX_SEEDS} seeds would decide it")
    return text + "."


def _undecided(verdict: dict) -> bool:
    """Neither holds nor is beside the point: fails, or is inconclusive."""
    return verdict.get("verdict", "holds" if verdict["ok"] else "fails") in ("fails", "inconclusive")


def against_the_defaults(verdict: dict) -> bool:
    """What `check --strict` counts against the defaults, on the corrected verdicts: a finding in Holm's family
    (family.py) that fails after the correction, or that is inconclusive even on its own; any other claim that
    fails or is inconclusive. A finding decided on its own but not after the correction is not evidence against
    it (nor for it): the chance that one of the family's many tests decides by chance is what the correction
    holds at 5%."""
    if verdict.get("p_holm") is not None:
        return verdict["verdict_holm"] == "fails" or verdict["verdict"] == "inconclusive"
    return _undecided(verdict)


def failing_in_words(claims: list, verdicts: dict[str, dict]) -> list[str]:
    """One line per claim `check --strict` counts against the defaults (against_the_defaults) that is not marked
    `known_to_fail`: what it says, what was measured, what was expected, with its interval. `verdicts` may be
    read back from reports/claims.json; the words come from `claims`."""
    words = {c.id: c.claim for c in claims}
    marked = {c.id for c in claims if c.known_to_fail}
    return [f"[{v.get('verdict', 'fails')}] {_in_words(cid, words, v)}" for cid, v in verdicts.items()
            if against_the_defaults(v) and cid not in marked]


def decided_alone_in_words(claims: list, verdicts: dict[str, dict]) -> list[str]:
    """One line per finding, not marked `known_to_fail`, that fails on its own but is inconclusive after Holm's
    correction: `check --strict` does not count it (against_the_defaults), and says so."""
    words = {c.id: c.claim for c in claims}
    marked = {c.id for c in claims if c.known_to_fail}
    return [f"[fails alone; p {v['p_value']}, after Holm {v['p_holm']}] {_in_words(cid, words, v)}"
            for cid, v in verdicts.items() if cid not in marked and v.get("p_holm") is not None
            and v["verdict"] == "fails" and v["verdict_holm"] != "fails"]


def holding_alone(verdicts: dict[str, dict]) -> int:
    """How many findings hold on their own and are inconclusive after Holm's correction."""
    return sum(v.get("p_holm") is not None and v["verdict"] == "holds" and v["verdict_holm"] != "holds"
               for v in verdicts.values())


def marked_in_words(claims: list, verdicts: dict[str, dict]) -> tuple[list[str], list[str]]:
    """The claims marked `known_to_fail`: (those that fail or are inconclusive, with why; those that now
    hold, to unmark)."""
    words = {c.id: c.claim for c in claims}
    failing, holding = [], []
    for claim in claims:
        if claim.known_to_fail and claim.id in verdicts:
            verdict = verdicts[claim.id]
            if verdict["ok"]:
                holding.append(_in_words(claim.id, words, verdict))
            elif _undecided(verdict):
                failing.append(f"[{verdict.get('verdict', 'fails')}] {_in_words(claim.id, words, verdict)} "
                               f"Known to fail: {claim.known_to_fail}")
    return failing, holding


def verdicts_markdown(claims: list, verdicts: dict[str, dict], figures: dict[str, str] | None = None) -> str:
    """The verdicts as a section of reports/summary.md: those that fail or are inconclusive first, in
    words, then every finding (with the figure that draws it, `figures` by id, a path relative to the summary)
    and every check."""
    from tabulate import tabulate

    count = claims_count(verdicts)
    failing = failing_in_words(claims, verdicts)
    known, now_hold = marked_in_words(claims, verdicts)
    lines = [f"## Claims: {count_in_words(count)}\n",
             "A *finding* depends on training results and carries its uncertainty: over seed means it holds only "
             "when its whole 95% interval (paired by seed where the variants share their seeds) lies on the "
             "claimed side, and is *inconclusive* otherwise. Beside it, its verdict after Holm's correction "
             "across every finding decided by a test, which holds the chance of even one false verdict among them "
             "at 5%. A *check* is deterministic arithmetic or an untrained probe.\n"]
    if failing:
        lines += [f"**Fail or are inconclusive ({len(failing)}):**\n", *(f"- {line}" for line in failing), ""]
    if alone := decided_alone_in_words(claims, verdicts):
        lines += [f"**Fail on their own, not after Holm's correction ({len(alone)}):**\n",
                  *(f"- {line}" for line in alone), ""]
    if known:
        lines += [f"**Known not to reproduce here ({len(known)}), marked `known_to_fail` in `{CLAIMS_FILE}`:**\n",
                  *(f"- {line}" for line in known), ""]
    if now_hold:
        lines += [f"**Marked `known_to_fail` but hold on this run ({len(now_hold)}):**\n",
                  *(f"- {line}" for line in now_hold), ""]
    not_comparable = [cid for cid, v in verdicts.items() if v.get("verdict") == "not comparable"]
    if not_comparable:
        lines += [f"**Not comparable on this corpus ({len(not_comparable)}):** they read figures published on "
                  f"another corpus: {', '.join(not_comparable)}.\n"]
    if not failing and not known:
        lines.append(f"Every finding in `{CLAIMS_FILE}` that applies to this corpus holds on this run.\n")
    words = {c.id: c.claim for c in claims}
    for kind, title in (("finding", "Every finding"), ("invariant", "Every invariant")):
        finding = kind == "finding"
        rows = [(cid, v.get("verdict", "holds" if v["ok"] else "fails") if v["ok"] else
                 f"**{v.get('verdict', 'fails')}**", *([v["verdict_holm"] if v.get("p_holm") is not None else "–"]
                                                       if finding else []),
                 v["measured"], v["expected"], "" if v.get("interval") is None else v["interval"],
                 *([f"[figure]({(figures or {})[cid]})" if cid in (figures or {}) else "–"] if finding else []),
                 words.get(cid, ""))
                for cid, v in verdicts.items() if v.get("kind", "finding") == kind]
        if rows:
            headers = ["claim", "verdict", *(["after Holm"] if finding else []), "measured", "expected",
                       "interval", *(["drawn in"] if finding else []), "in words"]
            table = tabulate(rows, headers=headers, tablefmt="pipe")
            lines.append(f"<details><summary>{title}</summary>\n\n{table}\n\n</details>\n")
    return "\n".join(lines)
