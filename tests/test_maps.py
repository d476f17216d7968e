"""Maps (blocklab.analysis.maps, params.yaml `maps:`): their cells, their validation, LR sensitivity, their summary."""

from __future__ import annotations

import copy

import pytest
from click.testing import CliRunner

from blocklab.cli import main
from blocklab.params.problems import ParamsError
from blocklab.params.schema import load_params, parse_params
from blocklab.analysis.run_table import RunTable
from blocklab.analysis.maps import (
    cell_table, group_name, group_words, lr_groups, lr_sensitivity, map_runs_frame, map_summary, seed_max_trainable_lr,
    seed_sensitivities,
)

from conftest import ROOT

A_MAP = {
    "data": {"url": "u", "sha256": "0" * 64},
    "ablations": {"a": {"seeds": [0], "model": {}, "train": {}, "variants": {"v": {}}}},
    "maps": {"m": {"seeds": [0, 1], "model": {"n_layers": 2}, "train": {"steps": 20},
                   "axes": {"train": {"lr": [0.001, 0.01, 0.1], "warmup": [0, 10]}},
                   "variants": {"post": {"model": {"placement": "post"}}, "pre": {"model": {"placement": "pre"}}}}},
}


A_AXES = [("train", "lr", [0.001, 0.01, 0.1]), ("train", "warmup", [0, 10])]


def a_map(**changes) -> dict:
    raw = copy.deepcopy(A_MAP)
    raw["maps"]["m"].update(changes)
    return raw


# LR sensitivity (Wortsman et al. 2023): E over the grid of [min(l(eta), l0) - l*].

def test_lr_sensitivity_is_the_mean_excess_over_the_best_loss_capped_at_the_initial_loss():
    assert lr_sensitivity([2.5, 2.2, 2.3], [4.2, 4.2, 4.2]) == pytest.approx((0.3 + 0.0 + 0.1) / 3)
    # a loss worse than at initialisation counts as the initial loss
    assert lr_sensitivity([2.2, 6.0], [4.2, 4.2]) == pytest.approx((0.0 + 2.0) / 2)
    # each run's own initial loss caps it
    assert lr_sensitivity([2.2, 6.0], [4.2, 4.0]) == pytest.approx((0.0 + 1.8) / 2)


def test_a_diverged_cell_counts_as_its_loss_at_initialisation():
    assert lr_sensitivity([2.5, 2.2, None], [4.2, 4.2, 4.2]) == pytest.approx((0.3 + 0.0 + 2.0) / 3)
    assert lr_sensitivity([2.2, float("nan")], [4.2, 4.2]) == pytest.approx(1.0)


def test_a_grid_where_every_cell_collapses_has_almost_no_sensitivity_and_no_trainable_range():
    """By the definition every loss then sits near l*: the sensitivity is small, and only the trainable
    range (none) says the block trained nowhere."""
    assert lr_sensitivity([3.31, 3.30, 3.32], [4.2, 4.2, 4.2]) == pytest.approx(0.01)
    assert lr_sensitivity([None, None], [4.2, 4.1]) == pytest.approx(0.05)
    params = parse_params(a_map())
    runs = made_up_runs(params, lambda variant, lr, warmup, seed: (3.31, True, False))
    summary = map_summary(RunTable.of(params), {"runs": runs})
    assert summary["m/post/w0"]["lr_sensitivity"] == pytest.approx(0.0)
    assert "trainable_lr_min" not in summary["m/post/w0"] and "trainable_lr_max" not in summary["m/post/w0"]


def test_lr_sensitivity_needs_one_initial_loss_per_final_loss():
    with pytest.raises(ValueError):
        lr_sensitivity([2.2, 2.3], [4.2])


# The cells.

def test_a_map_crosses_every_variant_with_every_cell_of_its_axes_with_readable_keys():
    params = parse_params(a_map())
    cells = params.cells("m", "post")
    assert [c.cell for c in cells] == ["lr0.001_w0", "lr0.001_w10", "lr0.01_w0", "lr0.01_w10", "lr0.1_w0",
                                       "lr0.1_w10"]
    assert cells[2].key(1) == "m/post/lr0.01_w0/seed1"
    assert (cells[2].train.lr, cells[2].train.warmup, cells[2].train.steps) == (0.01, 0, 20)
    assert (cells[2].model.placement, cells[2].model.n_layers) == ("post", 2)
    assert len(params.map_specs()) == 12 and len(params.specs()) == 1  # the maps' cells apart from the ablations
    assert params.runs_of("m", "pre") == params.cells("m", "pre") and params.runs_of("a", "v") == [params.spec("a", "v")]
    # one stage trains a map or an ablation whole: every variant, a map's in every cell
    assert params.all_runs_of("m") == params.map_specs("m") and params.all_runs_of("a") == params.specs()
    with pytest.raises(ParamsError, match="unknown ablation or map 'mm'.*did you mean 'm'"):
        params.all_runs_of("mm")
    assert group_name(cells[3]) == "w10"


