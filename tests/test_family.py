"""Family-wise verdicts (blocklab.analysis.claims.family): every finding's p-value agrees with its own verdict,
Holm's adjusted p-values are Holm's, and a finding decided alone but not across the family reads inconclusive
after the correction; the count and the words give both."""

import random

import pytest

from blocklab.analysis.claims import Compare, Evidence, Monotone, Within, check_claims, claims_count, count_in_words
from blocklab.analysis.claims.family import FAMILY_ALPHA, corrected_for_the_family, holm_adjusted


def test_holm_adjusted_p_values_are_holms_step_down():
    # Four hypotheses at 5%: the smallest against 0.05/4, the next against 0.05/3, ...; the third (0.03 > 0.05/2)
    # stops the rejections, and every later one stays too (an adjusted p never falls below an earlier one's).
    adjusted = holm_adjusted({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert adjusted == pytest.approx({"d": 0.02, "a": 0.03, "c": 0.06, "b": 0.06})
    assert holm_adjusted({"only": 0.03}) == {"only": 0.03}  # a family of one is no correction
    assert holm_adjusted({"a": 0.5, "b": 0.9}) == {"a": 1.0, "b": 1.0}  # capped at 1


def seeded_metrics(effects: dict[str, float], spread: float, seeds: int, rng: random.Random) -> dict:
    """Two variants per comparison on the same seeds: the second off the first by `effect` plus noise."""
    runs = {}
    for name, effect in effects.items():
        for seed in range(seeds):
            base = 2.0 + rng.gauss(0, 0.1)
            runs[f"{name}/a/seed{seed}"] = {"val_loss": base}
            runs[f"{name}/b/seed{seed}"] = {"val_loss": base + effect + rng.gauss(0, spread)}
    return {"baselines": {}, "runs": runs}


@pytest.mark.parametrize("seed", range(5))
def test_every_findings_p_value_is_below_5_percent_exactly_when_its_own_verdict_decides_it(seed):
    rng = random.Random(seed)
    effects = {f"c{i}": rng.choice([-1, 1]) * rng.uniform(0, 0.05) for i in range(12)}
    evidence = Evidence(seeded_metrics(effects, 0.003, rng.choice([3, 5]), rng), None)
    claims = []
    for name in effects:
        a, b = f'mean("{name}/a", "val_loss")', f'mean("{name}/b", "val_loss")'
        claims += [Compare(id=f"{name}.lower", claim="", kind="finding", rule="compare", left=b, op="<", right=a),
                   Within(id=f"{name}.same", claim="", kind="finding", rule="within", value=b, expected=a,
                          tolerance=0.02),
                   Monotone(id=f"{name}.rising", claim="", kind="finding", rule="monotone", values=[a, b],
                            direction="increasing")]
    verdicts = check_claims(claims, evidence)
    for cid, v in verdicts.items():
        assert v["p_value"] is not None, cid
        assert (v["p_value"] < FAMILY_ALPHA) == (v["verdict"] in ("holds", "fails")), (cid, v)
        assert v["verdict_holm"] == (v["verdict"] if v["p_holm"] < FAMILY_ALPHA else "inconclusive"), (cid, v)
        assert v["p_holm"] >= v["p_value"]


def test_a_finding_decided_alone_but_not_across_the_family_is_inconclusive_after_holm():
    verdicts = {"strong": {"kind": "finding", "verdict": "holds", "p_value": 0.001},
                "weak": {"kind": "finding", "verdict": "holds", "p_value": 0.03},
                "against": {"kind": "finding", "verdict": "fails", "p_value": 0.02},
                "open": {"kind": "finding", "verdict": "inconclusive", "p_value": 0.4},
                "one_run": {"kind": "finding", "verdict": "holds", "p_value": None},
                "arithmetic": {"kind": "invariant", "verdict": "holds", "p_value": None}}
    corrected = corrected_for_the_family(verdicts)
    assert {cid: v.get("verdict_holm") for cid, v in corrected.items()} == {
        "strong": "holds", "weak": "inconclusive", "against": "inconclusive", "open": "inconclusive",
        "one_run": "holds", "arithmetic": None}  # no test, no correction: its own verdict; an invariant: none
    assert corrected["strong"]["p_holm"] == pytest.approx(0.004) and corrected["one_run"]["p_holm"] is None
    count = claims_count(corrected)
    assert (count["findings_tested"], count["findings_hold"], count["findings_hold_holm"],
            count["findings_fail_holm"]) == (4, 3, 2, 0)
    assert count_in_words(count).endswith("; with Holm's correction of the 4 tested, 2 findings hold and 0 fail")
