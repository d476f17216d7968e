"""Does small predict large? Two findings over the sizes of the trend findings (trends.py).

- Verdict agreement (DataDecide's decision accuracy, Magnusson et al. 2025): for each trend comparison, the verdict at
  its smallest size (which variant ends lower, decided by the paired effect's 95% interval, or neither) against the
  verdict at its largest size; the share of comparisons where they are the same, with its exact (Clopper-Pearson) 95%
  interval and the binomial test against a stated share (`than`): holds when the interval lies above it, fails when
  below.
- Rank agreement: a map's variants ranked by their seed-mean final validation loss (a diverged run counted at its
  initial loss, as the trends count it) at the smallest size and at the largest; Kendall's tau between the two
  rankings with its exact test (SciPy): holds when tau > 0 at 95%, fails when tau < 0 at 95%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from blocklab.analysis.claims.trends import SizePoint, by_size, capped_loss, run_flops
from blocklab.analysis.intervals import CONFIDENCE
from blocklab.errors import BlocklabError

SIDE_WORDS = {1: "right lower", -1: "left lower", 0: "neither decided"}


def decided_side(point: SizePoint) -> int:
    """+1 when the effect (left minus right) is decidedly positive at this size (the right variant ends lower), -1
    when decidedly negative, 0 when its 95% interval holds zero (or there is none)."""
    low, high = point.effect.estimate().interval()
    return 0 if math.isnan(low) else 1 if low > 0 else -1 if high < 0 else 0


@dataclass(frozen=True)
class Agreement:
    """One comparison's verdict at its smallest and its largest size, and whether they are the same; and whether
    the variant lower on the seed mean is the same at both (DataDecide's winner, decided or not)."""
    comparison: str
    smallest: str
    largest: str
    small_side: int
    large_side: int
    same_winner: bool

    @property
    def agrees(self) -> bool:
        return self.small_side == self.large_side

    def record(self) -> dict:
        return {"comparison": self.comparison, "smallest": self.smallest, "largest": self.largest,
                "at_smallest": SIDE_WORDS[self.small_side], "at_largest": SIDE_WORDS[self.large_side],
                "agrees": self.agrees, "same_winner": self.same_winner}


def agreement(comparison: str, points: list[SizePoint]) -> Agreement:
    """The verdicts of a trend's smallest and largest size (`points`, smallest compute first)."""
    means = [p.effect.estimate().mean for p in (points[0], points[-1])]
    return Agreement(comparison, points[0].size, points[-1].size, decided_side(points[0]), decided_side(points[-1]),
                     (means[0] > 0) == (means[1] > 0))


@dataclass(frozen=True)
class Share:
    agreeing: int
    total: int
    interval: tuple[float, float]
    p_value: float
    verdict: str

    @property
    def share(self) -> float:
        return self.agreeing / self.total


def share_agreeing(agreements: list[Agreement], than: float) -> Share:
    """The share of `agreements` that agree, its exact 95% interval, and the verdict against `than`."""
    if not agreements:
        raise BlocklabError("no trend finding has run: there is no comparison whose sizes could agree")
    agreeing, total = sum(a.agrees for a in agreements), len(agreements)
    low, high = stats.binomtest(agreeing, total, than).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    # the central two-sided p-value, the test the exact interval inverts: below 1 - CONFIDENCE exactly when the
    # interval leaves out `than` (the family's correction reads it)
    p_value = min(1.0, 2 * min(stats.binom.cdf(agreeing, total, than), stats.binom.sf(agreeing - 1, total, than)))
    verdict = "holds" if low > than else "fails" if high < than else "inconclusive"
    return Share(agreeing, total, (float(low), float(high)), float(p_value), verdict)


@dataclass(frozen=True)
class Ranking:
    """A map's variants ranked at its smallest and its largest size (1 = the lowest loss), and Kendall's tau."""
    smallest: str
    largest: str
    ranks: dict[str, tuple[int, int]]  # variant: (rank at the smallest size, rank at the largest)
    losses: dict[str, tuple[float, float]]  # variant: the seed-mean capped loss at each
    tau: float
    p_value: float

    @property
    def verdict(self) -> str:
        if self.p_value < 1 - CONFIDENCE:
            return "holds" if self.tau > 0 else "fails"
        return "inconclusive"

    def record(self) -> dict:
        return {"smallest": self.smallest, "largest": self.largest,
                "variants": {v: {"rank_smallest": r[0], "rank_largest": r[1],
                                 "loss_smallest": round(self.losses[v][0], 6),
                                 "loss_largest": round(self.losses[v][1], 6)} for v, r in self.ranks.items()}}


def _ranks(values: dict[str, float]) -> dict[str, int]:
    return {name: rank for rank, name in enumerate(sorted(values, key=values.get), start=1)}


def rank_agreement(runs: dict, map_name: str, variants: list[str]) -> Ranking:
    """Kendall's tau between `variants`' rankings (map `map_name`) at the smallest and the largest of the sizes
    every one of them ran, sizes ordered by the first variant's training compute there."""
    by_variant = {v: by_size(runs, f"{map_name}/{v}") for v in variants}
    sizes = sorted(set.intersection(*(set(found) for found in by_variant.values()))) if variants else []
    if len(variants) < 3 or len(sizes) < 2:
        raise BlocklabError(f"rank agreement over map '{map_name}' needs 3 or more variants at 2 or more sizes; "
                            f"found {len(variants)} variants, sizes {', '.join(sizes) or 'none'}")
    first = by_variant[variants[0]]
    sizes.sort(key=lambda s: run_flops(list(first[s].values()), f"{map_name}/{variants[0]}/{s}"))
    ends = sizes[0], sizes[-1]
    losses = {v: tuple(math.fsum(capped_loss(r) for r in by_variant[v][s].values()) / len(by_variant[v][s])
                       for s in ends) for v in variants}
    small, large = (_ranks({v: pair[i] for v, pair in losses.items()}) for i in (0, 1))
    test = stats.kendalltau([small[v] for v in variants], [large[v] for v in variants])
    return Ranking(ends[0], ends[1], {v: (small[v], large[v]) for v in variants}, losses, float(test.statistic),
                   float(test.pvalue))
