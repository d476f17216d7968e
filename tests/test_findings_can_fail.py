"""Every finding in claims.yaml can fail: made-up results that should make it hold, and others that should
make it fail, for each one. A rule that holds whatever the numbers cannot pass here, and a new finding
without made-up results of its own fails the coverage test."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from blocklab.analysis.claims import Evidence, check_claims, load_claims
from blocklab.analysis.maps import lr_groups
from blocklab.analysis.reference import load_reference
from blocklab.analysis.run_table import read_run_table

from conftest import ROOT

PLAN = read_run_table(ROOT / "params.yaml")
REFERENCE = load_reference(ROOT / "reference.yaml")
CLAIMS = load_claims(ROOT / "claims.yaml")
FINDINGS = {c.id: c for c in CLAIMS if c.kind == "finding"}
UNIGRAM = 3.309
FIELDS = ("train_loss_last25", "val_loss", "val_loss_batches")


def around(mean: float, spread: float = 0.002):
    """Seed values close to `mean` (a small, fixed spread): a decisive made-up result."""
    return lambda n: [mean + spread * ((i % 3) - 1) for i in range(n)]


def evidence(overrides: dict, runs_dir: Path | None = None) -> Evidence:
    """Every run params.yaml defines at a loss of 2.2, but the variants (or single runs) in `overrides`. A
    variant given as `Curve` also gets a curve.csv under `runs_dir`: early and late training losses."""
    runs = {}
    for spec in PLAN.specs():
        override = overrides.get(f"{spec.ablation}/{spec.variant}", around(2.2))
        values = (override.final if isinstance(override, Curve) else override)(len(spec.seeds))
        for seed, value in zip(spec.seeds, values):
            runs[spec.key(seed)] = {field: value for field in FIELDS}
            if isinstance(override, Curve):
                override.write(runs_dir / spec.key(seed), seed)
    for spec in PLAN.map_specs():  # every map cell trains to 2.2 from 4.2, but the cells in `overrides`
        cell = overrides.get(spec.name, Cell(2.2))
        if isinstance(cell, GradCurve):
            for seed in spec.seeds:
                cell.write(runs_dir / spec.key(seed), seed)
            cell = Cell(2.2)
        for seed, value, attn in zip(spec.seeds, cell.final(len(spec.seeds)), cell.attn(len(spec.seeds))):
            runs[spec.key(seed)] = {**{field: value for field in FIELDS}, "val_loss_init": 4.2,
                                    # compute that grows with the width and depth, as a run's own record does
                                    "training_flops": 1e9 * spec.model.d_model ** 2 * spec.model.n_layers,
                                    "collapsed": cell.collapsed and not cell.diverged, "blown_up": cell.diverged,
                                    "diverged": cell.diverged,
                                    "attn_logit_max": attn, "logit_log_z": cell.log_z,
                                    "resid_growth": cell.growth(len(spec.seeds))[seed % len(spec.seeds)],
                                    "block_cos_deep": cell.cos(len(spec.seeds))[seed % len(spec.seeds)],
                                    **{f: values(len(spec.seeds))[seed % len(spec.seeds)]
                                       for f, values in cell.stream.items()}}
            if cell.diverged:
                runs[spec.key(seed)].update(val_loss=None, train_loss_last25=None)
    for key, value in overrides.items():
        if key.count("/") == 2 and not isinstance(value, Cell):  # one run
            runs[key] = {field: value for field in FIELDS}
    metrics = {"baselines": {"unigram": UNIGRAM, "unigram_val": 3.35, "uniform": 4.174}, "runs": runs}
    return Evidence(metrics, {}, REFERENCE, PLAN.corpus_sha256, runs_dir, lr_groups(PLAN))


class Cell:
    """A made-up map cell: every seed ends near `final` (validation), or collapsed (at the unigram
    baseline), or diverged (no loss); its largest attention logit near `attn` (1% apart), its log Z `log_z`,
    its residual stream's growth near `growth` and its deeper blocks' cos(input, output) near `cos`; the stream
    after the last block near `rms` (RMS) and `max_abs` (largest |h|), ln RMS's slope over the blocks near `slope`,
    the deeper half's skipped-block loss change near `skip`, the largest gradient norm near `grad`, and the slope at
    the first evaluation near `first_slope`."""

    def __init__(self, final: float = 2.2, collapsed: bool = False, diverged: bool = False, attn: float = 5.0,
                 log_z: float = 5.0, growth: float = 2.0, cos: float = 0.8, rms: float = 5.0, max_abs: float = 30.0,
                 slope: float = 0.05, skip: float = 0.05, grad: float = 1.0, first_slope: float = 0.05):
        self.final = around(UNIGRAM if collapsed else final)
        self.collapsed, self.diverged = collapsed, diverged
        self.growth, self.cos = around(growth, 0.01), around(cos, 0.002)
        self.attn = lambda n: [attn * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]
        self.log_z = log_z
        self.stream = {"resid_rms_last": around(rms, 0.01), "resid_max_abs_last": around(max_abs, 0.01),
                       "log_rms_slope": around(slope, 0.0005), "skip_delta_deep": around(skip, 0.0005),
                       "max_grad_norm": around(grad, 0.01),
                       # the slope at the first evaluation near `first_slope`, at the last near `slope`
                       "log_rms_slope_by_step": lambda n: [[[49, first], [249, last]] for first, last in
                                                           zip(around(first_slope, 0.0005)(n), around(slope, 0.0005)(n))]}


def lr_curve(variant: str, group: str, finals: dict[float, Cell]) -> dict:
    """Overrides for one group of a stability-map variant, by learning rate."""
    return {f"stability/{variant}/lr{lr:g}_{group}": cell for lr, cell in finals.items()}


def proxies(variant: str, width: int, finals: dict[float, Cell]) -> dict:
    """Overrides for one width of a proxies-map variant, by learning rate."""
    return {f"proxies/{variant}/d{width}_lr{lr:g}": cell for lr, cell in finals.items()}


COLLAPSED, DIVERGED = Cell(collapsed=True), Cell(diverged=True)
PROXY_RATES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
# Over the proxies' learning rates: flat (insensitive), sensitive (worse away from 1e-2), and fragile.
P_FLAT = {lr: Cell(2.2) for lr in PROXY_RATES}
P_SENSITIVE = {0.001: Cell(2.5), 0.003: Cell(2.3), 0.01: Cell(2.2), 0.03: Cell(2.3), 0.1: Cell(2.6), 0.3: Cell(2.9)}
P_FRAGILE = {0.001: Cell(2.6), 0.003: Cell(2.4), 0.01: Cell(2.2), 0.03: COLLAPSED, 0.1: COLLAPSED, 0.3: DIVERGED}


def best_at(lr: float) -> dict[float, Cell]:
    """A proxies learning-rate curve whose lowest final loss lies at `lr`."""
    return {rate: Cell(2.0 if rate == lr else 2.3) for rate in PROXY_RATES}

# A learning-rate curve that trains everywhere (flat: insensitive) and one that collapses above 1e-2.
FLAT = {lr: Cell(2.2) for lr in (0.001, 0.003, 0.01, 0.03, 0.1)}
FRAGILE = {0.001: Cell(2.4), 0.003: Cell(2.2), 0.01: COLLAPSED, 0.03: COLLAPSED, 0.1: DIVERGED}


class Curve:
    """A made-up training curve: `early` loss over steps 1-500, `late` over the last 500 of 5,000, ending
    (and validating) at `final`; each seed a little apart."""

    def __init__(self, early: float, late: float, final: float | None = None):
        self.early, self.late = early, late
        self.final = around(late if final is None else final)

    def write(self, folder: Path, seed: int) -> None:
        jitter = 0.002 * ((seed % 3) - 1)
        rows = [(step, self.early + jitter) for step in (1, 250, 500)] + [(2500, (self.early + self.late) / 2)] + \
               [(step, self.late + jitter) for step in (4750, 5000)]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "curve.csv").write_text("step,loss,grad_norm,lr,val_loss\n" +
                                          "".join(f"{step},{loss},1.0,0.001,\n" for step, loss in rows))


class GradCurve:
    """A made-up map cell's curve: the gradient norm `early` over steps 0-99, `late` over steps 100-249."""

    def __init__(self, early: float, late: float):
        self.early, self.late = early, late

    def write(self, folder: Path, seed: int) -> None:
        jitter = 0.01 * ((seed % 3) - 1)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "curve.csv").write_text("step,loss,grad_norm,lr,val_loss\n" + "".join(
            f"{step},2.2,{(self.early if step < 100 else self.late) + jitter},0.01,\n" for step in range(250)))


