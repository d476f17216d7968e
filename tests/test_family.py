"""Family-wise verdicts (blocklab.analysis.claims.family): every finding's p-value agrees with its own verdict,
Holm's adjusted p-values are Holm's, and a finding decided alone but not across the family reads inconclusive
after the correction; the count and the words give both, and `check --strict` reads the corrected verdicts."""

import json
import random

import pytest
from click.testing import CliRunner

from blocklab.analysis.claims import Compare, Evidence, Monotone, Within, check_claims, claims_count, count_in_words
from blocklab.analysis.claims.family import FAMILY_ALPHA, corrected_for_the_family, holm_adjusted
from blocklab.cli import main


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


def test_strict_reads_the_corrected_verdicts_a_finding_failing_only_alone_does_not_count(tmp_path):
    def reports(against: list[float]) -> list[str]:
        base = [2.20, 2.30, 2.10]
        runs = {}
        for name, differences in (("a", against), ("b", [-0.5, -0.52, -0.49]), ("c", [0.03, -0.04, 0.01])):
            for seed, (x, d) in enumerate(zip(base, differences)):
                runs[f"{name}/x/seed{seed}"] = {"val_loss": x}
                runs[f"{name}/y/seed{seed}"] = {"val_loss": round(x + d, 6)}
        (tmp_path / "metrics.json").write_text(json.dumps({"baselines": {}, "runs": runs}))
        compare = "    kind: finding\n    rule: compare\n    left: mean(\"{0}/y\", \"val_loss\")\n    op: \"{1}\"\n" \
                  "    right: mean(\"{0}/x\", \"val_loss\")\n"
        (tmp_path / "claims.yaml").write_text(
            "claims:\n  - id: a_higher\n    claim: y ends above x.\n" + compare.format("a", ">")
            + "  - id: b_lower\n    claim: y ends below x.\n" + compare.format("b", "<")
            + "  - id: c_lower\n    claim: y ends below x.\n" + compare.format("c", "<")
            + "    known_to_fail: \"noise: y - x is 0.03, -0.04 and 0.01\"\n")
        return [f"--metrics={tmp_path / 'metrics.json'}", f"--gradients={tmp_path / 'none.json'}",
                f"--claims={tmp_path / 'claims.yaml'}", f"--out={tmp_path / 'claims.json'}"]

    # y below x on every seed, t = 5.8 on 2 degrees of freedom: p = 0.029, decided alone; Holm's second smallest of
    # three against 0.05 / 2: undecided for the family
    alone = CliRunner().invoke(main, ["check", "--strict", *reports([-0.05, -0.065, -0.035])])
    verdict = json.loads((tmp_path / "claims.json").read_text())["a_higher"]
    assert (verdict["verdict"], verdict["verdict_holm"]) == ("fails", "inconclusive")
    assert alone.exit_code == 0, alone.output
    assert alone.output.startswith("1 findings fail on their own, not after Holm's correction (--strict does not "
                                   "count them):\n  - [fails alone; p 0.0287")
    assert "a_higher" not in alone.output.split("claims marked known_to_fail")[1].split("\n\n")[0]
    # far below on every seed: it fails after the correction too, and --strict counts it
    decided = CliRunner().invoke(main, ["check", "--strict", *reports([-0.3, -0.31, -0.29])])
    assert json.loads((tmp_path / "claims.json").read_text())["a_higher"]["verdict_holm"] == "fails"
    assert decided.exit_code == 1
    assert decided.output.startswith("1 claims fail or are inconclusive:\n  - [fails] a_higher: ")
