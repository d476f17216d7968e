"""An ablation's `final` figure (blocklab.analysis.plots.final_values): the loss its findings read, every seed a
point and each variant's seed mean with its interval, on the trained runs' scale; a collapsed or blown-up run
marked and kept off that scale (issue 68 item 3)."""

from __future__ import annotations

import pandas as pd
import pytest
from PIL import Image

from blocklab.analysis.claims import Compare, Within
from blocklab.analysis.plots import final_values, findings_loss, trained_scale

BASELINES = {"unigram": 3.3, "unigram_val": 3.35, "uniform": 4.17}


def run(label: str, seed: int, loss: float | None, collapsed: bool = False, blown_up: bool = False) -> dict:
    return {"variant": label, "label": label, "seed": seed, "train_loss_last25": loss, "val_loss": loss,
            "collapsed": collapsed, "blown_up": blown_up, "diverged": loss is None}


RUNS = pd.DataFrame([run("pre", s, 2.10 + 0.01 * s) for s in range(3)]
                    + [run("post", s, 3.30 + 0.01 * s, collapsed=True) for s in range(3)]
                    + [run("warm", 0, 2.20), run("warm", 1, 2.22), run("warm", 2, None, blown_up=True)])


def test_the_scale_is_the_trained_runs_and_keeps_the_collapsed_and_blown_up_ones_off_it():
    values, trained, means, (low, high) = trained_scale(RUNS, "val_loss")
    assert list(trained) == [True] * 3 + [False] * 3 + [True, True, False]
    assert low < 2.10 and 2.22 < high < 2.4  # post-norm's 3.3 would squash the 0.1 between the trained ones
    assert means["post"][0] == pytest.approx(3.31) and means["pre"][1] > 0
    assert values.isna().tolist()[-1]  # no finite value: not a number on any scale


def test_the_figure_draws_trained_collapsed_and_blown_up_runs(tmp_path):
    path = final_values(RUNS, BASELINES, "val_loss", "a title", tmp_path / "final.png")
    width, height = Image.open(path).size
    assert width > 400 and height > 300


def test_the_figure_shows_the_loss_the_ablations_findings_read():
    recorded = {"val_loss", "val_loss_batches", "train_loss_last25", "n_params"}
    batches = Compare(id="a", claim="", kind="finding", rule="compare", left='mean("x/pre", "val_loss_batches")',
                      op="<", right='mean("x/post", "val_loss_batches")')
    table_a = Within(id="b", claim="", kind="finding", rule="within", value='loss("x/post/seed0")', expected=3.3,
                     tolerance=0.05)
    count = Compare(id="c", claim="", kind="invariant", rule="compare", left='metric("x/pre/seed0", "n_params")',
                    op="<", right=10)
    assert findings_loss([batches, table_a, batches], "x", recorded) == "val_loss_batches"
    assert findings_loss([table_a], "x", recorded) == "train_loss_last25"  # loss() and mean() read training loss
    assert findings_loss([count, batches], "y", recorded) == "val_loss"  # none over y: the validation loss