def _ladder(rung: str) -> float:
    return REFERENCE["ladder"]["figures"][rung]


CASES: dict[str, tuple[dict, dict]] = {
    "collapse.post_norm_without_warmup": ({"placement/post": around(UNIGRAM)}, {"placement/post": around(2.5)}),
    "collapse.pre_escapes": ({"placement/pre": around(2.1)}, {"placement/pre": around(3.3)}),
    "collapse.post_warmup_escapes": ({"placement/post_warmup": around(2.1)}, {"placement/post_warmup": around(3.0)}),
    "collapse.post_warmup200_escapes": ({"placement/post_warmup200": around(2.1)},
                                        {"placement/post_warmup200": around(3.0)}),
    "residual.six_layers_without_sit_on_unigram": ({"residual/without/seed0": UNIGRAM},
                                                   {"residual/without/seed0": 2.5}),
    "residual.one_layer_nearly_the_same": ({"residual_depth/without_1": around(2.22)},
                                           {"residual_depth/without_1": around(2.5)}),
    "residual.four_layers_apart": ({"residual_depth/without_4": around(3.0)}, {"residual_depth/without_4": around(2.25)}),
    "residual.gap_widens_with_depth": (
        {"residual_depth/without_1": around(2.25), "residual_depth/without_4": around(2.5),
         "residual_depth/without_6": around(2.8)},
        {"residual_depth/without_1": around(2.25), "residual_depth/without_4": around(2.5),
         "residual_depth/without_6": around(2.3)}),
    "ffn.gain_is_sublinear": (
        {"ffn_mult/x1": around(2.5), "ffn_mult/x2": around(2.4), "ffn_mult/x4": around(2.3), "ffn_mult/x8": around(2.2)},
        {"ffn_mult/x1": around(2.5), "ffn_mult/x2": around(2.49), "ffn_mult/x4": around(2.3),
         "ffn_mult/x8": around(2.2)}),
    "ffn.matched_narrow_deep_wins": ({"ffn_matched/x2_5layers": around(2.2), "ffn_matched/x8_2layers": around(2.3)},
                                     {"ffn_matched/x2_5layers": around(2.3), "ffn_matched/x8_2layers": around(2.2)}),
    "warmup.w50_rescues_post_norm": ({"warmup/w50": around(2.2)}, {"warmup/w50": around(3.3)}),
    **{f"ladder.{rung}": ({f"ladder/{rung}": around(_ladder(rung))}, {f"ladder/{rung}": around(_ladder(rung) + 0.1)})
       for rung in ("bigram", "one_head", "multi_head", "ffn", "residual", "layernorm")},
    "ladder.three_blocks_no_gain": ({"ladder/blocks": around(2.3), "ladder/ffn": around(2.2)},
                                    {"ladder/blocks": around(2.1), "ladder/ffn": around(2.2)}),
    "ladder.first_rungs_each_lower": (
        {"ladder/bigram": around(2.5), "ladder/one_head": around(2.4), "ladder/multi_head": around(2.3),
         "ladder/ffn": around(2.2)},
        {"ladder/bigram": around(2.5), "ladder/one_head": around(2.4), "ladder/multi_head": around(2.45),
         "ladder/ffn": around(2.2)}),
    "ladder.residual_then_norm_each_lower": (
        {"ladder/blocks": around(2.3), "ladder/residual": around(2.1), "ladder/layernorm": around(2.05)},
        {"ladder/blocks": around(2.3), "ladder/residual": around(2.1), "ladder/layernorm": around(2.2)}),
    "ladder.layernorm_gain_slight": ({"ladder/residual": around(2.1), "ladder/layernorm": around(2.08)},
                                     {"ladder/residual": around(2.1), "ladder/layernorm": around(1.9)}),
    "norm_type.rmsnorm_as_good_as_layernorm": ({"norm_type/rmsnorm": around(2.205)}, {"norm_type/rmsnorm": around(2.3)}),
    "ffn_type.swiglu_ends_lower": ({"ffn_type/swiglu": around(2.1)}, {"ffn_type/swiglu": around(2.3)}),
    "residual_scheme.post_collapses_at_12_layers": ({"residual_scheme/post": around(UNIGRAM)},
                                                    {"residual_scheme/post": around(2.5)}),
    "residual_scheme.deepnorm_trains_without_warmup": ({"residual_scheme/deepnorm": around(2.2)},
                                                       {"residual_scheme/deepnorm": around(3.3)}),
    "residual_scheme.rezero_trains_without_warmup": ({"residual_scheme/rezero": around(2.2)},
                                                     {"residual_scheme/rezero": around(3.3)}),
}
CASES.update({
    "exercise2.post_disadvantage_largest_early": (
        {"exercise2/pre": Curve(3.0, 2.0), "exercise2/post": Curve(3.4, 2.05)},
        {"exercise2/pre": Curve(3.0, 2.0), "exercise2/post": Curve(3.05, 2.3)}),
    "exercise2.warmup_reduces_early_disadvantage": (
        {"exercise2/pre": Curve(3.0, 2.0), "exercise2/post": Curve(3.4, 2.05), "exercise2/post_warmup200": Curve(3.1, 2.0)},
        {"exercise2/pre": Curve(3.0, 2.0), "exercise2/post": Curve(3.4, 2.05), "exercise2/post_warmup200": Curve(3.6, 2.0)}),
    "exercise2.warmup_not_a_worse_optimum": (
        {"exercise2/pre": around(2.0), "exercise2/post_warmup200": around(2.02)},
        {"exercise2/pre": around(2.0), "exercise2/post_warmup200": around(2.2)}),
})
CASES.update({
    "stability.post_more_lr_sensitive_without_warmup": (
        {**lr_curve("post", "w0", FRAGILE), **lr_curve("pre", "w0", FLAT)},
        {**lr_curve("post", "w0", FLAT), **lr_curve("pre", "w0", FRAGILE)}),
    "stability.warmup_lowers_post_sensitivity": (
        {**lr_curve("post", "w0", FRAGILE), **lr_curve("post", "w100", FLAT)},
        {**lr_curve("post", "w0", FLAT), **lr_curve("post", "w100", FRAGILE)}),
    "stability.post_trains_at_lower_rates_than_pre": (
        {**lr_curve("post", "w0", FRAGILE), **lr_curve("pre", "w0", FLAT)},
        {**lr_curve("post", "w0", FLAT), **lr_curve("pre", "w0", FRAGILE)}),
    "stability.deepnorm_trains_where_post_collapses": (
        {**lr_curve("post", "w0", FRAGILE), **lr_curve("deepnorm", "w0", FLAT)},
        {**lr_curve("post", "w0", FLAT), **lr_curve("deepnorm", "w0", FRAGILE)}),
    "stability.rezero_trains_where_post_collapses": (
        {**lr_curve("post", "w0", FRAGILE), **lr_curve("rezero", "w0", FLAT)},
        {**lr_curve("post", "w0", FLAT), **lr_curve("rezero", "w0", FRAGILE)}),
    "stability.post_at_or_below_pre_at_lowest_lr": (
        {**lr_curve("post", "w0", {0.001: Cell(2.3)}), **lr_curve("pre", "w0", {0.001: Cell(2.4)})},
        {**lr_curve("post", "w0", {0.001: Cell(2.5)}), **lr_curve("pre", "w0", {0.001: Cell(2.4)})}),
})
for _w in (32, 64, 128):
    CASES.update({
        f"proxies.attention_logits_grow_with_lr_d{_w}": (
            proxies("standard", _w, {0.001: Cell(attn=5), 0.3: Cell(attn=1e5)}),
            proxies("standard", _w, {0.001: Cell(attn=5), 0.3: Cell(attn=50)})),
        f"proxies.qk_layernorm_bounds_attention_logits_d{_w}": (
            proxies("qk_layernorm", _w, {0.3: Cell(attn=20)}), proxies("qk_layernorm", _w, {0.3: Cell(attn=500)})),
        f"proxies.qk_layernorm_lowers_sensitivity_d{_w}": (
            {**proxies("qk_layernorm", _w, P_FLAT), **proxies("standard", _w, P_FRAGILE)},
            {**proxies("qk_layernorm", _w, P_FRAGILE), **proxies("standard", _w, P_FLAT)}),
    })
