"""Maps, not points: where each block trains over a grid of settings (params.yaml `maps:`).

A map's cells are its variants crossed with its axes (`Params.cells`); each (variant, cell, seed) is a run
`<map>/<variant>/<cell>/seed<k>`, trained by the train stage like any other. This module reads them back:

- per cell, the seed-mean final validation loss with its spread, and how many seeds collapsed, blew up or
  diverged
  (reports/maps/<map>_cells.csv, a `dvc plots` source, and the heatmaps);
- per variant and *group* (a group: the cells that share every axis value but the learning rate, e.g.
  `w0`, no warmup), the learning-rate sensitivity of Wortsman et al. 2023 (*Small-scale proxies for
  large-scale Transformer training instabilities*, section 3.2),

      LR sensitivity = E over the grid's learning rates eta of [ min(l(eta), l0) - l* ]

  where l(eta) is the final validation loss trained at eta (a run that diverged counts as l0), l0 the
  validation loss at initialisation (measured before the first step of each run) and l* the best final
  loss on the grid; computed per seed, so that two variants compare paired by seed. Beside it the best
  learning rate (the lowest seed-mean final loss) and the range of learning rates at which no seed
  collapses or blows up (reports/maps.json, which `dvc exp show` lists).

A run *trains* when it neither collapsed (its final training loss ends no more than `report.COLLAPSE_MARGIN`
below the unigram baseline) nor blew up (not finite, or far above the uniform guess: `report.outcome`). A grid where nothing trains has a small LR
sensitivity by this definition (every loss sits near l*): its trainable range, empty, says so.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from blocklab.analysis.intervals import half_width
from blocklab.params.cells import spelled
from blocklab.analysis.run_table import Axis, PlanEntry, RunTable
from blocklab.params.schema import RunSpec
from blocklab.run.results import PROBES

LR_FIELD = "lr"


def lr_sensitivity(final: list[float | None], initial: list[float]) -> float:
    """Wortsman et al.'s LR sensitivity of one grid: `final[i]` is the final loss at the grid's i-th learning
    rate (None: the run diverged), `initial[i]` that run's loss at initialisation."""
    if not final or len(final) != len(initial):
        raise ValueError("one final and one initial loss per learning rate of the grid")
    capped = [l0 if loss is None or not math.isfinite(loss) else min(loss, l0) for loss, l0 in zip(final, initial)]
    best = min(capped)  # l*: the best final loss on the grid
    return math.fsum(c - best for c in capped) / len(capped)


def group_name(spec: RunSpec) -> str:
    """The cell's name without its learning rate (`lr0.01_w0` -> `w0`; `all` when the lr is the only axis)."""
    parts = [p for p in spec.cell.split("_") if not (p.startswith(LR_FIELD) and _is_number(p[len(LR_FIELD):]))]
    return "_".join(parts) or "all"


def group_words(spec: RunSpec, axes: tuple[Axis, ...]) -> str:
    """A cell's group for people: `warmup 100`, `n_layers 4, warmup 0` (`every cell` when lr is the only axis)."""
    settings = {"model": spec.model, "train": spec.train}
    return ", ".join(f"{field} {spelled(getattr(settings[section], field))}" for section, field, _ in axes
                     if field != LR_FIELD) or "every cell"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def lr_groups(table: RunTable) -> dict[str, dict[str, list[tuple[float, str]]]]:
    """Per `<map>/<variant>`, per group, its cells `(lr, <map>/<variant>/<cell>)` from the lowest lr up: what
    `lr_sensitivity(...)` and `max_trainable_lr(...)` in claims.yaml read. Maps without an lr axis have none."""
    groups: dict[str, dict[str, list[tuple[float, str]]]] = {}
    for name, entry in table.maps.items():
        if not has_lr_axis(entry):
            continue
        for spec in entry.specs:
            groups.setdefault(f"{name}/{spec.variant}", {}).setdefault(group_name(spec), []).append(
                (spec.train.lr, spec.name))
    return {v: {g: sorted(cells) for g, cells in by_group.items()} for v, by_group in groups.items()}


def has_lr_axis(entry: PlanEntry) -> bool:
    return entry.has_axis("train", LR_FIELD)


