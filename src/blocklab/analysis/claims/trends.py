"""Trend findings: does a comparison's effect grow, shrink, flip its sign or stay flat as the model grows?

A map with a size axis (params.yaml's `scale`: widths at fixed steps, as Wortsman et al.'s small-scale proxies
hold them) trains two variants at every size. At each size the effect is the left variant's quantity minus the
right's, paired by seed; its size is the right variant's training compute there (the FLOPs its runs record). The
trend is the slope of the effect against log10 of that compute, fitted per seed (least squares over the sizes)
and averaged over the seeds with its paired-t interval: the seed is the replicate, as in every other finding.

The quantity is the final validation loss, capped as Wortsman et al. cap it: a run that did not reach a finite
loss below its loss at initialisation counts at that initial loss (a diverged run keeps the effect finite and
its own size). Or, over a map that also has a learning-rate axis, each size's LR sensitivity (its group of cells,
blocklab.analysis.maps).

A trend claim declares what its paper expects (`expect`), of the effect as it is written, left minus right (a
claim writes it the way its paper expects it positive: a gain, or a deficit):
- grows: the effect rises as compute grows: the slope's 95% interval lies above zero; fails when it lies wholly
  below (a gain that shrinks, or turns into a loss, does not grow, whatever its sign at the smallest size);
- shrinks: the same, the other way;
- flips: the effect at the smallest size and at the largest are both decided (95%) and of opposite signs; fails
  when both are decided with the same sign;
- flat: the slope per tenfold compute lies within +-`margin`: its 90% interval inside (two one-sided tests at 5%,
  as `within`), fails when its 95% interval lies wholly outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blocklab.analysis.intervals import CONFIDENCE, Estimate, Seeds, equivalence
from blocklab.analysis.maps import seed_sensitivities, trains
from blocklab.errors import BlocklabError

QUANTITIES = ("val_loss", "lr_sensitivity")
EXPECTATIONS = ("grows", "shrinks", "flips", "flat")


@dataclass(frozen=True)
class SizePoint:
    """One size of a trend: its name (a map cell, or a learning-rate group such as `d128`), the right-hand
    variant's training FLOPs there, and the effect (left minus right) per seed."""
    size: str
    flops: float
    effect: Seeds
    untrained: int = 0  # runs of the pair that did not train (collapsed or diverged), of a final-loss effect

    def record(self) -> dict:
        """What reports/claims.json keeps of it: the size, its compute, the effect's mean and 95% interval, and
        how many of its runs did not train."""
        estimate = self.effect.estimate()
        low, high = estimate.interval()
        return {"size": self.size, "flops": self.flops, "effect": round(estimate.mean, 6),
                "interval": None if math.isnan(low) else [round(low, 6), round(high, 6)], "untrained": self.untrained}


def capped_loss(run: dict) -> float:
    """A run's final validation loss, capped at its loss at initialisation (Wortsman et al. 2023: a run that
    diverged counts at its initial loss)."""
    loss, initial = run.get("val_loss"), run["val_loss_init"]
    return initial if loss is None or not math.isfinite(loss) else min(loss, initial)


def by_size(runs: dict, variant: str) -> dict[str, dict[int, dict]]:
    """`{cell: {seed: run}}` of map variant `variant` (`<map>/<variant>`), from reports/metrics.json's runs."""
    found: dict[str, dict[int, dict]] = {}
    prefix = f"{variant}/"
    for key, run in runs.items():
        if key.startswith(prefix):
            cell, seed = key[len(prefix):].rsplit("/seed", 1)
            if "/" not in cell:
                found.setdefault(cell, {})[int(seed)] = run
    return found


def run_flops(runs_of_size: list[dict], where: str) -> float:
    """The one training compute the runs of a size record (BlocklabError when they record none, or several)."""
    flops = {run.get("training_flops") for run in runs_of_size}
    if None in flops or len(flops) != 1:
        raise BlocklabError(f"{where}: its runs do not record one training compute (training_flops: {sorted(map(str, flops))})")
    return float(flops.pop())


