import json
import re

import pytest
from click.testing import CliRunner

from blocklab.analysis.claims import (
    Compare, Exact, MissingResult, Monotone, NotRunYet, Evidence, Spread, Within, check_claims, claims_count, count_in_words,
    failing_in_words, value_of,
    load_claims, verdicts_markdown,
)
from blocklab.cli import main
from blocklab.errors import BlocklabError

from conftest import ROOT

METRICS = {
    "baselines": {"unigram": 3.3, "unigram_val": 3.35, "uniform": 4.17},
    "runs": {
        "placement/post/seed0": {"train_loss_last25": 3.31, "val_loss": 3.4, "n_params": 310337},
        "placement/post/seed1": {"train_loss_last25": 3.29, "val_loss": 3.4, "n_params": 310337},
        "placement/pre/seed0": {"train_loss_last25": 2.13, "val_loss": 2.2, "n_params": 310465},
        "placement/pre/seed1": {"train_loss_last25": 2.15, "val_loss": 2.2, "n_params": 310465},
    },
}
GRADIENTS = {"pre/with": {"1": 0.0333, "4": 0.044, "12": 0.103}, "pre/without": {"1": 0.0044, "4": 0.0051, "12": 0.0053}}
EVIDENCE = Evidence(METRICS, GRADIENTS)


def verdict(claim) -> bool:
    return claim.check(EVIDENCE).ok


def test_expressions_read_runs_seed_means_baselines_and_gradients():
    assert value_of('loss("placement/pre/seed0")', EVIDENCE) == 2.13
    assert value_of('mean("placement/pre")', EVIDENCE).estimate().mean == pytest.approx(2.14)
    assert value_of('seeds("placement/post", "val_loss")', EVIDENCE) == [3.4, 3.4]
    assert value_of('baseline("unigram") - 0.5', EVIDENCE) == pytest.approx(2.8)
    assert value_of('grad("pre/with", 4) / grad("pre/without", 4)', EVIDENCE) == pytest.approx(0.044 / 0.0051)
    assert value_of('grads("pre/with")', EVIDENCE) == [0.0333, 0.044, 0.103]


def test_an_expression_may_not_call_anything_else():
    with pytest.raises(Exception, match="cannot evaluate"):
        value_of('__import__("os").getcwd()', EVIDENCE)


@pytest.mark.parametrize("expected, holds", [(2.13, True), (2.125, True), (2.15, False)])
def test_within_tolerance(expected, holds):
    claim = Within(id="a", claim="", kind="finding", rule="within", value='loss("placement/pre/seed0")', expected=expected,
                   tolerance=0.01)
    assert verdict(claim) is holds


def test_within_applies_to_every_seed():
    every_seed = dict(id="a", claim="", kind="finding", rule="within", value='seeds("placement/post")', expected='baseline("unigram")')
    assert verdict(Within(**every_seed, tolerance=0.05))
    assert not verdict(Within(**every_seed, tolerance=0.005))


def test_within_relative_tolerance():
    assert verdict(Within(id="a", claim="", kind="finding", rule="within", value='grad("pre/with", 1)', expected=0.0333,
                          tolerance=0.01, relative=True))
    assert not verdict(Within(id="a", claim="", kind="finding", rule="within", value='grad("pre/with", 1)', expected=0.0340,
                              tolerance=0.01, relative=True))


def test_relation_between_runs():
    holds = Compare(id="a", claim="", kind="finding", rule="compare", left='seeds("placement/pre")', op="<=",
                    right='baseline("unigram") - 0.5')
    fails = Compare(id="a", claim="", kind="finding", rule="compare", left='seeds("placement/post")', op="<=",
                    right='baseline("unigram") - 0.5')
    assert verdict(holds) and not verdict(fails)