CASES.update({
    "proxies.attention_logits_grow_with_width": (
        {**proxies("standard", 32, {0.1: Cell(attn=1e2)}), **proxies("standard", 64, {0.1: Cell(attn=1e3)}),
         **proxies("standard", 128, {0.1: Cell(attn=1e4)})},
        {**proxies("standard", 32, {0.1: Cell(attn=1e4)}), **proxies("standard", 64, {0.1: Cell(attn=1e3)}),
         **proxies("standard", 128, {0.1: Cell(attn=1e2)})}),
    "proxies.sensitivity_grows_with_width": (
        {**proxies("standard", 32, P_FLAT), **proxies("standard", 64, P_SENSITIVE),
         **proxies("standard", 128, P_FRAGILE)},
        {**proxies("standard", 32, P_FRAGILE), **proxies("standard", 64, P_SENSITIVE),
         **proxies("standard", 128, P_FLAT)}),
    "proxies.standard_best_lr_falls_with_width": (
        {**proxies("standard", 32, best_at(0.03)), **proxies("standard", 128, best_at(0.003))},
        {**proxies("standard", 32, best_at(0.003)), **proxies("standard", 128, best_at(0.03))}),
    "proxies.mup_best_lr_moves_less": (
        {**proxies("standard", 32, best_at(0.03)), **proxies("standard", 128, best_at(0.003)),
         **proxies("mup", 32, best_at(0.03)), **proxies("mup", 128, best_at(0.03))},
        {**proxies("standard", 32, best_at(0.03)), **proxies("standard", 128, best_at(0.01)),
         **proxies("mup", 32, best_at(0.03)), **proxies("mup", 128, best_at(0.001))}),
    "proxies.z_loss_keeps_log_z_near_zero": (
        proxies("z_loss", 128, {0.01: Cell(log_z=0.2)}), proxies("z_loss", 128, {0.01: Cell(log_z=5.0)})),
})