def trains(run: dict) -> bool:
    """A run trains when it neither collapsed nor blew up (reports/metrics.json's `collapsed`, `blown_up`)."""
    return not run.get("diverged") and not run.get("collapsed") and not run.get("blown_up") \
        and run.get("val_loss") is not None


def _seeds_of(runs: dict, cell: str) -> dict[int, dict]:
    prefix = f"{cell}/seed"
    return {int(key[len(prefix):]): run for key, run in runs.items() if key.startswith(prefix)}


def seed_sensitivities(runs: dict, cells: list[tuple[float, str]]) -> dict[int, float]:
    """Per seed, the LR sensitivity of one group's cells (`lr_groups`), from reports/metrics.json's runs."""
    by_cell = [_seeds_of(runs, cell) for _, cell in cells]
    seeds = sorted(set.intersection(*(set(s) for s in by_cell)))
    return {seed: lr_sensitivity([None if c[seed].get("diverged") else c[seed]["val_loss"] for c in by_cell],
                                 [c[seed]["val_loss_init"] for c in by_cell]) for seed in seeds}


def seed_best_lr(runs: dict, cells: list[tuple[float, str]]) -> dict[int, float | None]:
    """Per seed, the learning rate of the group at which that seed's final validation loss is lowest (a run
    that diverged is not a candidate; None: every one diverged)."""
    by_cell = [(lr, _seeds_of(runs, cell)) for lr, cell in cells]
    seeds = sorted(set.intersection(*(set(s) for _, s in by_cell)))
    best = {}
    for seed in seeds:
        finished = [(c[seed]["val_loss"], lr) for lr, c in by_cell
                    if not c[seed].get("diverged") and c[seed].get("val_loss") is not None]
        best[seed] = min(finished)[1] if finished else None
    return best


def seed_max_trainable_lr(runs: dict, cells: list[tuple[float, str]]) -> dict[int, float | None]:
    """Per seed, the largest learning rate of the group at which that seed trains (None: at none)."""
    by_cell = [(lr, _seeds_of(runs, cell)) for lr, cell in cells]
    seeds = sorted(set.intersection(*(set(s) for _, s in by_cell)))
    return {seed: max((lr for lr, c in by_cell if trains(c[seed])), default=None) for seed in seeds}


def map_runs_frame(table: RunTable, name: str, metrics: dict) -> pd.DataFrame:
    """One row per run of map `name`: its variant, cell, group, axis values and final figures."""
    axes = table.maps[name].axes
    rows = []
    for spec in table.maps[name].specs:
        settings = {"model": spec.model, "train": spec.train}
        for seed in spec.seeds:
            run = metrics["runs"][spec.key(seed)]
            rows.append({"variant": spec.variant, "label": spec.label, "cell": spec.cell, "group": group_name(spec),
                         "group_label": group_words(spec, axes),
                         **{field: getattr(settings[section], field) for section, field, _ in axes},
                         # a run that diverged has no final loss (its last evaluation, before the step
                         # that broke, may be a finite 1e9): it counts in the collapsed/diverged columns
                         "seed": seed, "val_loss": None if run["diverged"] else run["val_loss"],
                         "val_loss_init": run["val_loss_init"],
                         **{probe: run.get(probe) for probe in PROBES},
                         "collapsed": bool(run["collapsed"]), "blown_up": bool(run["blown_up"]),
                         "diverged": bool(run["diverged"]), "trains": trains(run)})
    return pd.DataFrame(rows)


