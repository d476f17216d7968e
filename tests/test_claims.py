import json

import pytest
from click.testing import CliRunner

from blocklab.claims import (
    Compare, Exact, MissingResult, Monotone, Reports, Spread, Within, check_claims, evaluate, failing_in_words,
    load_claims, verdicts_markdown,
)
from blocklab.cli import main

from conftest import ROOT

METRICS = {
    "baselines": {"unigram": 3.3, "unigram_val": 3.35, "uniform": 4.17},
    "runs": {
        "norm_order/post/seed0": {"train_loss_last25": 3.31, "val_loss": 3.4, "n_params": 310337},
        "norm_order/post/seed1": {"train_loss_last25": 3.29, "val_loss": 3.4, "n_params": 310337},
        "norm_order/pre/seed0": {"train_loss_last25": 2.13, "val_loss": 2.2, "n_params": 310465},
        "norm_order/pre/seed1": {"train_loss_last25": 2.15, "val_loss": 2.2, "n_params": 310465},
    },
}
GRADIENTS = {"pre/with": {"1": 0.0333, "4": 0.044, "12": 0.103}, "pre/without": {"1": 0.0044, "4": 0.0051, "12": 0.0053}}
REPORTS = Reports(METRICS, GRADIENTS)


def verdict(claim) -> bool:
    return claim.check(REPORTS)[0]


def test_expressions_read_runs_seed_means_baselines_and_gradients():
    assert evaluate('loss("norm_order/pre/seed0")', REPORTS) == 2.13
    assert evaluate('mean("norm_order/pre")', REPORTS) == pytest.approx(2.14)
    assert evaluate('seeds("norm_order/post", "val_loss")', REPORTS) == [3.4, 3.4]
    assert evaluate('baseline("unigram") - 0.5', REPORTS) == pytest.approx(2.8)
    assert evaluate('grad("pre/with", 4) / grad("pre/without", 4)', REPORTS) == pytest.approx(0.044 / 0.0051)
    assert evaluate('grads("pre/with")', REPORTS) == [0.0333, 0.044, 0.103]


def test_an_expression_may_not_call_anything_else():
    with pytest.raises(Exception, match="cannot evaluate"):
        evaluate('__import__("os").getcwd()', REPORTS)


@pytest.mark.parametrize("expected, holds", [(2.13, True), (2.125, True), (2.15, False)])
def test_within_tolerance(expected, holds):
    claim = Within(id="a", claim="", rule="within", value='loss("norm_order/pre/seed0")', expected=expected,
                   tolerance=0.01)
    assert verdict(claim) is holds


def test_within_applies_to_every_seed():
    every_seed = dict(id="a", claim="", rule="within", value='seeds("norm_order/post")', expected='baseline("unigram")')
    assert verdict(Within(**every_seed, tolerance=0.05))
    assert not verdict(Within(**every_seed, tolerance=0.005))


def test_within_relative_tolerance():
    assert verdict(Within(id="a", claim="", rule="within", value='grad("pre/with", 1)', expected=0.0333,
                          tolerance=0.01, relative=True))
    assert not verdict(Within(id="a", claim="", rule="within", value='grad("pre/with", 1)', expected=0.0340,
                              tolerance=0.01, relative=True))


def test_relation_between_runs():
    holds = Compare(id="a", claim="", rule="compare", left='seeds("norm_order/pre")', op="<=",
                    right='baseline("unigram") - 0.5')
    fails = Compare(id="a", claim="", rule="compare", left='seeds("norm_order/post")', op="<=",
                    right='baseline("unigram") - 0.5')
    assert verdict(holds) and not verdict(fails)


def test_monotone_trend():
    assert verdict(Monotone(id="a", claim="", rule="monotone", values='grads("pre/with")', direction="increasing"))
    assert not verdict(Monotone(id="a", claim="", rule="monotone", values='grads("pre/with")', direction="decreasing"))
    bumpy = Reports(METRICS, {"pre/with": {"1": 0.03, "4": 0.05, "12": 0.04}})
    assert not Monotone(id="a", claim="", rule="monotone", values='grads("pre/with")',
                        direction="increasing").check(bumpy)[0]


def test_exact_count():
    assert verdict(Exact(id="a", claim="", rule="exact", value='metric("norm_order/pre/seed0", "n_params")',
                         expected=310465))
    assert not verdict(Exact(id="a", claim="", rule="exact", value='metric("norm_order/pre/seed0", "n_params")',
                             expected=310466))


def test_spread_within_a_factor():
    assert verdict(Spread(id="a", claim="", rule="spread", values='grads("pre/without")', max_ratio=1.5))
    assert not verdict(Spread(id="a", claim="", rule="spread", values='grads("pre/with")', max_ratio=1.5))


def test_std_is_the_seed_standard_deviation_and_needs_two_seeds():
    assert evaluate('std("norm_order/pre")', REPORTS) == pytest.approx(0.0141421, abs=1e-6)
    one_seed = Reports({"runs": {"residual/with/seed0": {"train_loss_last25": 2.2}}}, {})
    assert evaluate('std("residual/with")', one_seed) is None