def test_monotone_trend():
    assert verdict(Monotone(id="a", claim="", kind="finding", rule="monotone", values='grads("pre/with")', direction="increasing"))
    assert not verdict(Monotone(id="a", claim="", kind="finding", rule="monotone", values='grads("pre/with")', direction="decreasing"))
    bumpy = Evidence(METRICS, {"pre/with": {"1": 0.03, "4": 0.05, "12": 0.04}})
    assert not Monotone(id="a", claim="", kind="finding", rule="monotone", values='grads("pre/with")',
                        direction="increasing").check(bumpy).ok


def test_exact_count():
    assert verdict(Exact(id="a", claim="", kind="finding", rule="exact", value='metric("placement/pre/seed0", "n_params")',
                         expected=310465))
    assert not verdict(Exact(id="a", claim="", kind="finding", rule="exact", value='metric("placement/pre/seed0", "n_params")',
                             expected=310466))


def test_spread_within_a_factor():
    assert verdict(Spread(id="a", claim="", kind="finding", rule="spread", values='grads("pre/without")', max_ratio=1.5))
    assert not verdict(Spread(id="a", claim="", kind="finding", rule="spread", values='grads("pre/with")', max_ratio=1.5))


def test_std_is_the_seed_standard_deviation_and_needs_two_seeds():
    assert value_of('std("placement/pre")', EVIDENCE) == pytest.approx(0.0141421, abs=1e-6)
    one_seed = Evidence({"runs": {"residual/with/seed0": {"train_loss_last25": 2.2}}}, {})
    assert value_of('std("residual/with")', one_seed) is None


WITH_A_DIVERGED_RUN = Evidence({**METRICS, "runs": {**METRICS["runs"], "placement/pre/seed1": {
    "train_loss_last25": None, "val_loss": None, "n_params": 310465}}}, GRADIENTS)


@pytest.mark.parametrize("claim", [
    Within(id="a", claim="", kind="finding", rule="within", value='mean("placement/pre", "val_loss")', expected=2.2, tolerance=1),
    Within(id="a", claim="", kind="finding", rule="within", value='seeds("placement/pre")', expected=2.2, tolerance=1),
    Within(id="a", claim="", kind="finding", rule="within", value=2.2, expected='loss("placement/pre/seed1")', tolerance=1),
    Compare(id="a", claim="", kind="finding", rule="compare", left='abs(-loss("placement/pre/seed1"))', op="<", right=9),
    Monotone(id="a", claim="", kind="finding", rule="monotone", values=['loss("placement/pre/seed0")', 'loss("placement/pre/seed1")'],
             direction="increasing"),
    Exact(id="a", claim="", kind="finding", rule="exact", value='loss("placement/pre/seed1")', expected=2.2),
    Spread(id="a", claim="", kind="finding", rule="spread", values='seeds("placement/pre")', max_ratio=9),
], ids=["within-mean", "within-seeds", "within-expected", "compare", "monotone", "exact", "spread"])
def test_a_claim_over_a_value_a_run_did_not_record_fails_and_does_not_raise(claim):
    assert claim.check(WITH_A_DIVERGED_RUN).verdict == "fails"
    verdicts = check_claims([claim], WITH_A_DIVERGED_RUN)
    assert failing_in_words([claim], verdicts)[0].startswith("[fails] a: ")


def test_a_missing_run_is_an_error_naming_the_run_not_a_failed_claim():
    claim = Within(id="a", claim="", kind="finding", rule="within", value='loss("placement/gone/seed0")', expected=1, tolerance=1)
    with pytest.raises(MissingResult, match="run 'placement/gone/seed0' is not in reports/metrics.json"):
        check_claims([claim], EVIDENCE)


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
        "    kind: finding\n"
        "    rule: within\n"
        "    value: seeds(\"placement/post\")\n"
        "    expected: baseline(\"unigram\")\n"
        "    tolerance: 0.05\n"
        "  - id: pre_learns\n"
        "    claim: Pre-norm learns.\n"
        "    kind: finding\n"
        "    rule: compare\n"
        "    left: mean(\"placement/pre\")\n"
        "    op: \"<\"\n"
        "    right: 3\n"
    )
    return [f"--{name}={tmp_path / f'{name}.json'}" for name in ("metrics", "gradients")] + [
        f"--claims={tmp_path / 'claims.yaml'}", f"--out={tmp_path / 'claims.json'}"]


