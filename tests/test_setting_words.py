"""A figure's title says what its runs share, written from their resolved settings (blocklab.analysis.setting_words)."""

import pytest

from blocklab.analysis.setting_words import shared_settings
from blocklab.params.words import rate
from blocklab.params.schema import load_params

from conftest import ROOT


@pytest.mark.parametrize("value, words", [(0.01, "1e-2"), (0.003, "3e-3"), (0.00025, "2.5e-4"), (1e-05, "1e-5"),
                                          (0.3, "3e-1"), (1.0, "1e0"), (0.0099999999, "1e-2")])
def test_a_learning_rate_reads_as_papers_write_it(value, words):
    assert rate(value) == words


def test_the_settings_every_run_shares_are_said_and_what_differs_is_left_to_the_legend():
    params = load_params(ROOT / "params.yaml")
    assert shared_settings(params.all_runs_of("placement")) == (
        "6 layers, width 64, 4 heads, context 32, lr 1e-2, 250 steps, batch 32, 3 seeds")  # warmup differs
    stability = shared_settings(params.map_specs("stability"))
    assert "lr" not in stability and "warmup" not in stability and "250 steps" in stability  # its axes
    assert "layers" not in shared_settings(params.all_runs_of("depth"))
    # the bigram has no width and trains at its own rate and length: what every rung shares is less
    seeds = len(params.ablations["ladder"].seeds)
    assert shared_settings(params.all_runs_of("ladder")) == f"context 8, batch 32, no warmup, {seeds} seeds"


def test_a_changed_setting_is_what_the_title_says():
    raw = load_params(ROOT / "params.yaml").model_dump()
    raw["ablations"]["placement"]["train"]["lr"] = 0.003
    from blocklab.params.schema import parse_params

    assert "lr 3e-3," in shared_settings(parse_params(raw).all_runs_of("placement"))
