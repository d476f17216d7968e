"""Trend findings (blocklab.analysis.claims.trends): a paired effect over a map's sizes, its slope against log10 of
the training compute paired by seed, and the verdicts grows, shrinks, flips and flat; the figure that draws them."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from blocklab.analysis.claims import Evidence, check_claims
from blocklab.analysis.claims.rules import Agreement, RankAgreement, Trend
from blocklab.analysis.claims.transfer import Agreement as Agreement_, share_agreeing
from blocklab.analysis.claims.trends import capped_loss, size_points, slope
from blocklab.analysis.finding_plots import figure_of
from blocklab.analysis.trend_plots import trend_figure, trend_table

from conftest import pristine_copy

WIDTHS = (32, 64, 128, 256)


def runs(effects: dict[int, list[float]], seeds=(0, 1, 2), base: float = 2.2, **extra) -> dict:
    """Map `m`'s variants `a` and `b` at every width: `b` ends at `base`, `a` at `base` plus the effect of that
    width on each seed (`effects[width][seed]`); compute grows with the width squared."""
    found = {}
    for width in WIDTHS:
        for seed in seeds:
            common = {"val_loss_init": 4.2, "training_flops": 1e9 * width ** 2, **extra}
            found[f"m/b/d{width}/seed{seed}"] = {**common, "val_loss": base}
            found[f"m/a/d{width}/seed{seed}"] = {**common, "val_loss": base + effects[width][seed]}
    return found


def trend(expect: str, **more) -> Trend:
    return Trend.model_validate({"id": "t", "claim": "a trend", "kind": "finding", "rule": "trend", "map": "m",
                                 "left": "a", "right": "b", "expect": expect, **more})


def verdict(claim: Trend, found: dict) -> dict:
    return check_claims([claim], Evidence({"runs": found}, {}))["t"]


def steady(values: list[float], jitter: float = 0.0) -> dict[int, list[float]]:
    """One effect per width, the same on every seed but for `jitter` (seed 0 below, 2 above)."""
    return {w: [v - jitter, v, v + jitter] for w, v in zip(WIDTHS, values)}


def test_an_effect_that_rises_with_compute_grows_and_one_that_falls_shrinks_as_the_claim_writes_it():
    rising, falling = runs(steady([0.1, 0.2, 0.3, 0.4])), runs(steady([0.4, 0.3, 0.2, 0.1]))
    assert verdict(trend("grows"), rising)["verdict"] == "holds"
    assert verdict(trend("shrinks"), rising)["verdict"] == "fails"
    assert verdict(trend("shrinks"), falling)["verdict"] == "holds"
    assert verdict(trend("grows"), falling)["verdict"] == "fails"
    # a gain (left minus right) below zero that rises towards it grows: the left variant's deficit narrows; one
    # that sinks further does not grow, however far it moves from zero
    assert verdict(trend("grows"), runs(steady([-0.4, -0.3, -0.2, -0.1])))["verdict"] == "holds"
    assert verdict(trend("grows"), runs(steady([-0.1, -0.2, -0.3, -0.4])))["verdict"] == "fails"


def test_the_slope_is_per_tenfold_compute_fitted_per_seed():
    # compute x4 per doubling of width: log10 rises by 0.602 a size; an effect rising 0.0602 a size is 0.1 a decade
    found = verdict(trend("grows"), runs(steady([0.0, 0.0602, 0.1204, 0.1806])))
    assert found["measured"] == pytest.approx(0.1, abs=1e-3)
    assert found["statistic"].startswith("paired t, 3 seeds")
    assert "d32 +0.0000" in found["note"] and "d256 +0.1806" in found["note"]


def test_seed_noise_leaves_a_trend_inconclusive_and_says_how_many_seeds_would_decide_it():
    noisy = {32: [0.1, 0.0, 0.2], 64: [0.1, 0.3, 0.0], 128: [0.3, 0.0, 0.2], 256: [0.0, 0.35, 0.15]}
    found = verdict(trend("grows"), runs(noisy))
    assert found["verdict"] == "inconclusive"
    assert found["interval"][0] < 0 < found["interval"][1]
    assert found["seeds_needed"] and found["seeds_needed"] > 3
    assert 0.05 < found["p_value"] <= 1


def test_flips_needs_both_ends_decided_and_of_opposite_signs():
    assert verdict(trend("flips"), runs(steady([-0.1, 0.0, 0.05, 0.1], 0.01)))["verdict"] == "holds"
    assert verdict(trend("flips"), runs(steady([0.1, 0.0, 0.05, 0.2], 0.01)))["verdict"] == "fails"
    undecided = verdict(trend("flips"), runs(steady([-0.1, 0.0, 0.05, 0.0], 0.01)))
    assert undecided["verdict"] == "inconclusive"


def test_flat_is_an_equivalence_test_of_the_slope_within_its_margin():
    assert verdict(trend("flat", margin=0.02), runs(steady([0.01, 0.012, 0.01, 0.011], 0.002)))["verdict"] == "holds"
    assert verdict(trend("flat", margin=0.02), runs(steady([0.0, 0.1, 0.2, 0.3], 0.002)))["verdict"] == "fails"
    noisy = {32: [0.0, 0.0, 0.0], 64: [0.05, -0.03, 0.02], 128: [-0.02, 0.06, 0.01], 256: [0.04, -0.04, 0.06]}
    wide = verdict(trend("flat", margin=0.02), runs(noisy))
    assert wide["verdict"] == "inconclusive" and "90% interval" in wide["statistic"]
    with pytest.raises(ValidationError, match="margin"):
        trend("flat")
    with pytest.raises(ValidationError, match="margin"):
        trend("grows", margin=0.02)


def test_a_diverged_run_counts_at_its_loss_at_initialisation():
    assert capped_loss({"val_loss": None, "val_loss_init": 4.2}) == 4.2
    assert capped_loss({"val_loss": 7.5, "val_loss_init": 4.2}) == 4.2
    assert capped_loss({"val_loss": 2.5, "val_loss_init": 4.2}) == 2.5
    found = runs(steady([0.1, 0.2, 0.3, 0.4]))
    found["m/a/d256/seed1"]["val_loss"] = None
    points = size_points(found, "m", "a", "b")
    assert points[-1].effect.values[1] == pytest.approx(4.2 - 2.2)
    assert not points[-1].effect.missing()


def test_sizes_are_ordered_by_compute_and_a_seed_missing_at_one_size_leaves_the_fit():
    found = runs(steady([0.1, 0.2, 0.3, 0.4]))
    del found["m/a/d64/seed2"]
    points = size_points(found, "m", "a", "b")
    assert [p.size for p in points] == ["d32", "d64", "d128", "d256"]
    assert set(slope(points).values) == {0, 1}


def test_a_map_whose_cells_share_a_size_is_an_error_that_names_the_quantity_to_use():
    found = runs(steady([0.1, 0.2, 0.3, 0.4]))
    found.update({k.replace("/d32/", "/d32_lr0.1/"): v for k, v in found.items() if "/d32/" in k})
    with pytest.raises(Exception, match="lr_sensitivity"):
        verdict(trend("grows"), found)


def test_the_figure_and_the_table_draw_each_trend_finding_from_its_verdict(tmp_path):
    found = runs(steady([0.1, 0.2, 0.3, 0.4], 0.01))
    found["m/a/d256/seed1"]["collapsed"] = True
    claim = trend("grows")
    verdicts = check_claims([claim], Evidence({"runs": found}, {}))
    sizes = verdicts["t"]["sizes"]
    assert [s["size"] for s in sizes] == ["d32", "d64", "d128", "d256"] and sizes[-1]["untrained"] == 1
    assert sizes[0]["effect"] == pytest.approx(0.1)
    assert sizes[0]["interval"][0] < sizes[0]["effect"] < sizes[0]["interval"][1]
    path = trend_figure([claim], verdicts, {"m": {"a": "A", "b": "B"}}, "trends", tmp_path / "m_trend.png")
    assert path.exists() and path.stat().st_size > 10_000
    assert figure_of(claim, verdicts["t"], {"m": ("trend",), "other": ("findings",)}) == "m_trend.png"
    table = trend_table([claim], verdicts, {"m": {"a": "A", "b": "B"}})
    assert "| m: A − B (final validation loss) |" in table and "d256: +0.400" in table and "| 64x |" in table
    assert table.rstrip().endswith("| holds |")


def test_the_smallest_size_agrees_with_the_largest_where_both_decide_alike_and_the_share_is_tested():
    claims = [trend("grows"), Agreement.model_validate({"id": "agree", "claim": "small predicts large",
                                                        "kind": "finding", "rule": "agreement", "than": 0.5})]
    # decided (right lower) at the largest width only: the ends differ; decided at both: they agree
    differ, agree = runs(steady([0.0, 0.1, 0.2, 0.3], 0.01)), runs(steady([0.1, 0.1, 0.2, 0.3], 0.01))
    found = check_claims(claims, Evidence({"runs": differ}, {}))["agree"]
    assert found["agreements"] == [{"comparison": "t", "smallest": "d32", "largest": "d256",
                                    "at_smallest": "neither decided", "at_largest": "right lower", "agrees": False,
                                    "same_winner": False}]
    assert found["measured"] == 0 and found["verdict"] == "inconclusive"  # one comparison decides nothing
    assert check_claims(claims, Evidence({"runs": agree}, {}))["agree"]["agreements"][0]["agrees"]


@pytest.mark.parametrize("agreeing, total", [(9, 9), (8, 9), (7, 9), (2, 9), (1, 9), (0, 9), (5, 10), (9, 10)])
def test_the_share_holds_exactly_when_its_exact_interval_leaves_out_the_share_tested_and_its_p_says_so(agreeing,
                                                                                                     total):
    share = share_agreeing([Agreement_(f"c{i}", "s", "l", 1, 1 if i < agreeing else 0, True) for i in range(total)], 0.5)
    low, high = share.interval
    assert low <= agreeing / total <= high
    assert share.verdict == ("holds" if low > 0.5 else "fails" if high < 0.5 else "inconclusive")
    assert (share.p_value < 0.05) == (share.verdict != "inconclusive")  # Holm's family reads the p-value


def test_blocks_ranked_alike_at_both_ends_agree_and_in_reverse_disagree():
    def ranked(order_at_largest):
        found = {}
        for i, name in enumerate("abcdef"):
            for width, loss in ((32, 2.2 + 0.01 * i), (256, 2.2 + 0.01 * order_at_largest.index(name))):
                for seed in (0, 1):
                    found[f"m/{name}/d{width}/seed{seed}"] = {"val_loss": loss, "val_loss_init": 4.2,
                                                              "training_flops": 1e9 * width ** 2}
        return found
    claim = RankAgreement.model_validate({"id": "rank", "claim": "ranks", "kind": "finding", "rule": "rank_agreement",
                                          "map": "m", "variants": list("abcdef")})
    same = check_claims([claim], Evidence({"runs": ranked("abcdef")}, {}))["rank"]
    assert same["verdict"] == "holds" and same["measured"] == 1 and same["p_value"] < 0.05
    assert same["ranking"]["variants"]["f"] == {"rank_smallest": 6, "rank_largest": 6, "loss_smallest": 2.25,
                                                "loss_largest": 2.25}
    reverse = check_claims([claim], Evidence({"runs": ranked("fedcba")}, {}))["rank"]
    assert reverse["verdict"] == "fails" and reverse["measured"] == -1
    assert check_claims([claim], Evidence({"runs": ranked("bacdfe")}, {}))["rank"]["verdict"] == "inconclusive"


def test_the_trend_figure_draws_the_agreement_and_the_ranking_after_the_trends(tmp_path):
    found = runs(steady([0.1, 0.2, 0.3, 0.4], 0.01))
    for seed in (0, 1, 2):
        for width in WIDTHS:
            found[f"m/c/d{width}/seed{seed}"] = {"val_loss": 2.0 + width / 1000, "val_loss_init": 4.2,
                                                 "training_flops": 1e9 * width ** 2}
    claims = [trend("grows"),
              Agreement.model_validate({"id": "agree", "claim": "s", "kind": "finding", "rule": "agreement", "than": 0.5}),
              RankAgreement.model_validate({"id": "rank", "claim": "r", "kind": "finding", "rule": "rank_agreement",
                                            "map": "m", "variants": ["a", "b", "c"]})]
    verdicts = check_claims(claims, Evidence({"runs": found}, {}))
    path = trend_figure(claims, verdicts, {"m": {"a": "A", "b": "B", "c": "C"}}, "trends", tmp_path / "m_trend.png")
    assert path.exists() and path.stat().st_size > 10_000
    for claim in claims:
        assert figure_of(claim, verdicts[claim.id], {"m": ("trend",), "other": ("findings",)}) == "m_trend.png"


TINY_TREND = """  - id: post_norm_deficit_trend
    claim: Post-norm's deficit to pre-norm grows with the width (the scale map's two tiny widths).
    kind: finding
    rule: trend
    map: scale
    left: post
    right: pre
    expect: grows