def test_check_passes_and_writes_the_verdicts(tmp_path):
    result = CliRunner().invoke(main, ["check", *write_reports(tmp_path, METRICS)])
    assert result.exit_code == 0, result.output
    assert "2 of 2 findings hold; 0 of 0 invariants hold" in result.output
    written = json.loads((tmp_path / "claims.json").read_text())
    assert written["post_collapses"] == {"ok": True, "measured": [3.31, 3.29], "expected": "3.3 ± 0.05",
                                         "verdict": "holds", "kind": "finding", "interval": None, "statistic": None,
                                         "seeds_needed": None, "note": None, "known_to_fail": False,
                                         "p_value": None, "p_holm": None, "verdict_holm": "holds"}  # no test made
    lo, hi = written["pre_learns"]["interval"]  # mean of 2.13, 2.15 minus 3, with t(0.975, 1) = 12.7
    assert (lo, hi) == pytest.approx((2.14 - 3 - 12.706 * 0.01, 2.14 - 3 + 12.706 * 0.01), abs=1e-3)
    assert list(written) == ["post_collapses", "pre_learns"]  # in the claims file's order
    assert "do not hold" not in result.output


def test_a_failing_claim_is_recorded_listed_first_in_words_and_exits_0(tmp_path):
    broken = json.loads(json.dumps(METRICS))
    broken["runs"]["placement/post/seed1"]["train_loss_last25"] = 2.2  # no longer collapsed
    result = CliRunner().invoke(main, ["check", *write_reports(tmp_path, broken)])
    assert result.exit_code == 0, result.output
    first_lines = result.output.splitlines()[:2]
    assert first_lines[0] == "1 claims fail or are inconclusive:"
    assert first_lines[1] == ("  - [fails] post_collapses: Post-norm collapses on every seed. Measured [3.31, 2.2], "
                              "expected 3.3 ± 0.05.")
    assert "1 of 2 findings hold, 1 fail; 0 of 0 invariants hold" in result.output
    assert json.loads((tmp_path / "claims.json").read_text())["post_collapses"]["ok"] is False
    assert json.loads((tmp_path / "claims_count.json").read_text()) == {"findings_hold": 1, "findings_inconclusive": 0, "findings_fail": 1, "findings_not_comparable": 0,
        "findings_total": 2, "invariants_hold": 0, "invariants_total": 0, "findings_tested": 1, "findings_hold_holm": 1,
        "findings_fail_holm": 1}


def test_check_strict_exits_1_when_a_claim_fails_and_0_when_all_hold(tmp_path):
    broken = json.loads(json.dumps(METRICS))
    broken["runs"]["placement/post/seed1"]["train_loss_last25"] = 2.2
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
    claims = (tmp_path / "claims.yaml").read_text().replace('left: mean("placement/pre")', 'left: maen("placement/pre")')
    (tmp_path / "claims.yaml").write_text(claims)
    result = CliRunner().invoke(main, ["check", *strict, *args])
    assert result.exit_code == 2, result.output
    assert "cannot evaluate 'maen(" in result.output and "mean" in result.output


def test_the_summary_lists_the_failing_claims_first_in_words():
    claims = [Within(id="post_collapses", claim="Post-norm collapses.", kind="finding", rule="within", value='seeds("placement/post")',
                     expected='baseline("unigram")', tolerance=0.05),
              Compare(id="pre_learns", claim="Pre-norm learns.", kind="finding", rule="compare", left='mean("placement/pre")', op="<",
                      right=1)]
    text = verdicts_markdown(claims, check_claims(claims, EVIDENCE))
    assert text.startswith("## Claims: 1 of 2 findings hold, 1 fail; 0 of 0 invariants hold; with Holm's "
                           "correction of the 1 tested, 1 findings hold and 1 fail\n")
    assert text.index("- [fails] pre_learns: Pre-norm learns. Measured 2.14, expected < 1; interval of left - right") \
        < text.index("| post_collapses")


