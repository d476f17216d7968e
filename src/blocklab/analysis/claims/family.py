"""Family-wise verdicts: the findings are many simultaneous claims, each decided at 5%, so some "holds" are
expected by chance alone. Holm's step-down correction (Holm 1979) across every finding decided by a test keeps
the chance of even one false verdict in the whole family at 5%: beside each finding's own verdict, its verdict
after the correction. A finding decided without a test (single runs' values, lists decided value by value) or
with none possible (one seed) is outside the family and keeps its verdict."""

from __future__ import annotations

from blocklab.analysis.intervals import CONFIDENCE

FAMILY_ALPHA = 1 - CONFIDENCE  # the chance, across the family, of one or more false verdicts


def holm_adjusted(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's adjusted p-values: sorted ascending, the k-th smallest (from 0) of m times m - k, never below
    an earlier one's, at most 1. A hypothesis is rejected at the family's level when its adjusted p is below it."""
    adjusted, running = {}, 0.0
    for k, cid in enumerate(sorted(p_values, key=lambda c: (p_values[c], c))):
        running = max(running, min(1.0, (len(p_values) - k) * p_values[cid]))
        adjusted[cid] = running
    return adjusted


def corrected_for_the_family(verdicts: dict[str, dict]) -> dict[str, dict]:
    """`verdicts` (check_claims') with, for every finding, `p_holm` (its Holm-adjusted p-value across the
    findings with a `p_value`; None outside the family) and `verdict_holm`: its verdict where the adjusted p
    still decides it, else inconclusive."""
    tested = {cid: v["p_value"] for cid, v in verdicts.items()
              if v["kind"] == "finding" and v.get("p_value") is not None}
    adjusted = holm_adjusted(tested)
    for cid, verdict in verdicts.items():
        if verdict["kind"] != "finding":
            continue
        p_holm = adjusted.get(cid)
        verdict["p_holm"] = None if p_holm is None else float(f"{p_holm:.6g}")
        decided = p_holm is None or p_holm < FAMILY_ALPHA
        verdict["verdict_holm"] = verdict["verdict"] if decided or verdict["verdict"] not in ("holds", "fails") \
            else "inconclusive"
    return verdicts


def family_count(verdicts: dict[str, dict]) -> dict[str, int]:
    """How many findings were tested (the family's size) and how many hold and fail after the correction."""
    findings = [v for v in verdicts.values() if v["kind"] == "finding"]
    after = [v.get("verdict_holm", v["verdict"]) for v in findings]
    return {"findings_tested": sum(v.get("p_holm") is not None for v in findings),
            "findings_hold_holm": after.count("holds"), "findings_fail_holm": after.count("fails")}