def placements(variant: str, cells: dict[str, Cell], map_name: str = "placements") -> dict:
    """Overrides for cells of a placements-map variant (or of `map_name`'s, a map of the same axes), by cell name
    (`l24_lr0.003`)."""
    return {f"{map_name}/{variant}/{cell}": value for cell, value in cells.items()}


def dyt_alpha(cells: dict[float, Cell], lr: float = 0.003) -> dict:
    """Overrides for the dyt_alpha map's cells at `lr`, by initial alpha (the rest end at 2.2, as LayerNorm)."""
    return {f"dyt_alpha/dyt/dyt_alpha{alpha:g}_lr{lr:g}": cell for alpha, cell in cells.items()}


def lower(variant: str, than: str, cell: str = "l24_lr0.003", map_name: str = "placements", **fields
          ) -> tuple[dict, dict]:
    """(holds, fails) for `variant` below `than` in `cell`: on `fields` (Cell's keywords, (low, high) each)."""
    low = {k: v[0] for k, v in fields.items()}
    high = {k: v[1] for k, v in fields.items()}
    return ({**placements(variant, {cell: Cell(**low)}, map_name), **placements(than, {cell: Cell(**high)}, map_name)},
            {**placements(variant, {cell: Cell(**high)}, map_name), **placements(than, {cell: Cell(**low)}, map_name)})