def test_a_value_dvc_exp_run_wrote_as_a_string_is_the_number_in_the_cell_and_its_name():
    """`dvc exp run -S 'maps.m.axes.train.lr=[1e-05,0.01]'` writes 1e-05, which YAML reads as a string."""
    raw = a_map(axes={"train": {"lr": ["1e-05", 0.01]}})
    cells = parse_params(raw).cells("m", "post")
    assert [c.cell for c in cells] == ["lr1e-05", "lr0.01"] and cells[0].train.lr == 1e-05
    assert group_name(cells[0]) == "all"


def test_a_model_axis_names_its_cells_by_the_setting():
    params = parse_params(a_map(axes={"model": {"ffn_mult": [2, 4]}, "train": {"lr": [0.01]}}))
    cells = params.cells("m", "pre")
    assert [c.cell for c in cells] == ["ffn_mult2_lr0.01", "ffn_mult4_lr0.01"]
    assert [c.model.ffn_mult for c in cells] == [2, 4] and group_name(cells[1]) == "ffn_mult4"
    assert group_words(cells[1], RunTable.of(params).maps["m"].axes) == "ffn_mult 4"
    depth = parse_params(a_map(axes={"model": {"n_layers": [2, 4]}, "train": {"lr": [0.01]}}))
    assert [c.cell for c in depth.cells("m", "pre")] == ["l2_lr0.01", "l4_lr0.01"]  # abbreviated, as lr and d
    assert group_words(parse_params(a_map()).cells("m", "pre")[1], A_AXES) == "warmup 10"


@pytest.mark.parametrize("axes, message", [
    ({"train": {"lrr": [0.01]}}, "unknown train setting 'lrr'"),
    ({"train": {"lrr": [0.01]}}, "did you mean 'lr'?"),
    ({"model": {"n_layer": [2]}}, "did you mean 'n_layers'?"),
    ({"optim": {"lr": [0.01]}}, "unknown key 'maps.m.axes.optim' (allowed here: model, train)"),
    ({"train": {"lr": []}}, "'maps.m.axes.train.lr'"),
    ({"train": {"lr": [0.01, 0.01]}}, "each value once: 0.01 repeated"),
    ({}, "a map needs at least one axis"),
])
def test_a_bad_axis_is_refused_like_any_other_params_mistake(axes, message):
    with pytest.raises(ParamsError) as refused:
        parse_params(a_map(axes=axes)).map_specs()
    assert message in str(refused.value)


@pytest.mark.parametrize("value, message", [
    (-0.01, "'lr' = -0.01: Input should be greater than 0"),
    ("fast", "'lr' = 'fast'"),
])
def test_a_value_the_setting_refuses_is_refused_naming_the_cell(value, message):
    with pytest.raises(ParamsError) as refused:
        parse_params(a_map(axes={"train": {"lr": [0.01, value]}})).map_specs()
    said = str(refused.value)
    assert message in said and "maps.m, variant 'post', cell lr" in said and "(train.lr=" in said
    assert "drop that value from maps.m.axes" in said


def test_a_cell_no_run_could_train_is_refused_naming_the_map_the_variant_the_cell_and_the_fix():
    """A warmup longer than the run: the learning rate would never reach the rate asked for."""
    with pytest.raises(ParamsError) as refused:
        parse_params(a_map(axes={"train": {"lr": [0.01], "warmup": [0, 30]}})).map_specs()
    said = str(refused.value)
    assert "maps.m, variant 'post', cell lr0.01_w30 (train.lr=0.01, train.warmup=30)" in said
    assert "a warmup of 30 steps is longer than the run's 20 steps" in said
    assert "shorten warmup, or raise steps" in said and "drop that value from maps.m.axes" in said
    # and so is a cell of a model axis
    with pytest.raises(ParamsError, match=r"maps.m, variant 'post', cell d6_lr0.01 .*n_heads=4 must divide d_model=6"):
        parse_params(a_map(axes={"model": {"d_model": [64, 6]}, "train": {"lr": [0.01]}})).map_specs()


