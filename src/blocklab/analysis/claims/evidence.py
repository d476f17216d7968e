"""What a claim's quantities read: the pipeline's reports and the runs' curves (`Evidence`), and what is missing
from them: a run params.yaml does not plan (`MissingResult`: the claims file or the pipeline is broken) or one
that has not run here yet (`NotRunYet`)."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from blocklab.analysis.claims.transfer import Ranking, rank_agreement
from blocklab.analysis.claims.trends import SizePoint, size_points
from blocklab.analysis.intervals import Seeds
from blocklab.analysis.maps import seed_best_lr, seed_max_trainable_lr, seed_sensitivities, trains
from blocklab.analysis.reference import comparable
from blocklab.errors import BlocklabError

LOSS = "train_loss_last25"
NOT_RUN = "not run yet"


class MissingResult(BlocklabError):
    """A claim names a run or value the reports do not have, and params.yaml plans no such run: the claims file
    or the pipeline is broken."""


class NotRunYet(MissingResult):
    """A claim needs runs that params.yaml plans but that have not run here yet (a fresh clone has the committed
    reports but no runs' curves; `make demo` trains a few ablations only): `command` would run them."""

    def __init__(self, message: str, command: str):
        super().__init__(message)
        self.command = command


class NotComparable(Exception):
    """A claim reads a figure published on another corpus than this run's."""


class Evidence:
    """What claims are evaluated over: reports/metrics.json, reports/gradients.json, and the published
    figures (reference.yaml) with the sha256 of the corpus this run trained on."""

    def __init__(self, metrics: dict, gradients: dict | None, reference: dict | None = None, corpus: str | None = None,
                 runs_dir: Path | None = None, maps: dict | None = None, planned: dict[str, str] | None = None):
        self.maps = maps or {}  # blocklab.analysis.maps.lr_groups(table): which cells each map variant's groups hold
        self.runs = metrics.get("runs", {})
        self.baselines = metrics.get("baselines", {})
        self.gradients = gradients  # None: the gradients stage has not run here
        self.reference = reference or {}
        self.corpus = corpus
        self.runs_dir = None if runs_dir is None else Path(runs_dir)
        # {run key: the DVC stage that trains it} for every run params.yaml plans (RunTable.training_stages): a run
        # it plans that is missing has not run yet; one it does not plan is a broken claim
        self.planned = planned or {}
        self._curves: dict[str, list[dict]] = {}

    def _not_run(self, name: str, what: str, command: str | None = None) -> NotRunYet | None:
        """NotRunYet when params.yaml plans run (or variant, or cell) `name`, else None."""
        stages = sorted({stage for key, stage in self.planned.items() if key == name or key.startswith(f"{name}/")})
        if not stages:
            return None
        return NotRunYet(f"{name}: {what}", command or f"dvc repro {' '.join(stages)}")

    def _curve(self, run: str) -> list[dict]:
        """A run's curve.csv as rows of numbers (None where a row has no value), read once."""
        if run not in self._curves:
            path = None if self.runs_dir is None else self.runs_dir / run / "curve.csv"
            if path is None or not path.exists():
                raise self._not_run(run, f"its curve is not here ({self.runs_dir}: written by the stage that trains it)") or MissingResult(
                    f"run '{run}' has no curve{'' if path is None else f' at {path}'}: did `dvc repro` finish?")
            with open(path, newline="") as f:
                self._curves[run] = [{k: None if v == "" else float(v) for k, v in row.items()} for row in csv.DictReader(f)]
        return self._curves[run]

    def _curve_values(self, variant: str, field: str, keep) -> Seeds:
        seeds = self._by_seed(variant, LOSS)
        values = {}
        for seed in seeds:
            rows = self._curve(f"{variant}/seed{seed}")
            if rows and field not in rows[0]:
                raise MissingResult(f"the curves of '{variant}' have no column '{field}'")
            chosen = [row[field] for row in rows if keep(row["step"]) and row[field] is not None]
            if not chosen:
                raise MissingResult(f"the curve of {variant}/seed{seed} has no '{field}' at the steps asked for")
            values[seed] = math.fsum(chosen) / len(chosen)
        return Seeds(values, f"{variant}:{field}")

    def window(self, variant: str, first: int, last: int, field: str = "loss") -> Seeds:
        """Per seed, the mean of the curve's `field` over steps `first` to `last` (inclusive)."""
        return self._curve_values(variant, field, lambda step: first <= step <= last)

    def at(self, variant: str, step: int, field: str = "val_loss") -> Seeds:
        """Per seed, the curve's `field` at `step` (e.g. an evaluation step's validation loss)."""
        return self._curve_values(variant, field, lambda s: s == step)

    def slope_at(self, variant: str, step: int | str) -> Seeds:
        """Per seed, the slope of ln RMS over the blocks (blocklab.analysis.stream's `log_rms_slope_by_step`) at
        evaluation `step`: a step number, or "first" or "last", the run's first or last evaluation."""
        values = {}
        for seed, pairs in self._by_seed(variant, "log_rms_slope_by_step").items():
            if step in ("first", "last"):
                chosen = pairs[0 if step == "first" else -1][1] if pairs else None
            elif (chosen := dict(pairs).get(step, KeyError)) is KeyError:
                raise MissingResult(f"run {variant}/seed{seed} has no evaluation at step {step} (its steps: "
                                    f"{', '.join(str(s) for s, _ in pairs)}; or \"first\", \"last\")")
            values[seed] = chosen
        return Seeds(values, f"slope_at({variant}, {step})")

    def _lr_group(self, variant: str, group: str) -> list[tuple[float, str]]:
        if variant not in self.maps:
            raise MissingResult(f"'{variant}' is no variant of a map with a learning-rate axis (known: "
                                f"{', '.join(self.maps) or 'none'})")
        if group not in self.maps[variant]:
            raise MissingResult(f"map variant '{variant}' has no group '{group}' (known: {', '.join(self.maps[variant])})")
        for _, cell in self.maps[variant][group]:
            if not any(k.startswith(f"{cell}/seed") for k in self.runs):
                raise self._not_run(cell, _NOT_IN_METRICS, "dvc repro") or MissingResult(
                    f"no runs of map cell '{cell}' in reports/metrics.json: did `dvc repro` finish?")
        return self.maps[variant][group]

    def lr_sensitivity(self, variant: str, group: str) -> Seeds:
        return Seeds(seed_sensitivities(self.runs, self._lr_group(variant, group)), f"lr_sensitivity({variant}, {group})")

    def max_trainable_lr(self, variant: str, group: str) -> Seeds:
        return Seeds(seed_max_trainable_lr(self.runs, self._lr_group(variant, group)),
                     f"max_trainable_lr({variant}, {group})")

    def best_lr(self, variant: str, group: str) -> Seeds:
        return Seeds(seed_best_lr(self.runs, self._lr_group(variant, group)), f"best_lr({variant}, {group})")

    def _map_variants_ran(self, map_name: str, variants) -> None:
        for variant in variants:
            name = f"{map_name}/{variant}"
            if not any(k.startswith(f"{name}/") for k in self.runs):
                raise self._not_run(name, _NOT_IN_METRICS, "dvc repro") or MissingResult(
                    f"no runs of map variant '{name}' in reports/metrics.json: is it in params.yaml?")

    def trend(self, map_name: str, left: str, right: str, quantity: str) -> list[SizePoint]:
        """The effect of map variant `left` minus `right` at each of the map's sizes (blocklab.analysis.claims.trends)."""
        self._map_variants_ran(map_name, (left, right))
        try:
            return size_points(self.runs, map_name, left, right, quantity, self.maps)
        except BlocklabError as err:
            raise MissingResult(str(err)) from None

    def ranking(self, map_name: str, variants: list[str]) -> Ranking:
        """Map `map_name`'s `variants` ranked at its smallest and largest size (blocklab.analysis.claims.transfer)."""
        self._map_variants_ran(map_name, variants)
        try:
            return rank_agreement(self.runs, map_name, variants)
        except BlocklabError as err:
            raise MissingResult(str(err)) from None

    def metric(self, run: str, field: str = LOSS) -> float:
        if run not in self.runs:
            raise self._not_run(run, _NOT_IN_METRICS, "dvc repro") or MissingResult(
                f"run '{run}' is not in reports/metrics.json: is it in params.yaml, and did `dvc repro` finish?")
        if field not in self.runs[run]:
            raise MissingResult(f"run '{run}' has no field '{field}' in reports/metrics.json")
        return self.runs[run][field]

    def _by_seed(self, variant: str, field: str) -> dict[int, float | None]:
        keys = [k for k in self.runs if k.rsplit("/", 1)[0] == variant]
        if not keys:
            raise self._not_run(variant, _NOT_IN_METRICS, "dvc repro") or MissingResult(
                f"no runs of variant '{variant}' in reports/metrics.json")
        return {int(k.rsplit("seed")[-1]): self.metric(k, field) for k in keys}

    def untrained(self, variant: str) -> int:
        """How many of `variant`'s seeds (a map's: of one cell) did not train: collapsed, blew up or diverged."""
        keys = [k for k in self.runs if k.rsplit("/", 1)[0] == variant]
        if not keys:
            raise self._not_run(variant, _NOT_IN_METRICS, "dvc repro") or MissingResult(
                f"no runs of variant '{variant}' in reports/metrics.json")
        return sum(not trains(self.runs[k]) for k in keys)

    def seeds(self, variant: str, field: str = LOSS) -> list[float]:
        return list(dict(sorted(self._by_seed(variant, field).items())).values())

    def mean(self, variant: str, field: str = LOSS) -> Seeds:
        return Seeds(self._by_seed(variant, field), f"{variant}" if field == LOSS else f"{variant}:{field}")

    def _extreme(self, variants: tuple[str, ...], pick, word: str) -> Seeds:
        if not variants:
            raise BlocklabError(f"claims.yaml: {word}(...) needs at least one variant")
        means = {v: self.mean(v, "val_loss") for v in variants}
        usable = {v: m for v, m in means.items() if not m.missing()}
        if not usable:
            return next(iter(means.values()))
        chosen = pick(usable, key=lambda v: statistics.fmean(usable[v].values.values()))
        return Seeds(usable[chosen].values, f"{word}({', '.join(variants)}) = {chosen}")

    def lowest(self, *variants: str) -> Seeds:
        """Per seed, the final validation loss of whichever of `variants` (map cells, say DyT's at each initial
        alpha) ends lowest on the seed mean: a setting tuned as its paper tunes it, by the mean, not seed by seed."""
        return self._extreme(variants, min, "lowest")

    def highest(self, *variants: str) -> Seeds:
        """Per seed, the final validation loss of whichever of `variants` ends highest on the seed mean (with
        `lowest`, a setting's sensitivity: the worst of a sweep minus its best)."""
        return self._extreme(variants, max, "highest")

    def std(self, variant: str, field: str = LOSS) -> float | None:
        values = self.seeds(variant, field)
        return None if None in values or len(values) < 2 else statistics.stdev(values)

    def baseline(self, name: str) -> float:
        if name not in self.baselines:
            raise MissingResult(f"baseline '{name}' is not in reports/metrics.json")
        return self.baselines[name]

    def published(self, table: str, key: str) -> float:
        entry = self.reference.get(table)
        if not isinstance(entry, dict) or key not in entry.get("figures", {}):
            raise MissingResult(f"reference.yaml has no published figure '{key}' in '{table}'")
        if self.corpus is not None and not comparable(self.reference, table, self.corpus):
            raise NotComparable(f"{table} was published on corpus {str(entry.get('corpus'))[:12]}…, this run "
                                f"trained on {self.corpus[:12]}…")
        return entry["figures"][key]

    def _gradients(self) -> dict:
        if self.gradients is None:
            raise NotRunYet("the gradient analysis has not run here", "dvc repro gradients")
        return self.gradients

    def grad(self, stack: str, depth: int) -> float:
        self._gradients()
        try:
            return self.gradients[stack][str(depth)]
        except KeyError:
            raise MissingResult(f"reports/gradients.json has no '{stack}' at depth {depth}") from None

    def grads(self, stack: str) -> list[float]:
        if stack not in self._gradients():
            raise MissingResult(f"reports/gradients.json has no '{stack}'")
        return [v for _, v in sorted(self.gradients[stack].items(), key=lambda kv: int(kv[0]))]


_NOT_IN_METRICS = "not in the metrics (made by `dvc repro`'s evaluate stage from every run)"