def rung(variant: str, before: str, mean: float, mean_before: float) -> dict:
    return {f"modern_ladder/{variant}": around(mean), f"modern_ladder/{before}": around(mean_before)}


def depth_cost(width: int, lr: float, shallow: float, deep: float) -> dict:
    """The pilot's pre-norm ending at `shallow` at 6 blocks and `deep` at 24, at one width and rate."""
    return {f"depth_cost/pre/d{width}_l6_lr{lr:g}": Cell(final=shallow),
            f"depth_cost/pre/d{width}_l24_lr{lr:g}": Cell(final=deep)}


for _w in (32, 64):
    for _tag, _lr in (("low_lr", 0.003), ("high_lr", 0.01)):
        CASES[f"depth_cost.pre_pays_for_depth_d{_w}_{_tag}"] = (depth_cost(_w, _lr, 2.2, 2.3),
                                                                 depth_cost(_w, _lr, 2.3, 2.2))


HIGH_LR = ("l6_lr0.01", "l12_lr0.01", "l24_lr0.01")
CASES.update({
    "placements.pre_stream_grows_with_depth": (
        placements("pre", {"l6_lr0.003": Cell(rms=3.0), "l12_lr0.003": Cell(rms=4.0), "l24_lr0.003": Cell(rms=6.0)}),
        placements("pre", {"l6_lr0.003": Cell(rms=3.0), "l12_lr0.003": Cell(rms=4.0), "l24_lr0.003": Cell(rms=3.5)})),
    "placements.peri_stream_smaller_than_pre": lower("peri", "pre", rms=(3.0, 6.0)),
    "placements.peri_fewer_massive_activations_than_pre": lower("peri", "pre", max_abs=(10.0, 40.0)),
    "placements.pre_deep_blocks_matter_less_when_deeper": (
        placements("pre", {"l24_lr0.003": Cell(skip=0.01), "l6_lr0.003": Cell(skip=0.1)}),
        placements("pre", {"l24_lr0.003": Cell(skip=0.1), "l6_lr0.003": Cell(skip=0.01)})),
    "placements.scaling_deep_blocks_matter_more": lower("pre", "scaled", skip=(0.01, 0.1)),
    "placements.scaling_curbs_growth": lower("scaled", "pre", slope=(0.02, 0.08)),
    "placements.scaling_curbs_growth_early": lower("scaled", "pre", first_slope=(0.02, 0.08)),
    "placements.scaling_lowers_loss": lower("scaled", "pre", final=(2.1, 2.3)),
    "placements.scaling_lowers_loss_high_lr": lower("scaled", "pre", "l24_lr0.01", final=(2.1, 2.3)),
    "placements.scaling_gain_grows_with_depth": (
        {**placements("scaled", {"l6_lr0.003": Cell(2.19), "l12_lr0.003": Cell(2.15), "l24_lr0.003": Cell(2.1)})},
        {**placements("scaled", {"l6_lr0.003": Cell(2.1), "l12_lr0.003": Cell(2.15), "l24_lr0.003": Cell(2.19)})}),
    "placements.peri_lowers_loss": lower("peri", "pre", final=(2.1, 2.3)),
    "placements_warmup.peri_lowers_loss": lower("peri", "pre", final=(2.1, 2.3), map_name="placements_warmup"),
    "placements.mix_lowers_loss": lower("mix", "pre", final=(2.1, 2.3)),
    "placements_warmup.mix_lowers_loss": lower("mix", "pre", final=(2.1, 2.3), map_name="placements_warmup"),
    "placements.reordered_steadier_gradients": (
        placements("reordered", {"l24_lr0.01": GradCurve(0.4, 0.4)}) | placements("pre", {"l24_lr0.01": GradCurve(0.4, 0.8)}),
        placements("reordered", {"l24_lr0.01": GradCurve(0.4, 0.8)}) | placements("pre", {"l24_lr0.01": GradCurve(0.4, 0.4)})),
    "dyt_alpha.alpha0_matters_low_lr": (
        dyt_alpha({0.1: Cell(2.5), 0.5: Cell(2.25), 1.0: Cell(2.2), 2.0: Cell(2.3)}),
        dyt_alpha({0.1: Cell(2.21), 0.5: Cell(2.2), 1.0: Cell(2.2), 2.0: Cell(2.2)})),
    "dyt_alpha.alpha0_matters_high_lr": (
        dyt_alpha({0.1: Cell(2.5), 0.5: Cell(2.25)}, 0.01), dyt_alpha({0.1: Cell(2.21), 0.5: Cell(2.2)}, 0.01)),
    "dyt_alpha.untuned_matches_layernorm": (
        dyt_alpha({0.5: Cell(2.205)}), dyt_alpha({0.5: Cell(2.3)})),
    "dyt_alpha.tuned_matches_layernorm": (
        dyt_alpha({0.1: Cell(2.5), 0.5: Cell(2.4), 1.0: Cell(2.205), 2.0: Cell(2.6)}),
        dyt_alpha({0.1: Cell(2.5), 0.5: Cell(2.3), 1.0: Cell(2.35), 2.0: Cell(2.6)})),
    "placements.post_fails_where_pre_trains": (
        placements("post", {"l24_lr0.01": COLLAPSED}), placements("pre", {"l24_lr0.01": COLLAPSED})),
    "modern_ladder.rmsnorm_matches_layernorm": (rung("rmsnorm", "layernorm", 2.065, 2.07),
                                                rung("rmsnorm", "layernorm", 2.12, 2.07)),
    "modern_ladder.swiglu_lowers": (rung("swiglu", "rmsnorm", 2.03, 2.07), rung("swiglu", "rmsnorm", 2.1, 2.07)),
    "modern_ladder.rope_lowers": (rung("rope", "swiglu", 2.03, 2.07), rung("rope", "swiglu", 2.1, 2.07)),
    "modern_ladder.no_bias_costs_nothing": (rung("no_bias", "rope", 2.072, 2.07), rung("no_bias", "rope", 2.12, 2.07)),
    "modern_ladder.qk_norm_costs_nothing": (rung("qk_norm", "no_bias", 2.072, 2.07),
                                            rung("qk_norm", "no_bias", 2.02, 2.07)),
    "modern_ladder.peri_lowers": (rung("peri", "qk_norm", 2.03, 2.07), rung("peri", "qk_norm", 2.1, 2.07)),
    "modern_ladder.todays_block_below_the_lectures": (rung("peri", "layernorm", 2.0, 2.07),
                                                      rung("peri", "layernorm", 2.1, 2.07)),
    "modern_ladder.without_rmsnorm_the_same": (rung("peri", "no_rmsnorm", 2.065, 2.07),
                                               rung("peri", "no_rmsnorm", 2.02, 2.07)),
    "modern_ladder.without_swiglu_higher": (rung("peri", "no_swiglu", 2.03, 2.07), rung("peri", "no_swiglu", 2.1, 2.07)),
    "modern_ladder.without_rope_higher": (rung("peri", "no_rope", 2.03, 2.07), rung("peri", "no_rope", 2.1, 2.07)),
    "modern_ladder.biases_back_the_same": (rung("peri", "with_bias", 2.072, 2.07), rung("peri", "with_bias", 2.12, 2.07)),
    "modern_ladder.without_qk_norm_the_same": (rung("peri", "no_qk_norm", 2.068, 2.07),
                                               rung("peri", "no_qk_norm", 2.02, 2.07)),
})