def test_a_variant_may_not_set_what_an_axis_sets_and_a_map_may_not_share_an_ablations_name():
    raw = a_map(variants={"post": {"train": {"lr": 0.02}}})
    with pytest.raises(ParamsError, match="variant 'post' sets train.lr, which is an axis of the map"):
        parse_params(raw)
    raw = a_map()
    raw["maps"]["a"] = raw["maps"].pop("m")
    with pytest.raises(ParamsError, match="a: both an ablation and a map"):
        parse_params(raw)


def test_blocklab_params_lists_every_cell(tmp_path):
    out = CliRunner().invoke(main, ["params", "--params", str(ROOT / "params.yaml")])
    assert out.exit_code == 0, out.output
    lines = [line.split() for line in out.output.splitlines()]
    cells = [line for line in lines if line[0] == "stability"]
    assert len(cells) == 4 * 5 * 2
    seeds = ",".join(str(seed) for seed in load_params(ROOT / "params.yaml").maps["stability"].seeds)
    assert ["stability", "post", "lr0.01_w100", seeds] == cells[5][:4]


# What a map measures, on made-up results.

def made_up_runs(params, outcome) -> dict:
    """reports/metrics.json's runs for every cell: `outcome(variant, lr, warmup, seed)` gives (val_loss,
    collapsed, diverged); every run starts at 4.2."""
    runs = {}
    for spec in params.map_specs():
        for seed in spec.seeds:
            loss, collapsed, diverged = outcome(spec.variant, spec.train.lr, spec.train.warmup, seed)
            # a diverged run's last evaluation, before the step that broke, can be a finite 1e9 (seen here)
            runs[spec.key(seed)] = {"val_loss": 1e9 if diverged else loss, "val_loss_init": 4.2 + 0.01 * seed,
                                    # as the evaluate stage records it: a diverged run blew up, it did not collapse
                                    "collapsed": collapsed and not diverged, "blown_up": diverged,
                                    "diverged": diverged}
    return runs


def fragile_post(variant, lr, warmup, seed):
    """Post-norm without warmup collapses above 1e-2 and diverges at 1e-1 on seed 1; everything else trains,
    best at 1e-2."""
    if variant == "post" and warmup == 0 and lr > 0.01:
        return (3.3, True, seed == 1)
    return ({0.001: 2.5, 0.01: 2.2, 0.1: 2.4}[lr] + 0.01 * seed, False, False)


def test_the_map_summary_has_each_groups_sensitivity_best_lr_and_trainable_range():
    params = parse_params(a_map())
    summary = map_summary(RunTable.of(params), {"runs": made_up_runs(params, fragile_post)})
    assert list(summary) == ["m/post/w0", "m/post/w10", "m/pre/w0", "m/pre/w10"]
    post, pre = summary["m/post/w0"], summary["m/pre/w0"]
    # seed 0: capped [2.5, 2.2, 3.3] - 2.2; seed 1: [2.51, 2.21, 4.21 (diverged: l0)] - 2.21
    assert post["lr_sensitivity"] == pytest.approx(((0.3 + 0 + 1.1) / 3 + (0.3 + 0 + 2.0) / 3) / 2, abs=1e-6)
    assert post["best_lr"] == 0.01 and (post["trainable_lr_min"], post["trainable_lr_max"]) == (0.001, 0.01)
    assert pre["lr_sensitivity"] == pytest.approx((0.3 + 0.2) / 3, abs=1e-6)  # reports/maps.json: 6 decimals
    assert (pre["best_lr"], pre["trainable_lr_min"], pre["trainable_lr_max"]) == (0.01, 0.001, 0.1)
    assert "lr_sensitivity_ci95" in post
    assert post["trainable_lr_max_by_seed"] == [0.01, 0.01] and pre["trainable_lr_max_by_seed"] == [0.1, 0.1]