WITH_A_DIVERGED_RUN = Reports({**METRICS, "runs": {**METRICS["runs"], "norm_order/pre/seed1": {
    "train_loss_last25": None, "val_loss": None, "n_params": 310465}}}, GRADIENTS)


@pytest.mark.parametrize("claim", [
    Within(id="a", claim="", rule="within", value='mean("norm_order/pre", "val_loss")', expected=2.2, tolerance=1),
    Within(id="a", claim="", rule="within", value='seeds("norm_order/pre")', expected=2.2, tolerance=1),
    Within(id="a", claim="", rule="within", value=2.2, expected='loss("norm_order/pre/seed1")', tolerance=1),
    Compare(id="a", claim="", rule="compare", left='abs(-loss("norm_order/pre/seed1"))', op="<", right=9),
    Monotone(id="a", claim="", rule="monotone", values=['loss("norm_order/pre/seed0")', 'loss("norm_order/pre/seed1")'],
             direction="increasing"),
    Exact(id="a", claim="", rule="exact", value='loss("norm_order/pre/seed1")', expected=2.2),
    Spread(id="a", claim="", rule="spread", values='seeds("norm_order/pre")', max_ratio=9),
], ids=["within-mean", "within-seeds", "within-expected", "compare", "monotone", "exact", "spread"])
def test_a_claim_over_a_value_a_run_did_not_record_fails_and_does_not_raise(claim):
    ok, measured, _ = claim.check(WITH_A_DIVERGED_RUN)
    assert ok is False
    verdicts = check_claims([claim], WITH_A_DIVERGED_RUN)
    assert failing_in_words([claim], verdicts)[0].startswith("a: ")


def test_a_missing_run_is_an_error_naming_the_run_not_a_failed_claim():
    claim = Within(id="a", claim="", rule="within", value='loss("norm_order/gone/seed0")', expected=1, tolerance=1)
    with pytest.raises(MissingResult, match="run 'norm_order/gone/seed0' is not in reports/metrics.json"):
        check_claims([claim], REPORTS)


def test_the_repository_claims_file_is_valid_and_covers_table_a_and_b():
    claims = load_claims(ROOT / "claims.yaml")
    ids = {c.id for c in claims}
    assert sum(i.startswith("table_a.") for i in ids) == 8
    assert sum(i.startswith("table_b.") for i in ids) == 8


def write_reports(tmp_path, metrics, gradients=GRADIENTS):
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "gradients.json").write_text(json.dumps(gradients))
    (tmp_path / "claims.yaml").write_text(
        "claims:\n"
        "  - id: post_collapses\n"
        "    claim: Post-norm collapses on every seed.\n"
        "    rule: within\n"
        "    value: seeds(\"norm_order/post\")\n"
        "    expected: baseline(\"unigram\")\n"
        "    tolerance: 0.05\n"
        "  - id: pre_learns\n"
        "    claim: Pre-norm learns.\n"
        "    rule: compare\n"
        "    left: mean(\"norm_order/pre\")\n"
        "    op: \"<\"\n"
        "    right: 3\n"
    )
    return [f"--{name}={tmp_path / f'{name}.json'}" for name in ("metrics", "gradients")] + [
        f"--claims={tmp_path / 'claims.yaml'}", f"--out={tmp_path / 'claims.json'}"]


def test_check_passes_and_writes_the_verdicts(tmp_path):
    result = CliRunner().invoke(main, ["check", *write_reports(tmp_path, METRICS)])
    assert result.exit_code == 0, result.output
    assert "2 of 2 claims hold" in result.output
    written = json.loads((tmp_path / "claims.json").read_text())
    assert written["post_collapses"] == {"ok": True, "measured": [3.31, 3.29], "expected": "3.3 ± 0.05"}
    assert list(written) == ["post_collapses", "pre_learns"]  # in the claims file's order
    assert "do not hold" not in result.output


def test_a_failing_claim_is_recorded_listed_first_in_words_and_exits_0(tmp_path):
    broken = json.loads(json.dumps(METRICS))
    broken["runs"]["norm_order/post/seed1"]["train_loss_last25"] = 2.2  # no longer collapsed
    result = CliRunner().invoke(main, ["check", *write_reports(tmp_path, broken)])
    assert result.exit_code == 0, result.output
    first_lines = result.output.splitlines()[:2]
    assert first_lines[0] == "1 of 2 claims do not hold:"
    assert first_lines[1] == ("  - post_collapses: Post-norm collapses on every seed. Measured [3.31, 2.2], "
                              "expected 3.3 ± 0.05.")
    assert "1 of 2 claims hold" in result.output
    assert json.loads((tmp_path / "claims.json").read_text())["post_collapses"]["ok"] is False
    assert json.loads((tmp_path / "claims_count.json").read_text()) == {"claims_hold": 1, "claims_total": 2}