def size_points(runs: dict, map_name: str, left: str, right: str, quantity: str = "val_loss",
                groups: dict | None = None) -> list[SizePoint]:
    """The effect of `left` minus `right` (variants of map `map_name`) at each of the map's sizes, smallest compute
    first. `quantity` val_loss reads one cell per size; lr_sensitivity one learning-rate group per size, from
    `groups` (blocklab.analysis.maps.lr_groups). Raises BlocklabError when the map has no such runs or sizes."""
    names = f"{map_name}/{left}", f"{map_name}/{right}"
    if quantity == "lr_sensitivity":
        if groups is None or any(n not in groups for n in names):
            raise BlocklabError(f"trend of lr_sensitivity: {' and '.join(names)} must be variants of a map with a "
                                f"learning-rate axis")
        sizes = sorted(set(groups[names[0]]) & set(groups[names[1]]))
        points = []
        for size in sizes:
            values = [seed_sensitivities(runs, groups[n][size]) for n in names]
            paired = set(values[0]) & set(values[1])
            values = [{s: v for s, v in found.items() if s in paired} for found in values]
            cells = [run for _, cell in groups[names[1]][size] for key, run in runs.items()
                     if key.rsplit("/seed", 1)[0] == cell]
            points.append(SizePoint(size, run_flops(cells, f"{names[1]}'s group {size}"),
                                    Seeds(values[0], names[0]) - Seeds(values[1], names[1])))
    elif quantity == "val_loss":
        left_runs, right_runs = (by_size(runs, n) for n in names)
        sizes = sorted(set(left_runs) & set(right_runs))
        points = []
        for size in sizes:
            paired = sorted(set(left_runs[size]) & set(right_runs[size]))  # the seeds both variants ran
            points.append(SizePoint(
                size, run_flops(list(right_runs[size].values()), f"{names[1]}/{size}"),
                Seeds({s: capped_loss(left_runs[size][s]) for s in paired}, f"{names[0]}/{size}")
                - Seeds({s: capped_loss(right_runs[size][s]) for s in paired}, f"{names[1]}/{size}"),
                sum(not trains(found[s]) for found in (left_runs[size], right_runs[size]) for s in paired)))
    else:
        raise BlocklabError(f"trend quantity '{quantity}': one of {', '.join(QUANTITIES)}")
    points.sort(key=lambda p: p.flops)
    if len(points) < 2:
        raise BlocklabError(f"a trend of {' - '.join(names)} needs at least two sizes; found "
                            f"{', '.join(p.size for p in points) or 'none'}")
    repeated = [b.size for a, b in zip(points, points[1:]) if a.flops == b.flops]
    if repeated:
        raise BlocklabError(f"{map_name}: sizes {', '.join(repeated)} train with the compute of the size before them; "
                            f"a trend needs one cell per size (a map with a learning-rate axis: quantity lr_sensitivity)")
    return points


def slope(points: list[SizePoint]) -> Seeds:
    """Per seed, the least-squares slope of the effect against log10 of the training compute (a change per
    tenfold compute), over the seeds recorded at every size."""
    seeds = set.intersection(*(set(p.effect.values) for p in points))
    if not seeds:
        raise BlocklabError(f"no seed is recorded at every size of {points[0].effect.name}")
    x = [math.log10(p.flops) for p in points]
    centre = math.fsum(x) / len(x)
    spread = math.fsum((v - centre) ** 2 for v in x)
    fitted = {}
    for seed in sorted(seeds):
        y = [p.effect.values[seed] for p in points]
        mean = math.fsum(y) / len(y)
        fitted[seed] = math.fsum((a - centre) * (b - mean) for a, b in zip(x, y)) / spread
    return Seeds(fitted, f"slope({points[0].effect.name})", paired=True)


def _side(estimate: Estimate) -> int:
    """+1 or -1 when the 95% interval lies wholly above or below zero, else 0."""
    lo, hi = estimate.interval()
    return 1 if lo > 0 else -1 if hi < 0 else 0


@dataclass(frozen=True)
class TrendVerdict:
    verdict: str
    slope: Estimate
    interval: tuple[float, float]
    confidence: float
    seeds_needed: int | None
    p_value: float


def decide(points: list[SizePoint], expect: str, margin: float | None = None) -> TrendVerdict:
    """The trend's verdict (see the module's docstring)."""
    estimate = slope(points).estimate()
    if estimate.n < 2:
        return TrendVerdict("inconclusive", estimate, (math.nan, math.nan), CONFIDENCE, None, math.nan)
    interval = estimate.interval()
    if expect in ("grows", "shrinks"):
        side = _side(estimate) * (1 if expect == "grows" else -1)
        verdict = {1: "holds", -1: "fails", 0: "inconclusive"}[side]
        return TrendVerdict(verdict, estimate, interval, CONFIDENCE,
                            None if side else estimate.seeds_to_decide(abs(estimate.mean)), estimate.p_two_sided())
    if expect == "flips":
        ends = [points[0].effect.estimate(), points[-1].effect.estimate()]
        sides = [_side(e) for e in ends]
        verdict = ("holds" if sides[0] * sides[1] == -1 else "fails" if sides[0] * sides[1] == 1 else
                   "inconclusive")
        undecided = [e for e, s in zip(ends, sides) if not s]
        needed = [e.seeds_to_decide(abs(e.mean)) for e in undecided]
        return TrendVerdict(verdict, estimate, interval, CONFIDENCE,
                            None if not needed or None in needed else max(needed),
                            max(e.p_two_sided() for e in ends))  # an intersection-union test: the larger p
    if expect == "flat":  # two one-sided tests of the slope within the margin, as `within` tests a difference
        found = equivalence(estimate, margin)
        return TrendVerdict(found.verdict, estimate, found.interval, found.confidence, found.seeds_needed,
                            found.p_value)
    raise BlocklabError(f"trend expect '{expect}': one of {', '.join(EXPECTATIONS)}")