def test_per_seed_quantities_pair_by_seed():
    params = parse_params(a_map())
    runs = made_up_runs(params, fragile_post)
    groups = lr_groups(RunTable.of(params))
    assert list(groups) == ["m/post", "m/pre"] and list(groups["m/post"]) == ["w0", "w10"]
    assert [lr for lr, _ in groups["m/post"]["w0"]] == [0.001, 0.01, 0.1]
    sensitivities = seed_sensitivities(runs, groups["m/post"]["w0"])
    assert sensitivities == pytest.approx({0: 1.4 / 3, 1: 2.3 / 3})
    assert seed_max_trainable_lr(runs, groups["m/post"]["w0"]) == {0: 0.01, 1: 0.01}
    assert seed_max_trainable_lr(runs, groups["m/pre"]["w0"]) == {0: 0.1, 1: 0.1}


def test_the_cell_table_counts_collapsed_and_diverged_seeds_per_cell():
    params = parse_params(a_map())
    cells = cell_table(map_runs_frame(RunTable.of(params), "m", {"runs": made_up_runs(params, fragile_post)}))
    assert len(cells) == 12
    top = cells[(cells["variant"] == "post") & (cells["cell"] == "lr0.1_w0")].iloc[0]
    assert (top["collapsed"], top["blown_up"], top["diverged"], top["trained"], top["seeds"]) == (1, 1, 1, 0, 2)
    assert top["val_loss_mean"] == pytest.approx(3.3)  # the seed that did not diverge
    fine = cells[(cells["variant"] == "pre") & (cells["cell"] == "lr0.01_w10")].iloc[0]
    assert fine["val_loss_mean"] == pytest.approx(2.205) and fine["trained"] == 2
    assert fine["val_loss_min"] == pytest.approx(2.2) and fine["val_loss_max"] == pytest.approx(2.21)


# A 2 x 2 map through real DVC, then one more learning rate.

def _files(root, prefix: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / prefix).rglob("*"))
            if p.is_file() and p.name in ("metrics.json", "curve.csv", "model.pt")}


@pytest.mark.slow
def test_a_map_through_dvc_and_one_more_learning_rate_trains_only_its_cells(reproduced_project, tmp_path):
    import json
    import re

    from conftest import pristine_copy

    project = pristine_copy(reproduced_project, tmp_path / "project")  # its own: it changes the map
    params = project.params["maps"]["stability"]
    variants, seeds = list(params["variants"]), params["seeds"]
    assert params["axes"] == {"train": {"lr": [0.001, 0.01], "warmup": [0, 5]}}
    first = project.first_repro.stdout
    root = project.root
    runs = json.loads((root / "reports/metrics.json").read_text())["runs"]
    cells = [f"lr{lr}_w{w}" for lr in ("0.001", "0.01") for w in (0, 5)]
    assert {f"stability/{v}/{c}/seed{s}" for v in variants for c in cells for s in seeds} == {
        k for k in runs if k.startswith("stability/")}
    maps = {k: v for k, v in json.loads((root / "reports/maps.json").read_text()).items() if k.startswith("stability/")}
    assert list(maps) == [f"stability/{v}/{g}" for v in variants for g in ("w0", "w5")]
    assert all({"lr_sensitivity", "lr_sensitivity_ci95", "best_lr"} <= set(entry) for entry in maps.values())
    shown = json.loads(project.run("dvc", "metrics", "show", "--json").stdout)
    workspace = next(iter(shown.values()))["data"]["reports/maps.json"]["data"]
    assert workspace["stability/post/w0"]["lr_sensitivity"] == maps["stability/post/w0"]["lr_sensitivity"]
    for figure in ("stability_heatmap.png", "stability_lr.png"):
        assert (root / "reports/figures" / figure).stat().st_size > 10_000
    assert len((root / "reports/maps/stability_cells.csv").read_text().splitlines()) == 1 + 2 * 4
    assert "## Map: stability" in (root / "reports/summary.md").read_text()
    overhead = [line for line in first.splitlines() if "minus its training time" in line and "stability/" in line]
    print("\n" + "\n".join(overhead))
    before = _files(root, "data/runs/stability")

    more = project.run("dvc", "exp", "run", "-S", "maps.stability.axes.train.lr=[0.001,0.01,0.1]").stdout
    ran = re.findall(r"Running stage '([^']+)'", more)
    assert {s for s in ran if s.startswith(("train@", "map@"))} == {"map@stability"}, ran
    # each variant's new learning rate: 2 warmups x 2 seeds, nothing else
    assert f"stability: training {4 * len(variants)} of {12 * len(variants)} runs" in more
    after = _files(root, "data/runs/stability")
    assert {k: v for k, v in after.items() if k in before} == before  # byte for byte, copied not retrained
    assert {k.split("/")[4] for k in set(after) - set(before)} == {"lr0.1_w0", "lr0.1_w5"}
    maps = json.loads((root / "reports/maps.json").read_text())
    groups = {name: by_group for name, by_group in lr_groups(RunTable.of(parse_params(project.params))).items()
              if name.startswith("stability/")}
    assert len(groups) == len(variants)
    assert all(len(members) == 3 for by_group in groups.values() for members in by_group.values())
    assert {k for k in maps if k.startswith("stability/")} == {f"stability/{v}/{g}" for v in variants for g in ("w0", "w5")}