def widths(variant: str, finals: dict[int, float]) -> dict:
    """Overrides for a variant of the scale map, its final loss by width."""
    return {f"scale/{variant}/d{width}": Cell(final) for width, final in finals.items()}


def depths(map_name: str, variant: str, finals: list[float]) -> dict:
    """Overrides for a variant of a map over depth (its only axis), its final loss at each depth, shallow first."""
    cells = sorted({s.cell for s in PLAN.map_specs() if s.ablation == map_name}, key=lambda c: int(c.lstrip("l")))
    return {f"{map_name}/{variant}/{cell}": Cell(final) for cell, final in zip(cells, finals)}


GROWING, SHRINKING = {32: 2.3, 64: 2.4, 128: 2.5, 256: 2.6}, {32: 2.6, 64: 2.5, 128: 2.4, 256: 2.3}
DEEPER_WORSE, DEEPER_BETTER = [2.3, 2.4, 2.5, 2.6, 2.7], [2.7, 2.6, 2.5, 2.4, 2.3]
SCALE_BLOCKS = ("post", "pre", "post_warmup", "layernorm", "rmsnorm", "swiglu", "peri", "dyt")
CASES.update({
    # grows: the effect, as the claim writes it, rises with the width; fails: it falls
    "scale.post_norm_deficit_grows": (widths("post", GROWING), widths("post", SHRINKING)),
    "scale.warmup_gain_grows": (widths("post", GROWING), widths("post", SHRINKING)),
    "scale.peri_ln_gain_grows": (widths("peri", SHRINKING), widths("peri", GROWING)),
    "scale.dyt_deficit_grows": (widths("dyt", GROWING), widths("dyt", SHRINKING)),
    "scale.residual_gain_grows_with_depth": (depths("scale_residual", "without", DEEPER_WORSE),
                                             depths("scale_residual", "without", DEEPER_BETTER)),
    "scale.layernorm_scaling_gain_grows_with_depth": (depths("scale_depth", "scaled", DEEPER_BETTER),
                                                      depths("scale_depth", "scaled", DEEPER_WORSE)),
    # holds: no comparison decided at either end (every cell alike), so every verdict is the same at both; fails:
    # each comparison decided at its largest size only
    "scale.smallest_size_decides_as_the_largest": ({}, {
        **widths("post", {256: 2.5}), **widths("post_warmup", {256: 2.0}), **widths("rmsnorm", {256: 2.5}),
        **widths("swiglu", {256: 2.5}), **widths("peri", {256: 2.0}), **widths("dyt", {256: 2.5}),
        **proxies("standard", 128, P_FRAGILE), **depths("scale_residual", "without", [2.2, 2.2, 2.2, 2.2, 2.5]),
        **depths("scale_depth", "scaled", [2.2, 2.2, 2.2, 2.2, 2.0])}),
    # holds: the blocks in the same order at the narrowest and the widest width; fails: in the reverse order
    "scale.narrowest_ranks_the_blocks_as_the_widest": (
        {k: v for i, b in enumerate(SCALE_BLOCKS) for k, v in widths(b, {32: 2.3 + 0.01 * i, 256: 2.2 + 0.01 * i}).items()},
        {k: v for i, b in enumerate(SCALE_BLOCKS) for k, v in widths(b, {32: 2.3 + 0.01 * i, 256: 2.3 - 0.01 * i}).items()}),
    # flat: the same gap at every width; fails: a gap that grows by 0.1 a doubling
    "scale.rmsnorm_gap_flat": (widths("rmsnorm", {w: 2.21 for w in GROWING}), widths("rmsnorm", GROWING)),
    "scale.swiglu_gap_flat": (widths("swiglu", {w: 2.19 for w in GROWING}), widths("swiglu", SHRINKING)),
    "scale.qk_layernorm_sensitivity_gain_grows": (
        {**proxies("standard", 32, P_FLAT), **proxies("standard", 64, P_SENSITIVE), **proxies("standard", 128, P_FRAGILE)},
        {**proxies("standard", 32, P_FRAGILE), **proxies("standard", 64, P_SENSITIVE), **proxies("standard", 128, P_FLAT)}),
})
# Table A, per seed: the published figure holds, 0.02 off fails.
for _key, _value in REFERENCE["table_a"]["figures"].items():
    _ablation, _variant, _seed = _key.split("/")
    CASES[f"table_a.{_ablation}.{_variant}.{_seed}"] = ({_key: _value}, {_key: _value + 0.02})