def test_a_claim_naming_a_run_params_yaml_does_not_plan_is_a_broken_pipeline_exit_2_naming_the_run(tmp_path):
    args = write_reports(tmp_path, METRICS)
    claims = (tmp_path / "claims.yaml").read_text().replace('mean(\"placement/pre\")', 'mean(\"placement/prenorm\")')
    (tmp_path / "claims.yaml").write_text(claims)
    result = CliRunner().invoke(main, ["check", *args])
    assert result.exit_code == 2, result.output
    assert "cannot check the claims" in result.output and "placement/prenorm" in result.output


def test_a_claim_whose_runs_have_not_run_here_is_listed_not_run_yet_with_the_command_that_runs_them(tmp_path):
    """params.yaml plans placement/pre; the reports lack it: the claim over it is not run yet, the other has its
    verdict, and the exit status says whether anything that ran failed."""
    incomplete = json.loads(json.dumps(METRICS))
    del incomplete["runs"]["placement/pre/seed0"]
    del incomplete["runs"]["placement/pre/seed1"]
    result = CliRunner().invoke(main, ["check", "--strict", *write_reports(tmp_path, incomplete)])
    assert result.exit_code == 0, result.output
    assert "1 claims not run yet here; what would run them:" in result.output
    assert "dvc repro  " in result.output and "1 claims: pre_learns" in result.output
    assert "1 of 2 findings hold; 0 of 0 invariants hold; 1 claims not run yet" in result.output
    written = json.loads((tmp_path / "claims.json").read_text())  # --out given: recorded as they are
    assert written["pre_learns"]["verdict"] == "not run yet" and written["pre_learns"]["command"] == "dvc repro"
    assert written["post_collapses"]["verdict"] == "holds"
    broken = json.loads(json.dumps(incomplete))
    broken["runs"]["placement/post/seed1"]["train_loss_last25"] = 2.2
    assert CliRunner().invoke(main, ["check", "--strict", *write_reports(tmp_path, broken)]).exit_code == 1


def test_check_on_a_fresh_clone_gives_every_committed_verdict_from_the_records(tmp_path, monkeypatch):
    """A fresh clone has reports/ with every run's record (reports/runs) and no data/runs: every claim gets its
    committed verdict, those over the runs' curves included, and the verdicts are recorded byte for byte as
    committed."""
    for name in ("params.yaml", "claims.yaml", "reference.yaml"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "reports").mkdir()
    for name in ("metrics.json", "gradients.json"):
        (tmp_path / "reports" / name).write_bytes((ROOT / "reports" / name).read_bytes())
    (tmp_path / "reports/runs").symlink_to(ROOT / "reports/runs")  # the records, as a clone has them
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check"])
    assert result.exit_code == 0, result.output
    assert "not run yet" not in result.output and not (tmp_path / "data").exists()
    curves = [c.id for c in load_claims(ROOT / "claims.yaml")
              if "window(" in str(c.model_dump()) or "at(" in str(c.model_dump())]
    assert curves  # claims that read the runs' curves, from their records
    for name in ("claims.json", "claims_count.json"):
        assert (tmp_path / "reports" / name).read_bytes() == (ROOT / "reports" / name).read_bytes(), name


def marked_reports(tmp_path, metrics, mark_post: bool):
    args = write_reports(tmp_path, metrics)
    claims = (tmp_path / "claims.yaml").read_text()
    if mark_post:
        claims = claims.replace("    tolerance: 0.05\n", "    tolerance: 0.05\n    known_to_fail: \"measured 2.2 on seed 1 (why)\"\n")
    (tmp_path / "claims.yaml").write_text(claims)
    return args