"""


@pytest.mark.slow
def test_the_whole_path_at_two_tiny_sizes_and_a_third_added_with_one_setting(reproduced_project, tmp_path):
    """The small project's scale map (widths 8 and 16) through DVC: its trend finding's verdict with both sizes, the
    figure and the summary's table; then `dvc exp run -S` widens the axis, trains only the new width's runs, and the
    same finding reads three sizes."""
    project = pristine_copy(reproduced_project, tmp_path / "project")
    root = project.root
    with open(root / "claims.yaml", "a") as claims:
        claims.write(TINY_TREND)
    project.commit("a trend finding over the scale map's two widths")
    project.run("dvc", "repro")  # check and report read claims.yaml: they run again, nothing trains
    verdict = json.loads((root / "reports/claims.json").read_text())["post_norm_deficit_trend"]
    assert [s["size"] for s in verdict["sizes"]] == ["d8", "d16"]
    assert verdict["sizes"][1]["flops"] > 2 * verdict["sizes"][0]["flops"]
    assert verdict["verdict"] in ("holds", "fails", "inconclusive") and verdict["interval"]
    assert (root / "reports/figures/scale_trend.png").stat().st_size > 10_000
    assert "| scale: post-norm − pre-norm (final validation loss) | d8: " in (root / "reports/summary.md").read_text()

    more = project.run("dvc", "exp", "run", "-S", "maps.scale.axes.model.d_model=[8,16,24]").stdout
    ran = re.findall(r"Running stage '([^']+)'", more)
    assert {s for s in ran if s.startswith(("train@", "map@"))} == {"map@scale"}, ran
    assert "scale: training 4 of 12 runs" in more  # the new width's 2 variants x 2 seeds, the others copied
    verdict = json.loads((root / "reports/claims.json").read_text())["post_norm_deficit_trend"]
    assert [s["size"] for s in verdict["sizes"]] == ["d8", "d16", "d24"]