def test_every_finding_has_made_up_results_that_make_it_hold_and_fail():
    assert sorted(FINDINGS) == sorted(CASES), "give each finding a (holds, fails) case here"


FRONTIER_RATES = (0.003, 0.01, 0.03, 0.1, 0.3)


def frontier(variant: str, untrained_from: float | None = None) -> dict:
    """Overrides for a variant of the lr_frontier map at 24 blocks: collapsed on every seed from `untrained_from`
    up (None: trains at every rate, as every cell does by default)."""
    return placements(variant, {f"l24_lr{lr:g}": COLLAPSED for lr in FRONTIER_RATES
                                if untrained_from is not None and lr >= untrained_from}, "lr_frontier")


for _id, _variant, _higher in (("peri_trains_at_higher_rates_than_pre", "peri", True),
                               ("reordered_trains_at_higher_rates_than_pre", "reordered", True),
                               ("mix_trains_at_rates_no_lower_than_pre", "mix", False),
                               ("scaling_trains_at_rates_no_lower_than_pre", "scaled", False)):
    # holds: above pre-norm's edge (higher), or at it (no lower); fails: below it
    CASES[f"lr_frontier.{_id}"] = ({**frontier("pre", 0.03 if _higher else None), **frontier(_variant)},
                                   {**frontier("pre"), **frontier(_variant, 0.01)})


