"""The residual stream's measures (blocklab.analysis.stream), each against a stream whose answer is known."""

import math

import pandas as pd
import pytest

from blocklab.analysis.stream import deep_half_mean, log_rms_slope, slopes_over_training, stream_metrics


def test_the_slope_of_a_stream_that_doubles_each_block_is_ln_2_and_of_a_flat_one_0():
    assert log_rms_slope([1.0, 2.0, 4.0, 8.0]) == pytest.approx(math.log(2))
    assert log_rms_slope([3.0, 3.0, 3.0]) == pytest.approx(0.0)
    assert log_rms_slope([5.0]) is None and log_rms_slope([1.0, None]) is None and log_rms_slope([1.0, 0.0]) is None


def test_the_deeper_half_is_the_last_n_over_2_blocks():
    assert deep_half_mean([0.5, 0.4, 0.02, 0.01]) == pytest.approx(0.015)
    assert deep_half_mean([0.5, 0.4, 0.3]) == pytest.approx(0.35)
    assert deep_half_mean([0.2]) == 0.2 and deep_half_mean([0.1, None]) is None


def test_a_runs_measures_are_absolute_and_read_after_the_last_block():
    """Two streams that both grow tenfold from their first block: the ratio would call them equal; the absolute RMS
    and the largest |h| after the last block tell the large one apart."""
    small = stream_metrics({"resid_rms": [1.0, 10.0], "resid_max_abs": [4.0, 30.0]})
    large = stream_metrics({"resid_rms": [10.0, 100.0], "resid_max_abs": [40.0, 300.0],
                            "skip_loss_delta": [0.3, 0.01]})
    assert small["log_rms_slope"] == pytest.approx(large["log_rms_slope"])
    assert (small["resid_rms_last"], large["resid_rms_last"]) == (10.0, 100.0)
    assert (small["resid_max_abs_last"], large["resid_max_abs_last"]) == (30.0, 300.0)
    assert "skip_delta_deep" not in small and large["skip_delta_deep"] == 0.01
    assert stream_metrics({"val_loss": 2.5}) == {"resid_rms_last": None, "resid_max_abs_last": None,
                                                 "log_rms_slope": None}


def test_the_slope_is_read_at_every_evaluation_step():
    layers = pd.DataFrame({"step": [49, 49, 99, 99], "layer": [2, 1, 1, 2], "resid_rms": [2.0, 1.0, 1.0, 4.0]})
    slopes = slopes_over_training(layers)
    assert list(slopes.index) == [49, 99]
    assert slopes.tolist() == pytest.approx([math.log(2), math.log(4)])


def test_a_runs_record_gives_its_slope_at_every_evaluation_step():
    """stream_metrics with the run's layers.csv: the slope at each evaluation step, in the steps' order (149 after 99,
    which a JSON mapping's text keys would not keep), a step whose stream is not measurable (a block's RMS missing)
    None, not NaN."""
    layers = pd.DataFrame({"step": [49, 49, 99, 99, 149, 149], "layer": [1, 2, 1, 2, 1, 2],
                           "resid_rms": [1.0, 2.0, 1.0, 4.0, 1.0, float("nan")]})
    derived = stream_metrics({"resid_rms": [1.0, 4.0]}, layers)
    steps, slopes = zip(*derived["log_rms_slope_by_step"])
    assert steps == (49, 99, 149)
    assert slopes[1] == pytest.approx(math.log(4)) and slopes[2] is None
    assert "log_rms_slope_by_step" not in stream_metrics({"resid_rms": [1.0, 4.0]})


def test_a_claim_reads_the_slope_at_an_evaluation_step_first_or_last():
    from blocklab.analysis.claims import Evidence
    from blocklab.analysis.claims.evidence import MissingResult
    from blocklab.analysis.claims.expressions import value_of

    runs = {f"m/pre/l24/seed{seed}": {"log_rms_slope_by_step": [[49, 0.08 + seed / 100], [99, 0.07], [249, 0.05]]}
            for seed in (0, 1)}
    reports = Evidence({"runs": runs}, {})
    assert value_of('slope_at("m/pre/l24", "first")', reports).values == {0: 0.08, 1: 0.09}
    assert value_of('slope_at("m/pre/l24", 99)', reports).values == {0: 0.07, 1: 0.07}
    assert value_of('slope_at("m/pre/l24", "last")', reports).values == {0: 0.05, 1: 0.05}
    with pytest.raises(MissingResult, match="no evaluation at step 100 \\(its steps: 49, 99, 249"):
        value_of('slope_at("m/pre/l24", 100)', reports)