def test_every_kind_of_map_figure_draws_from_made_up_results_with_their_attention_logits(tmp_path):
    """heatmap, lr, lr_by_variant, sensitivity and attention_logits, on a map with a model axis (the widths of
    Wortsman et al.'s proxies) and made-up runs whose largest attention logit grows with the learning rate."""
    from blocklab.analysis import map_plots
    from blocklab.analysis.maps import seed_best_lr

    params = parse_params(a_map(axes={"model": {"d_model": [32, 64]}, "train": {"lr": [0.001, 0.01, 0.1]}},
                                figures=["heatmap", "lr", "lr_by_variant", "sensitivity", "attention_logits"]))
    runs = {}
    for spec in params.map_specs():
        for seed in spec.seeds:
            loss = {0.001: 2.5, 0.01: 2.2, 0.1: 2.4 if spec.model.d_model == 32 else 3.3}[spec.train.lr] + 0.01 * seed
            runs[spec.key(seed)] = {"val_loss": loss, "val_loss_init": 4.2, "collapsed": loss > 3.2, "blown_up": False, "diverged": False,
                                    "attn_logit_max": 10 * (1 + 1000 * spec.train.lr) * (1 + seed), "logit_log_z": 5.0}
    metrics = {"runs": runs, "baselines": {"unigram_val": 3.35}}
    summary = map_summary(RunTable.of(params), metrics)
    assert list(summary) == ["m/post/d32", "m/post/d64", "m/pre/d32", "m/pre/d64"]
    wide = summary["m/post/d64"]
    assert (wide["best_lr"], wide["trainable_lr_max"]) == (0.01, 0.01)
    assert wide["attn_logit_max_at_best_lr"] == pytest.approx(10 * 11 * 1.5)  # seed mean at lr 1e-2
    assert wide["attn_logit_max_at_trainable_lr_max"] == wide["attn_logit_max_at_best_lr"]
    assert seed_best_lr(runs, lr_groups(RunTable.of(params))["m/post"]["d64"]) == {0: 0.01, 1: 0.01}
    drawn = map_plots.map_outputs(RunTable.of(params), "m", metrics, tmp_path, summary, [], {})
    assert list(drawn) == ["heatmap", "lr", "lr_by_variant", "sensitivity", "attention_logits"]
    for kind, path in drawn.items():
        assert path == f"figures/m_{kind}.png" and (tmp_path / path).stat().st_size > 10_000, kind


def test_a_map_figure_against_the_learning_rate_needs_an_lr_axis():
    with pytest.raises(ParamsError, match="figures lr draw against the learning rate: the map needs an axis train.lr"):
        parse_params(a_map(axes={"train": {"warmup": [0, 10]}}))
    parse_params(a_map(axes={"train": {"warmup": [0, 10]}}, figures=["heatmap"]))


def test_claims_read_a_groups_best_learning_rate_per_seed_and_take_log10_of_it():
    from blocklab.analysis.claims import Compare, Evidence, value_of

    params = parse_params(a_map())
    runs = made_up_runs(params, fragile_post)
    reports = Evidence({"runs": runs}, {}, maps=lr_groups(RunTable.of(params)))
    best = value_of('best_lr("m/pre", "w0")', reports)
    assert best.values == {0: 0.01, 1: 0.01}
    assert value_of('log10(best_lr("m/pre", "w0"))', reports).values == pytest.approx({0: -2.0, 1: -2.0})
    shift = 'log10(best_lr("m/pre", "w0")) - log10(best_lr("m/pre", "w10"))'  # the same best rate: 0 on each seed
    claims = {right: Compare(id="x", claim="x", kind="finding", rule="compare", op="<", right=right, left=shift)
              for right in (0.5, 0, -0.5)}
    assert [claims[r].check(reports).verdict for r in (0.5, 0, -0.5)] == ["holds", "inconclusive", "fails"]