def cell_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, cell): the seed-mean final validation loss, its 95% half-width and range over
    the seeds that recorded one, the mean and 95% half-width over the seeds that trained alone, and how many seeds
    collapsed, blew up (diverged included), diverged and trained."""
    keys = [c for c in runs.columns if c not in ("seed", "val_loss", "val_loss_init", "collapsed", "blown_up",
                                                 "diverged", "trains", *PROBES)]
    rows = []
    for values, group in runs.groupby(keys, sort=False):
        losses = group["val_loss"].dropna().astype(float)
        trained = group.loc[group["trains"], "val_loss"].dropna().astype(float)
        rows.append({**dict(zip(keys, values)), "seeds": len(group),
                     "val_loss_mean": round(float(losses.mean()), 6) if len(losses) else None,
                     "val_loss_ci95": round(half_width(losses), 6) if len(losses) > 1 else None,
                     "val_loss_min": round(float(losses.min()), 6) if len(losses) else None,
                     "val_loss_max": round(float(losses.max()), 6) if len(losses) else None,
                     # the seeds that trained alone: what the figures draw on the trained scale
                     "val_loss_trained_mean": round(float(trained.mean()), 6) if len(trained) else None,
                     "val_loss_trained_ci95": round(half_width(trained), 6) if len(trained) > 1 else None,
                     "collapsed": int(group["collapsed"].sum()), "blown_up": int(group["blown_up"].sum()),
                     "diverged": int(group["diverged"].sum()), "trained": int(group["trains"].sum()),
                     # blocklab.run.diagnostics at the last evaluation, seed means (6 significant figures: the
                     # attention logit spans orders of magnitude)
                     **{f"{probe}_mean": _significant(group[probe].dropna().astype(float).mean()) for probe in PROBES}})
    return pd.DataFrame(rows)


def _significant(value: float, figures: int = 6) -> float | None:
    return None if not math.isfinite(value) else float(f"{value:.{figures}g}")


def map_summary(table: RunTable, metrics: dict, tables: dict[str, pd.DataFrame] | None = None) -> dict[str, dict]:
    """reports/maps.json, what `dvc exp show` lists of each map: per `<map>/<variant>/<group>`, the seed-mean
    LR sensitivity with its 95% half-width, the best learning rate, the smallest and largest learning
    rate at which no seed collapses or blows up (absent when there is none), and each seed's largest rate that
    trains. `tables`: each map's
    `cell_table`, if already made (`write_tables` returns them)."""
    tables = tables or {name: cell_table(map_runs_frame(table, name, metrics)) for name in table.maps}
    indexed = {name: table.set_index(["variant", "cell"]) for name, table in tables.items()}
    summary = {}
    for variant, groups in lr_groups(table).items():
        cells = indexed[variant.split("/")[0]]
        for group, members in groups.items():
            sensitivity = pd.Series(seed_sensitivities(metrics["runs"], members), dtype=float)
            rows = [cells.loc[(variant.split("/")[1], cell.rsplit("/", 1)[1])] for _, cell in members]
            recorded = [(row["val_loss_mean"], lr) for (lr, _), row in zip(members, rows)
                        if row["val_loss_mean"] is not None and row["diverged"] == 0]
            trainable = [lr for (lr, _), row in zip(members, rows) if row["trained"] == row["seeds"]]
            best_lr, top_lr = min(recorded)[1] if recorded else None, max(trainable, default=None)
            logits = {lr: row["attn_logit_max_mean"] for (lr, _), row in zip(members, rows)}
            per_seed = seed_max_trainable_lr(metrics["runs"], members)
            entry = {"lr_sensitivity": round(float(sensitivity.mean()), 6),
                     "lr_sensitivity_ci95": round(half_width(sensitivity), 6) if len(sensitivity) > 1 else None,
                     "best_lr": best_lr,
                     "trainable_lr_min": min(trainable, default=None),
                     "trainable_lr_max": top_lr,
                     # each seed's largest rate that trains (null: none): the spread behind trainable_lr_max
                     "trainable_lr_max_by_seed": [per_seed[seed] for seed in sorted(per_seed)] or None,
                     # the largest attention logit (seed mean) where the map trains best, and at its edge
                     "attn_logit_max_at_best_lr": logits.get(best_lr),
                     "attn_logit_max_at_trainable_lr_max": logits.get(top_lr)}
            summary[f"{variant}/{group}"] = {k: v for k, v in entry.items() if v is not None}
    return summary


def lr_plot_table(cells: pd.DataFrame) -> pd.DataFrame:
    """What `dvc plots` draws of a map with an lr axis, a line per variant and group of cells: one row per
    (variant, group, learning rate) where a seed recorded a final loss, with the rate's log10 (the axis it is
    drawn on), the group's place in the map's grid, and the seed-mean final validation loss. Long, so that one definition in dvc.yaml draws every map's, whatever its variants."""
    lines = cells.assign(
        variant_order=cells["variant"].map({v: i for i, v in enumerate(dict.fromkeys(cells["variant"]))}),
        group_index=cells["group"].map({g: i for i, g in enumerate(dict.fromkeys(cells["group"]))}),
        log10_lr=[round(math.log10(lr), 6) for lr in cells[LR_FIELD]])
    # a line ends where no seed recorded a final loss (every seed diverged): an empty cell would be drawn at 0
    lines = lines[lines["val_loss_mean"].notna()].sort_values(["variant_order", "group_index", LR_FIELD], kind="stable")
    return lines[["log10_lr", LR_FIELD, "variant", "label", "group", "group_index", "group_label", "val_loss_mean"]]