def test_a_failing_claim_marked_known_to_fail_is_recorded_and_passes_strict_an_unmarked_one_does_not(tmp_path):
    broken = json.loads(json.dumps(METRICS))
    broken["runs"]["placement/post/seed1"]["train_loss_last25"] = 2.2
    marked = CliRunner().invoke(main, ["check", "--strict", *marked_reports(tmp_path, broken, mark_post=True)])
    assert marked.exit_code == 0, marked.output
    assert marked.output.startswith("1 claims marked known_to_fail do not hold, as expected:\n"
                                    "  - [fails] post_collapses: Post-norm collapses on every seed.")
    assert "Known to fail: measured 2.2 on seed 1 (why)" in marked.output
    assert json.loads((tmp_path / "claims.json").read_text())["post_collapses"]["ok"] is False
    assert json.loads((tmp_path / "claims_count.json").read_text()) == {"findings_hold": 1, "findings_inconclusive": 0, "findings_fail": 1, "findings_not_comparable": 0,
        "findings_total": 2, "invariants_hold": 0, "invariants_total": 0, "findings_tested": 1, "findings_hold_holm": 1,
        "findings_fail_holm": 1}
    unmarked = CliRunner().invoke(main, ["check", "--strict", *marked_reports(tmp_path, broken, mark_post=False)])
    assert unmarked.exit_code == 1


def test_a_claim_marked_known_to_fail_that_holds_is_reported(tmp_path):
    result = CliRunner().invoke(main, ["check", "--strict", *marked_reports(tmp_path, METRICS, mark_post=True)])
    assert result.exit_code == 0
    assert result.output.startswith("1 claims marked known_to_fail now hold (remove the mark?):\n  - post_collapses")
    claims = load_claims(tmp_path / "claims.yaml")
    text = verdicts_markdown(claims, check_claims(claims, EVIDENCE))
    assert "**Marked `known_to_fail` but hold on this run (1):**" in text


def test_every_claim_marked_known_to_fail_is_listed_in_the_docs_with_its_reason():
    readme = (ROOT / "docs/claims.md").read_text()
    for claim in load_claims(ROOT / "claims.yaml"):
        if claim.known_to_fail:
            assert claim.id in readme and claim.known_to_fail in readme, claim.id


def quoted(value: float) -> set[str]:
    """How a reason may write a measured value: to 3 or 4 decimals, or 3 or 4 significant digits (no sign)."""
    value = abs(value)
    return {f"{value:.3f}", f"{value:.4f}", f"{value:.3g}", f"{value:.4g}"}


def test_every_known_to_fail_reason_quotes_what_the_committed_reports_measured():
    """A reason is typed by hand in claims.yaml, with the numbers it argues from: it must quote its claim's measured
    value as reports/claims.json has it (each value, for a list), so a retrain that moves the value fails here,
    naming the claim, instead of leaving a reason that argues from another run's numbers (the modern ladder's
    rotary rung kept its 5,000-step numbers after the retrain at 3,000)."""
    verdicts = json.loads((ROOT / "reports/claims.json").read_text())
    stale = {}
    for claim in load_claims(ROOT / "claims.yaml"):
        if claim.known_to_fail:
            measured = verdicts[claim.id]["measured"]
            numbers = set(re.findall(r"\d+(?:\.\d+)?", claim.known_to_fail))
            missing = [v for v in (measured if isinstance(measured, list) else [measured]) if not quoted(v) & numbers]
            if missing:
                stale[claim.id] = missing
    assert stale == {}, f"these reasons do not quote the measured values (reports/claims.json): {stale}"


NOISY = {"baselines": METRICS["baselines"], "runs": {
    **{f"a/x/seed{s}": {"train_loss_last25": v} for s, v in enumerate([2.20, 2.30, 2.10])},
    **{f"a/y/seed{s}": {"train_loss_last25": v} for s, v in enumerate([2.15, 2.23, 2.08])}}}


