import pandas as pd
from scipy import stats

from blocklab.analysis.plots import TITLE_WIDTH, _heading
from blocklab.analysis.reference import load_reference
from blocklab.analysis.summary import finding, gradient_section, variant_table
from blocklab.params.schema import load_params
from blocklab.run.model import TinyLM, parameter_counts

from conftest import ROOT


def total_parameters(spec, vocab=65) -> int:
    return parameter_counts(TinyLM(spec.model, vocab))["total"]


def test_the_matched_feed_forward_pair_differs_in_parameters_by_less_than_5_percent():
    params = load_params(ROOT / "params.yaml")
    narrow, wide = (params.spec("ffn_matched", v) for v in params.ablations["ffn_matched"].variants)
    assert narrow.model.ffn_mult < wide.model.ffn_mult and narrow.model.n_layers > wide.model.n_layers
    a, b = total_parameters(narrow), total_parameters(wide)
    assert abs(a - b) / max(a, b) < 0.05


def test_feed_forward_share_grows_with_the_multiplier_and_passes_half_at_4x():
    params = load_params(ROOT / "params.yaml")
    shares = {}
    for variant in params.ablations["ffn_mult"].variants:
        spec = params.spec("ffn_mult", variant)
        counts = parameter_counts(TinyLM(spec.model, 65))
        shares[spec.model.ffn_mult] = counts["feed_forward"] / counts["total"]
    assert list(shares) == sorted(shares) and list(shares.values()) == sorted(shares.values())
    assert shares[4] > 0.5 > shares[1]


def test_depth_ablation_parameter_counts_equal_the_lessons():
    params = load_params(ROOT / "params.yaml")
    counts = {params.spec("depth", v).model.n_layers: total_parameters(params.spec("depth", v))
              for v in params.ablations["depth"].variants}
    assert counts == {1: 60_545, 3: 160_513, 6: 310_465, 12: 610_369, 24: 1_210_177}


def runs(**losses) -> pd.DataFrame:
    rows = []
    for label, values in losses.items():
        for seed, loss in enumerate(values):
            rows.append({"label": label, "seed": seed, "train_loss_last25": loss, "val_loss": loss + 0.02,
                         "collapsed": abs(loss - 3.3) <= 0.05, "n_layers": 6, "residual": "plain",
                         "n_params": 1000, "share_feed_forward": 0.6, "diverged": False, "blown_up": False,
                         "diverged_at_step": None})
    return pd.DataFrame(rows)


def test_the_finding_names_the_best_the_worst_and_the_collapsed_from_the_numbers():
    text = finding(runs(**{"post-norm": [3.31, 3.32], "pre-norm": [2.10, 2.12]}), {"unigram": 3.3}, [])
    assert "Lowest final training loss: pre-norm (2.110)" in text
    assert "highest: post-norm (3.315), 1.205 nats apart" in text
    assert "post-norm (2 of 2 seeds)" in text


def test_the_finding_says_when_nothing_collapsed():
    assert "No run collapsed" in finding(runs(a=[2.0], b=[2.5]), {"unigram": 3.3}, [])


def _placement_runs() -> pd.DataFrame:
    frame = runs(**{"post-norm": [3.34, 3.32], "pre-norm": [2.13, 2.15]})
    frame["variant"] = frame["label"].map({"post-norm": "post", "pre-norm": "pre"})
    frame["max_grad_norm"] = 1.0
    return frame


def test_the_variant_table_prints_mean_and_interval_and_table_a_only_on_its_corpus():
    params = load_params(ROOT / "params.yaml")
    reference = load_reference(ROOT / "reference.yaml")
    here = variant_table(_placement_runs(), reference, "placement", {"unigram": 3.3}, params.data.sha256)
    assert "| published" in here and "3.341 (seed 0), 3.317 (seed 1)" in here
    half = stats.t.ppf(0.975, 1) * stats.sem([2.13, 2.15])
    assert f"2.140 ± {half:.3f} (2 seeds)" in here
    elsewhere = variant_table(_placement_runs(), reference, "placement", {"unigram": 3.3}, "0" * 64)
    assert "published" not in elsewhere and "3.341" not in elsewhere


def test_the_gradient_section_prints_table_b_beside_ours_and_says_why_post_norm_is_not_probed():
    reference = load_reference(ROOT / "reference.yaml")
    text = gradient_section({"pre/with": {"1": 0.0333, "4": 0.044}, "pre/without": {"1": 0.0044, "4": 0.0051}},
                            reference, "figures/gradients.png")
    assert "0.0333 (0.0333)" in text and "0.0051 (0.00511)" in text
    assert "Post-norm stacks are not probed" in text


def test_the_exercise_figure_draws_the_curves_and_each_variants_paired_difference(tmp_path):
    from blocklab.analysis.plots import paired_difference

    rows = [{"label": label, "variant": label, "seed": seed, "step": step, "loss": 3.0 - step / 100 + offset}
            for label, offset in (("pre", 0.0), ("post", 0.1)) for seed in range(3) for step in range(1, 101)]
    path = paired_difference(pd.DataFrame(rows), {"unigram": 3.3, "uniform": 4.17}, "t", tmp_path / "d.png",
                             smoothing=10)
    assert path.stat().st_size > 10_000


def test_a_figures_title_says_what_it_shows_then_what_its_runs_share_within_the_title_width():
    """The second line is written from the resolved settings (blocklab.analysis.setting_words), not from a
    description: wrapped, never cut, whatever its length."""
    setting = ", ".join(f"setting{i} {i}" for i in range(30))
    first, *rest = _heading("modern_ladder", "training loss", setting).split("\n")
    assert first == "modern_ladder: training loss"
    assert len(rest) > 1 and all(len(line) <= TITLE_WIDTH for line in rest) and " ".join(rest) == setting
    assert _heading("a", "b", "6 layers, lr 1e-2").split("\n") == ["a: b", "6 layers, lr 1e-2"]