LR_PLOTS = "lr"  # reports/maps/lr/<map>.csv: the lr plot's lines


def write_tables(table: RunTable, metrics: dict, out_dir: Path) -> dict[str, pd.DataFrame]:
    """reports/maps/<map>_cells.csv (every cell) and lr/<map>.csv (the lr plot's lines), per map."""
    out_dir = Path(out_dir)
    (out_dir / LR_PLOTS).mkdir(parents=True, exist_ok=True)
    tables = {}
    for name, entry in table.maps.items():
        cells = tables[name] = cell_table(map_runs_frame(table, name, metrics))
        cells.to_csv(out_dir / f"{name}_cells.csv", index=False, lineterminator="\n")
        if has_lr_axis(entry):
            lr_plot_table(cells).to_csv(out_dir / LR_PLOTS / f"{name}.csv", index=False, lineterminator="\n")
    return tables


def map_section(table: RunTable, name: str, summary: dict[str, dict], figures: dict[str, str], extra: str = "") -> str:
    """reports/summary.md's section of map `name`: what it is, each variant's LR sensitivity, best learning
    rate and trainable range per group (reports/maps.json) where it has a learning-rate axis, `extra` (markdown: the
    trend table), and its figures."""
    plan = table.maps[name]
    axes = ", ".join(f"{section}.{field} {', '.join(map(str, values))}" for section, field, values in plan.axes)
    words = {group_name(spec): group_words(spec, plan.axes) for spec in plan.specs}
    rows = []
    for line, entry in summary.items():
        map_name, variant, group = line.split("/")
        if map_name != name:
            continue
        sensitivity = f"{entry['lr_sensitivity']:.3f}" + (f" ± {entry['lr_sensitivity_ci95']:.3f}"
                                                          if "lr_sensitivity_ci95" in entry else "")
        trainable = (f"{entry['trainable_lr_min']:g} to {entry['trainable_lr_max']:g}" if "trainable_lr_min" in entry
                     else "none")
        best = f"{entry['best_lr']:g}" if "best_lr" in entry else "none"
        seeds = ", ".join("none" if lr is None else f"{lr:g}" for lr in entry.get("trainable_lr_max_by_seed", []))
        rows.append(f"| {plan.labels.get(variant, variant)} | {words[group]} | {sensitivity} | {best} | {trainable} "
                    f"| {seeds} |")
    table = ("| variant | cells | LR sensitivity | best lr | lr where no seed collapses or blows up "
             "| each seed's largest lr that trains |\n"
             "|---|---|---|---|---|---|\n" + "\n".join(rows)) if rows else ""
    images = "\n\n".join(f"![{name} {kind}]({path})" for kind, path in figures.items())
    sensitivity = ("LR sensitivity (Wortsman et al. 2023) is the mean over the grid's learning rates of min(final loss, "
                   "loss at initialisation) minus the best final loss, per seed (a diverged run counts as its loss at "
                   "initialisation); ± is the half-width of its 95% interval over the seeds." if rows else "")
    blocks = "\n\n".join(b for b in (table, extra, images) if b)
    return (f"## Map: {name}\n\n{plan.description}\n\nAxes: {axes}; seeds {', '.join(map(str, plan.seeds))}; "
            f"{len(plan.specs)} cells, {len(plan.specs) * len(plan.seeds)} runs. {sensitivity}".rstrip()
            + f"\n\n{blocks}\n")