def test_a_comparison_whose_interval_straddles_zero_is_inconclusive_and_says_how_many_seeds_would_decide_it():
    claim = Compare(id="a", claim="", kind="finding", rule="compare", left='mean("a/y")', op="<", right='mean("a/x")')
    found = claim.check(Evidence(NOISY, {}))
    assert found.verdict == "inconclusive" and found.seeds_needed and found.seeds_needed > 3
    lo, hi = found.interval
    assert lo < 0 < hi and found.statistic == "paired t, 3 seeds, 95% interval"


def test_within_is_an_equivalence_test_a_wide_interval_is_not_equivalence():
    close_but_noisy = Within(id="a", claim="", kind="finding", rule="within", value='mean("a/x")', expected=2.2,
                             tolerance=0.05)
    assert close_but_noisy.check(Evidence(NOISY, {})).verdict == "inconclusive"  # mean on target, 90% interval +-0.17
    assert Within(**{**close_but_noisy.model_dump(), "tolerance": 0.2}).check(Evidence(NOISY, {})).verdict == "holds"
    far = Within(**{**close_but_noisy.model_dump(), "expected": 3.5})
    assert far.check(Evidence(NOISY, {})).verdict == "fails"


def test_strict_fails_on_an_inconclusive_finding(tmp_path):
    args = write_reports(tmp_path, NOISY)
    (tmp_path / "claims.yaml").write_text(
        "claims:\n  - id: y_lower\n    claim: y ends lower.\n    kind: finding\n    rule: compare\n"
        "    left: mean(\"a/y\")\n    op: \"<\"\n    right: mean(\"a/x\")\n")
    result = CliRunner().invoke(main, ["check", "--strict", *args])
    assert result.exit_code == 1 and "[inconclusive] y_lower" in result.output
    assert "0 of 1 findings hold, 1 inconclusive" in result.output


REFERENCE = {"table_a": {"corpus": "aaaa", "figures": {"placement/pre/seed0": 2.13}},
             "table_b": {"corpus": None, "figures": {"pre/with/1": 0.0333}}}


@pytest.mark.parametrize("corpus, verdict", [("aaaa", "holds"), ("bbbb", "not comparable")])
def test_a_claim_against_a_figure_published_on_another_corpus_is_not_comparable(corpus, verdict):
    published = Within(id="a", claim="", kind="finding", rule="within", value='loss("placement/pre/seed0")',
                       expected='published("table_a", "placement/pre/seed0")', tolerance=0.01)
    probe = Within(id="b", claim="", kind="invariant", rule="within", value='grad("pre/with", 1)',
                   expected='published("table_b", "pre/with/1")', tolerance=0.01, relative=True)
    verdicts = check_claims([published, probe], Evidence(METRICS, GRADIENTS, REFERENCE, corpus))
    assert verdicts["a"]["verdict"] == verdict
    assert verdicts["b"]["verdict"] == "holds"  # an untrained probe applies on any corpus
    assert claims_count(verdicts)["findings_not_comparable"] == (verdict == "not comparable")
    assert not failing_in_words([published, probe], verdicts)


def test_findings_and_checks_are_counted_apart():
    claims = [Exact(id="count", claim="", kind="invariant", rule="exact", value='metric("placement/pre/seed0", "n_params")',
                    expected=310465),
              Compare(id="learns", claim="", kind="finding", rule="compare", left='seeds("placement/pre")', op="<",
                      right=3)]
    count = claims_count(check_claims(claims, EVIDENCE))
    assert count == {"findings_hold": 1, "findings_inconclusive": 0, "findings_fail": 0, "findings_not_comparable": 0,
                     "findings_total": 1, "invariants_hold": 1, "invariants_total": 1, "findings_tested": 0,
                     "findings_hold_holm": 1, "findings_fail_holm": 0}
    assert count_in_words(count) == "1 of 1 findings hold; 1 of 1 invariants hold"