def test_check_strict_exits_1_when_a_claim_fails_and_0_when_all_hold(tmp_path):
    broken = json.loads(json.dumps(METRICS))
    broken["runs"]["norm_order/post/seed1"]["train_loss_last25"] = 2.2
    assert CliRunner().invoke(main, ["check", "--strict", *write_reports(tmp_path, broken)]).exit_code == 1
    assert CliRunner().invoke(main, ["check", "--strict", *write_reports(tmp_path, METRICS)]).exit_code == 0


def test_a_malformed_claims_file_is_a_broken_pipeline_exit_2(tmp_path):
    args = write_reports(tmp_path, METRICS)
    (tmp_path / "claims.yaml").write_text("claims:\n  - id: x\n    claim: no rule\n")
    result = CliRunner().invoke(main, ["check", *args])
    assert result.exit_code == 2 and "not a valid claims file" in result.output


@pytest.mark.parametrize("strict", [[], ["--strict"]], ids=["default", "strict"])
def test_a_malformed_expression_in_the_claims_file_is_a_broken_pipeline_exit_2_not_a_failing_claim(tmp_path, strict):
    args = write_reports(tmp_path, METRICS)
    claims = (tmp_path / "claims.yaml").read_text().replace('left: mean("norm_order/pre")', 'left: maen("norm_order/pre")')
    (tmp_path / "claims.yaml").write_text(claims)
    result = CliRunner().invoke(main, ["check", *strict, *args])
    assert result.exit_code == 2, result.output
    assert "cannot evaluate 'maen(" in result.output and "mean" in result.output


def test_the_summary_lists_the_failing_claims_first_in_words():
    claims = [Within(id="post_collapses", claim="Post-norm collapses.", rule="within", value='seeds("norm_order/post")',
                     expected='baseline("unigram")', tolerance=0.05),
              Compare(id="pre_learns", claim="Pre-norm learns.", rule="compare", left='mean("norm_order/pre")', op="<",
                      right=1)]
    text = verdicts_markdown(claims, check_claims(claims, REPORTS))
    assert text.startswith("## Claims: 1 of 2 hold\n")
    assert text.index("- pre_learns: Pre-norm learns. Measured 2.14, expected < 1.") < text.index("| post_collapses")


def test_check_with_a_run_missing_is_an_error_exit_2_naming_the_run(tmp_path):
    incomplete = json.loads(json.dumps(METRICS))
    del incomplete["runs"]["norm_order/pre/seed0"]
    del incomplete["runs"]["norm_order/pre/seed1"]
    result = CliRunner().invoke(main, ["check", *write_reports(tmp_path, incomplete)])
    assert result.exit_code == 2
    assert "reports are incomplete" in result.output and "norm_order/pre" in result.output


def marked_reports(tmp_path, metrics, mark_post: bool):
    args = write_reports(tmp_path, metrics)
    claims = (tmp_path / "claims.yaml").read_text()
    if mark_post:
        claims = claims.replace("    tolerance: 0.05\n", "    tolerance: 0.05\n    known_to_fail: \"measured 2.2 on seed 1 (why)\"\n")
    (tmp_path / "claims.yaml").write_text(claims)
    return args


def test_a_failing_claim_marked_known_to_fail_is_recorded_and_passes_strict_an_unmarked_one_does_not(tmp_path):
    broken = json.loads(json.dumps(METRICS))
    broken["runs"]["norm_order/post/seed1"]["train_loss_last25"] = 2.2
    marked = CliRunner().invoke(main, ["check", "--strict", *marked_reports(tmp_path, broken, mark_post=True)])
    assert marked.exit_code == 0, marked.output
    assert marked.output.startswith("1 claims marked known_to_fail do not hold, as expected:\n"
                                    "  - post_collapses: Post-norm collapses on every seed.")
    assert "Known to fail: measured 2.2 on seed 1 (why)" in marked.output
    assert json.loads((tmp_path / "claims.json").read_text())["post_collapses"]["ok"] is False
    assert json.loads((tmp_path / "claims_count.json").read_text()) == {"claims_hold": 1, "claims_total": 2}
    unmarked = CliRunner().invoke(main, ["check", "--strict", *marked_reports(tmp_path, broken, mark_post=False)])
    assert unmarked.exit_code == 1


def test_a_claim_marked_known_to_fail_that_holds_is_reported(tmp_path):
    result = CliRunner().invoke(main, ["check", "--strict", *marked_reports(tmp_path, METRICS, mark_post=True)])
    assert result.exit_code == 0
    assert result.output.startswith("1 claims marked known_to_fail now hold (remove the mark?):\n  - post_collapses")
    claims = load_claims(tmp_path / "claims.yaml")
    text = verdicts_markdown(claims, check_claims(claims, REPORTS))
    assert "**Marked `known_to_fail` but hold on this run (1):**" in text


def test_every_claim_marked_known_to_fail_is_listed_in_the_readme_with_its_reason():
    readme = (ROOT / "README.md").read_text()
    for claim in load_claims(ROOT / "claims.yaml"):
        if claim.known_to_fail:
            assert claim.id in readme and claim.known_to_fail in readme, claim.id