def _triangles(ax) -> list:
    """The markers of a panel that stand for a cell where no seed trained (`map_plots._trained_line`)."""
    return [line for line in ax.lines if line.get_marker() == "^"]


def test_a_blown_up_cell_sits_on_the_top_edge_of_the_learning_rate_figures_off_the_trained_scale(tmp_path,
                                                                                                 monkeypatch):
    """A loss far above the unigram baseline (a diverging width at the highest learning rate) would flatten every
    other line: the axis spans the trained seeds' means and such a cell is a triangle on its top edge."""
    import math

    from blocklab.analysis import map_plots

    params = parse_params(a_map(axes={"model": {"d_model": [32, 64]}, "train": {"lr": [0.001, 0.01, 0.1]}},
                                figures=["lr", "lr_by_variant"]))
    runs = {}
    for spec in params.map_specs():
        for seed in spec.seeds:
            blown = spec.model.d_model == 64 and spec.train.lr == 0.1
            runs[spec.key(seed)] = {"val_loss": 16.0 + seed if blown else 2.3 + 0.1 * spec.train.lr, "val_loss_init": 4.2,
                                    "collapsed": False, "blown_up": blown, "diverged": False, "attn_logit_max": 5.0,
                                    "logit_log_z": 5.0}
    metrics = {"runs": runs, "baselines": {"unigram_val": 3.35}}
    figures = []
    monkeypatch.setattr(map_plots, "save_figure", lambda fig, path, **_: figures.append(fig) or path)
    map_plots.map_outputs(RunTable.of(params), "m", metrics, tmp_path, map_summary(RunTable.of(params), metrics), [], {})
    assert len(figures) == 2
    for fig in figures:
        panels = [ax for ax in fig.axes if ax.get_visible()]
        for ax in panels:
            top = ax.get_ylim()[1]
            assert top < 2.4  # the trained means (2.3001 to 2.31), not 16.5
            drawn = [y for line in ax.lines for y in line.get_ydata() if not math.isnan(y)]
            assert max(drawn) <= top + 1e-9
            assert all(line.get_ydata()[0] == pytest.approx(top) for line in _triangles(ax))  # on the edge
        # d64 at lr 1e-1, for each variant: a triangle each, in whichever panel holds it
        assert sum(len(_triangles(ax)) for ax in panels) == 2
        assert all(line.get_xdata()[0] == pytest.approx(0.1, rel=0.1) for ax in panels for line in _triangles(ax))


def test_the_heatmaps_scale_is_set_by_the_cells_that_trained_and_failed_cells_are_drawn_apart(tmp_path, monkeypatch):
    """One seed's blow-up (a loss of 1,324) no longer sets the colour scale that every other cell is read on: the
    scale spans the cells where every seed trained; a cell where every seed blew up is red, one where every seed
    collapsed grey, each saying so, and a cell where one seed of two failed says how many."""
    import matplotlib

    from blocklab.analysis import map_plots

    params = parse_params(a_map())

    def outcome(variant, lr, warmup, seed):  # (val_loss, collapsed, blown_up)
        if variant == "post" and lr == 0.1:
            return (1324.0 + seed, False, True)
        if variant == "pre" and lr == 0.1:
            return (3.35, True, False)
        if variant == "pre" and lr == 0.01 and warmup == 0:
            return ((2.3, False, False) if seed == 0 else (3.4, True, False))
        return (2.2 + lr + 0.01 * seed, False, False)

    runs = {}
    for spec in params.map_specs():
        for seed in spec.seeds:
            loss, collapsed, blown_up = outcome(spec.variant, spec.train.lr, spec.train.warmup, seed)
            runs[spec.key(seed)] = {"val_loss": loss, "val_loss_init": 4.2, "collapsed": collapsed,
                                    "blown_up": blown_up, "diverged": False, "attn_logit_max": 5.0, "logit_log_z": 5.0}
    metrics = {"runs": runs, "baselines": {"unigram_val": 3.35, "unigram": 3.3, "uniform": 4.17}}
    figures = []
    monkeypatch.setattr(map_plots, "save_figure", lambda fig, path, **_: figures.append(fig) or path)
    cells = cell_table(map_runs_frame(RunTable.of(params), "m", metrics))
    map_plots.map_heatmaps(cells, metrics["baselines"], "m", tmp_path / "heatmap.png")
    (fig,) = figures
    panels = [ax for ax in fig.axes if ax.images]
    (bar,) = [ax for ax in fig.axes if not ax.images and ax.collections]  # the colour bar
    low, high = bar.get_ylim()
    assert low == pytest.approx(2.206) and high == pytest.approx(2.215)  # the cells that trained, not 1,324
    texts = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in panels}
    assert texts["post"].count("1,324\nblew up") == 2 and "1,324" not in " ".join(texts["pre"])
    assert texts["pre"].count("3.35\ncollapsed") == 2 and "2.85\n× 1/2" in texts["pre"]
    image = panels[0].images[0].get_array()
    assert tuple(image[0, 2]) == pytest.approx(matplotlib.colors.to_rgba(map_plots.BLOWN_UP_COLOUR))
    assert tuple(panels[1].images[0].get_array()[1, 2]) == pytest.approx(matplotlib.colors.to_rgba(map_plots.COLLAPSED_COLOUR))