def _curves(tmp_path, losses: dict[str, list[list[float]]]) -> Evidence:
    """Runs of variants `x/<name>` whose curve.csv has the training losses given, one list per seed."""
    runs = {}
    for name, per_seed in losses.items():
        for seed, values in enumerate(per_seed):
            folder = tmp_path / "runs" / "x" / name / f"seed{seed}"
            folder.mkdir(parents=True)
            rows = [f"{step},{loss},1.0,0.001,{'' if step % 2 else loss + 0.1}" for step, loss in enumerate(values, 1)]
            (folder / "curve.csv").write_text("step,loss,grad_norm,lr,val_loss\n" + "\n".join(rows) + "\n")
            runs[f"x/{name}/seed{seed}"] = {"train_loss_last25": values[-1]}
    return Evidence({"runs": runs}, {}, runs_dir=tmp_path / "runs")


def test_window_and_at_read_a_curve_per_seed_and_pair_variants_by_seed(tmp_path):
    reports = _curves(tmp_path, {"pre": [[3.0, 2.0, 1.0, 1.0], [3.2, 2.2, 1.2, 1.0]],
                                 "post": [[3.5, 2.5, 1.1, 1.0], [3.6, 2.6, 1.3, 1.1]]})
    assert value_of('window("x/pre", 1, 2)', reports).values == pytest.approx({0: 2.5, 1: 2.7})
    assert value_of('at("x/pre", 2)', reports).values == pytest.approx({0: 2.1, 1: 2.3})  # val_loss at step 2
    early = value_of('window("x/post", 1, 2) - window("x/pre", 1, 2)', reports)
    assert early.paired and early.values == pytest.approx({0: 0.5, 1: 0.4})
    claim = Compare(id="a", claim="", kind="finding", rule="compare", op=">", right=0,
                    left='window("x/post", 1, 2) - window("x/pre", 1, 2)')
    assert claim.check(reports).verdict == "inconclusive"  # 0.5 and 0.4: two seeds, t(0.975, 1) = 12.7
    three = _curves(tmp_path / "3", {"pre": [[3.0, 2.0], [3.2, 2.2], [3.1, 2.1]],
                                     "post": [[3.5, 2.5], [3.6, 2.7], [3.6, 2.5]]})
    assert claim.check(three).verdict == "holds"  # 0.5, 0.45, 0.45


def test_a_curve_window_with_no_step_or_no_curve_is_a_broken_pipeline_not_a_verdict(tmp_path):
    reports = _curves(tmp_path, {"pre": [[3.0, 2.0]]})
    with pytest.raises(MissingResult, match="no 'loss' at the steps asked for"):
        value_of('window("x/pre", 10, 20)', reports)
    with pytest.raises(MissingResult, match="has no curve"):
        value_of('window("x/pre", 1, 2)', Evidence({"runs": {"x/pre/seed0": {"train_loss_last25": 2.0}}}, {}))
    planned = Evidence({"runs": {"x/pre/seed0": {"train_loss_last25": 2.0}}}, {}, planned={"x/pre/seed0": "train_x"})
    with pytest.raises(NotRunYet, match="its curve is not here") as raised:  # planned but not run here: not broken
        value_of('window("x/pre", 1, 2)', planned)
    assert raised.value.command == "dvc repro train_x"


def test_a_claim_of_the_former_kind_check_reads_as_an_invariant_with_one_notice(tmp_path, capfd):
    """`check` is the command; the deterministic kind of claim is `invariant`, and a claims file written before the
    rename still reads."""
    from blocklab.analysis.claims import rules

    rules._said.clear()
    written = [Within(id=f"p{i}", claim="", kind="check", rule="within", value=1.0, expected=1.0, tolerance=0.1)
               for i in range(2)]
    assert [claim.kind for claim in written] == ["invariant", "invariant"]
    assert capfd.readouterr().err.count("kind `check` is now `invariant`") == 1