@pytest.mark.parametrize("finding", sorted(CASES))
def test_a_finding_holds_on_results_that_satisfy_it_and_fails_on_results_that_break_it(finding, tmp_path):
    holding, failing = CASES[finding]
    claim = FINDINGS[finding]
    # a finding that reads the trend findings (does the smallest size predict the largest) is checked with them
    claims = [claim, *(c for c in CLAIMS if c.rule == "trend")] if claim.reads_claims else [claim]
    assert check_claims(claims, evidence(holding, tmp_path / "holds"))[finding]["verdict"] == "holds"
    assert check_claims(claims, evidence(failing, tmp_path / "fails"))[finding]["verdict"] == "fails"


def test_no_check_reads_a_training_result_and_no_finding_is_deterministic():
    """A check's quantities are counts or the untrained probe; a finding reads at least one loss."""
    training = ("loss(", "mean(", "seeds(", "window(", "at(", "lr_sensitivity(", "max_trainable_lr(", "best_lr(",
                "lowest(", "highest(",
                "untrained(", '"val_loss', '"train_loss', "rule: trend", "rule: agreement", "rule: rank_agreement")
    for claim in CLAIMS:
        text = yaml.safe_dump(claim.model_dump(exclude={"id", "claim", "kind", "known_to_fail"}))
        assert any(t in text for t in training) == (claim.kind == "finding"), claim.id