def _deep_map_runs(params) -> dict:
    """Post-norm collapses on every seed at 4 blocks and lr 1e-1 and on seed 1 at 2 blocks and lr 1e-1; everything
    else trains, its stream growing over the blocks and its slope falling over training."""
    runs = {}
    for spec in params.map_specs():
        depth, lr = spec.model.n_layers, spec.train.lr
        for seed in spec.seeds:
            collapsed = spec.variant == "post" and lr == 0.1 and (depth == 4 or seed == 1)
            loss = 3.4 if collapsed else 2.2 + 0.01 * depth + 0.01 * seed
            runs[spec.key(seed)] = {
                "val_loss": loss, "val_loss_init": 4.2, "collapsed": collapsed, "blown_up": False, "diverged": False,
                "resid_rms": [1.0 + block + seed for block in range(depth)],
                "log_rms_slope_by_step": [[49, 0.3 + 0.01 * seed], [99, 0.2], [149, 0.1]]}
    return runs


def test_the_depth_and_stream_figures_keep_runs_that_did_not_train_off_the_trained_scale(tmp_path, monkeypatch):
    """depth: the trained seeds' mean with its interval; the axis spans the trained means (a collapsed loss, 3.4,
    lies above it); a cell where no seed trained is a triangle on the top edge with its count, one where some did
    not a hollow marker with theirs. layers and stream_over_training: a variant none of whose seeds trained in a
    cell is named in that panel's title, not drawn."""
    from blocklab.analysis import map_plots

    params = parse_params(a_map(model={}, axes={"model": {"n_layers": [2, 4]}, "train": {"lr": [0.01, 0.1]}},
                                figures=["depth", "layers", "stream_over_training"]))
    metrics = {"runs": _deep_map_runs(params), "baselines": {"unigram_val": 3.35}}
    figures = []
    monkeypatch.setattr(map_plots, "save_figure", lambda fig, path, **_: figures.append(fig) or path)
    map_plots.map_outputs(RunTable.of(params), "m", metrics, tmp_path, map_summary(RunTable.of(params), metrics), [], {})
    depth, layers, slopes = figures
    low_lr, high_lr = depth.axes[:2]
    for ax in (low_lr, high_lr):
        assert ax.get_ylim()[1] < 3.35  # off the scale: the collapsed loss and the unigram baseline
    assert [t.get_text() for t in high_lr.texts] == ["1/2"]  # 2 blocks: 1 of 2 seeds did not train
    (none_trained,) = _triangles(high_lr)  # 4 blocks: no seed trained, a triangle on the top edge
    assert none_trained.get_xdata()[0] == pytest.approx(4, rel=0.05)
    assert none_trained.get_ydata()[0] == pytest.approx(high_lr.get_ylim()[1])
    assert not low_lr.texts and not _triangles(low_lr)
    for figure, lines in ((layers, 2), (slopes, 2)):
        titles = {ax.get_title(): len(ax.lines) for ax in figure.axes if ax.get_visible() and ax.get_title()}
        assert titles["n_layers 4, lr 1e-1\n(no seed trained: post)"] == lines - 1
        assert titles["n_layers 2, lr 1e-1"] == lines and titles["n_layers 4, lr 1e-2"] == lines