def test_a_claims_words_are_written_from_the_settings_its_runs_train_with(tmp_path):
    """No claim restates a value a run's setting holds: `{<run>:<setting>}` is written from the resolved plan, so
    after `dvc exp run -S ablations.placement.train.lr=0.003` the finding says 3e-3, not the 1e-2 it was written at."""
    import yaml

    from blocklab.analysis.run_table import RunTable
    from blocklab.params.schema import parse_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    words = {c.id: c.claim for c in load_claims(ROOT / "claims.yaml", RunTable.of(parse_params(raw)))}
    assert "at lr 1e-2 collapses" in words["collapse.post_norm_without_warmup"]
    assert "(within 0.05)" in words["collapse.post_norm_without_warmup"]
    raw["ablations"]["placement"]["train"]["lr"] = 0.003
    words = {c.id: c.claim for c in load_claims(ROOT / "claims.yaml", RunTable.of(parse_params(raw)))}
    assert "at lr 3e-3 collapses" in words["collapse.post_norm_without_warmup"]
    assert "{" not in " ".join(words.values())
    ablations = "|".join(raw["ablations"])  # an ablation's variant is a setting's one home: its words name it
    stated = [c["id"] for c in yaml.safe_load((ROOT / "claims.yaml").read_text())["claims"]
              if re.search(r"\blr \d|\b\d+-step warmup", c["claim"]) and re.search(rf"\b({ablations})/", str(c))]
    assert not stated, f"claims that state an ablation's learning rate or warmup by hand: {stated}"


def test_a_claim_naming_a_run_or_setting_the_plan_lacks_is_refused_with_the_names_there_are(tmp_path):
    from blocklab.analysis.run_table import read_run_table

    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - id: a\n    claim: at lr {placement/pst:lr}\n    kind: finding\n    rule: within\n"
                      "    value: 1.0\n    expected: 1.0\n    tolerance: 0.1\n")
    with pytest.raises(BlocklabError, match="did you mean 'post'"):
        load_claims(claims, read_run_table(ROOT / "params.yaml"))


def test_check_says_what_would_decide_each_inconclusive_finding_and_the_command_that_trains_it():
    """An inconclusive finding's seeds_needed becomes the `dvc exp run -S` that raises the seeds of every ablation
    and map it reads, its own seeds kept; a finding its plan already trains enough seeds for, or that no number
    would decide, gets none."""
    from blocklab.analysis.check import Checked, seeds_command, show
    from blocklab.analysis.run_table import read_run_table

    table = read_run_table(ROOT / "params.yaml")
    claims = {c.id: c for c in load_claims(ROOT / "claims.yaml", table)}
    placements, dyt = claims["placements.scaling_lowers_loss"], claims["dyt_alpha.untuned_matches_layernorm"]
    have = len(table.maps["placements"].seeds)
    seeds = ", ".join(map(str, range(have + 2)))
    assert seeds_command(placements, have + 2, table) == f"dvc exp run -S 'maps.placements.seeds=[{seeds}]'"
    assert seeds_command(placements, have, table) is None
    both = seeds_command(dyt, 8, table)  # DyT's sweep against the placements' own LayerNorm cells
    assert both.count("-S ") == 2 and "maps.dyt_alpha.seeds=[0, 1, 2, 3, 4, 5, 6, 7]" in both

    def verdict(state, needed):
        return {"ok": False, "verdict": state, "measured": 2.2, "expected": "< 2.1", "kind": "finding",
                "interval": [-0.1, 0.2], "statistic": "paired t, 3 seeds, 95% interval", "seeds_needed": needed,
                "note": None, "known_to_fail": False, "claim": "words"}

    checked = Checked([placements, dyt], {placements.id: verdict("inconclusive", have + 2),
                                          dyt.id: verdict("inconclusive", None)}, table)
    lines = []
    show(checked, lambda text="", **_: lines.append(text))
    assert any(line.startswith("1 inconclusive findings would be decided by more seeds") for line in lines)
    assert f"  dvc exp run -S 'maps.placements.seeds=[{seeds}]'" in lines
    assert f"      decides placements.scaling_lowers_loss ({have + 2} seeds)" in lines
    assert not any("dyt_alpha.seeds" in line for line in lines)
