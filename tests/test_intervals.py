"""The findings' intervals, against SciPy's own tests: a seed mean's one-sample t interval, a paired
difference's (ttest_rel), and Welch's for variants trained on different seeds (ttest_ind)."""

import math

import pytest
from scipy import stats

from blocklab.analysis.claims import Evidence, value_of
from blocklab.analysis.intervals import Estimate, Seeds, half_width

A = {0: 2.21, 1: 2.25, 2: 2.19, 3: 2.24}
B = {0: 2.18, 1: 2.20, 2: 2.17, 3: 2.23}
C = {5: 2.30, 6: 2.36, 7: 2.27}


def test_a_seed_mean_has_the_one_sample_student_t_interval():
    lo, hi = Seeds(A, "a").estimate().interval()
    expected = stats.ttest_1samp(list(A.values()), 0).confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((expected.low, expected.high), rel=1e-12)


def test_a_difference_over_the_same_seeds_is_paired():
    difference = Seeds(A, "a") - Seeds(B, "b")
    assert difference.paired and "paired t, 4 seeds" == difference.estimate().statistic
    expected = stats.ttest_rel(list(A.values()), list(B.values())).confidence_interval(0.95)
    assert difference.estimate().interval() == pytest.approx((expected.low, expected.high), rel=1e-12)


def test_a_difference_over_different_seeds_is_welchs():
    difference = Seeds(A, "a") - Seeds(C, "c")
    expected = stats.ttest_ind(list(A.values()), list(C.values()), equal_var=False).confidence_interval(0.95)
    assert difference.estimate().interval() == pytest.approx((expected.low, expected.high), rel=1e-10)
    assert difference.estimate().statistic.startswith("Welch")
    shifted = (difference - 0.1) * 2
    assert shifted.estimate().interval() == pytest.approx((2 * (expected.low - 0.1), 2 * (expected.high - 0.1)))


def test_pairing_narrows_the_interval_when_seeds_share_their_noise():
    paired = (Seeds(A, "a") - Seeds(B, "b")).estimate().half_width()
    unpaired = (Seeds(A, "a") - Seeds({s + 10: v for s, v in B.items()}, "b")).estimate().half_width()
    assert paired < unpaired


def test_one_seed_has_no_interval_and_a_list_drops_what_was_not_recorded():
    assert math.isnan(Seeds({0: 2.2}, "a").estimate().half_width())
    assert math.isnan(half_width([2.2, None]))
    assert half_width([2.2, 2.3, None]) == pytest.approx(stats.t.ppf(0.975, 1) * stats.sem([2.2, 2.3]))


def test_seeds_to_decide_is_the_first_count_whose_half_width_beats_the_margin():
    estimate = Estimate.of_values([2.20, 2.26], paired=False)  # sd 0.0424
    n = estimate.seeds_to_decide(0.05)
    assert stats.t.ppf(0.975, n - 1) * estimate.sd / math.sqrt(n) < 0.05
    assert stats.t.ppf(0.975, n - 2) * estimate.sd / math.sqrt(n - 1) >= 0.05
    assert estimate.seeds_to_decide(0) is None


def test_claims_expressions_pair_variants_by_seed_and_keep_numbers_numbers():
    reports = Evidence({"runs": {f"x/{v}/seed{s}": {"train_loss_last25": values[s]}
                                for v, values in (("a", A), ("b", B)) for s in values}}, {})
    difference = value_of('mean("x/a") - mean("x/b")', reports)
    assert difference.paired and difference.values == {s: A[s] - B[s] for s in A}
    assert value_of('abs(mean("x/b") - mean("x/a"))', reports).values == pytest.approx({s: abs(A[s] - B[s]) for s in A})
    assert value_of('loss("x/a/seed0") - 0.01', reports) == pytest.approx(2.2)
