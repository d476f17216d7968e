"""Seed statistics with their uncertainty, for the findings in claims.yaml.

A variant's seed mean carries a 95% Student-t interval. A difference of two variants trained on the same
seeds is a mean of per-seed differences (paired: the same seed sees the same batches, so most of the
noise cancels), with a paired-t interval; of variants trained on different seeds, Welch's interval.
The distributions are SciPy's (`scipy.stats.t`).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, replace

from scipy import stats

from blocklab.errors import BlocklabError

CONFIDENCE = 0.95
# Seeds beyond which "how many would decide it" is no longer a useful answer.
MAX_SEEDS = 1000


def half_width(values, confidence: float = CONFIDENCE) -> float:
    """Half the `confidence` Student-t interval of the mean of `values` (NaN where fewer than two are
    recorded: no spread is known). None and NaN values are left out."""
    finite = [float(v) for v in values if v is not None and v == v]
    return Estimate.of_values(finite, paired=False).half_width(confidence) if finite else math.nan


class Seeds:
    """One value per seed, `{seed: value}`, of a variant or of arithmetic over variants. Arithmetic with a
    number is per seed; with another `Seeds` over the same seeds it is per seed too (paired); `+` and `-`
    over different seeds give a `Welch` estimate."""

    def __init__(self, values: dict[int, float | None], name: str, paired: bool = False):
        self.values = dict(sorted(values.items()))
        self.name = name
        self.paired = paired  # a difference (or other arithmetic) of variants, seed by seed

    def missing(self) -> bool:
        return any(v is None for v in self.values.values())

    def estimate(self) -> Estimate:
        return Estimate.of_values(list(self.values.values()), paired=self.paired)

    def _combine(self, other, op, symbol: str, reverse: bool = False):
        if isinstance(other, Seeds):
            if other.values.keys() == self.values.keys():
                pairs = {s: _apply(op, self.values[s], other.values[s], reverse) for s in self.values}
                return Seeds(pairs, _named(self.name, symbol, other.name, reverse), paired=True)
            if symbol in "+-":
                return Welch.of(self, other, symbol, reverse)
            raise BlocklabError(f"claims.yaml: '{symbol}' of {self.name} and {other.name}, which were trained on "
                                f"different seeds, has no interval (only + and - do, Welch's)")
        if isinstance(other, (int, float)):
            return Seeds({s: _apply(op, v, other, reverse) for s, v in self.values.items()},
                         _named(self.name, symbol, f"{other:g}", reverse), paired=self.paired)
        return NotImplemented

    def __add__(self, other): return self._combine(other, operator.add, "+")
    def __radd__(self, other): return self._combine(other, operator.add, "+", reverse=True)
    def __sub__(self, other): return self._combine(other, operator.sub, "-")
    def __rsub__(self, other): return self._combine(other, operator.sub, "-", reverse=True)
    def __mul__(self, other): return self._combine(other, operator.mul, "*")
    def __rmul__(self, other): return self._combine(other, operator.mul, "*", reverse=True)
    def __truediv__(self, other): return self._combine(other, operator.truediv, "/")
    def __rtruediv__(self, other): return self._combine(other, operator.truediv, "/", reverse=True)
    def __neg__(self): return self._combine(-1, operator.mul, "*", reverse=True)


def _apply(op, a, b, reverse):
    if a is None or b is None:
        return None
    return op(b, a) if reverse else op(a, b)


def _named(a: str, symbol: str, b: str, reverse: bool) -> str:
    return f"({b} {symbol} {a})" if reverse else f"({a} {symbol} {b})"


@dataclass(frozen=True)
class Estimate:
    """A mean with what its interval needs: the spread of the values it averages (`sd`, n - 1 in the
    denominator), their number `n`, the standard error and the degrees of freedom."""
    mean: float
    sd: float
    n: int
    se: float
    df: float
    statistic: str  # how the interval was formed, in words ("t, 3 seeds", "paired t, 3 seeds", "Welch")

    @classmethod
    def of_values(cls, values: list[float], paired: bool) -> Estimate:
        n = len(values)
        mean = math.fsum(values) / n
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else math.nan
        kind = "paired t" if paired else "t"
        return cls(mean, sd, n, sd / math.sqrt(n) if n > 1 else math.nan, n - 1, f"{kind}, {n} seeds")

    def half_width(self, confidence: float = CONFIDENCE) -> float:
        """Half the two-sided `confidence` interval (NaN from one seed: no spread is known)."""
        if not self.df or math.isnan(self.se):
            return math.nan
        return float(stats.t.ppf((1 + confidence) / 2, self.df)) * self.se

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        h = self.half_width(confidence)
        return self.mean - h, self.mean + h

    def p_two_sided(self, null: float = 0.0) -> float:
        """The two-sided t test's p-value of a mean equal to `null`: below 1 - CONFIDENCE exactly when the
        interval leaves `null` out (NaN from one seed)."""
        if not self.df or math.isnan(self.se):
            return math.nan
        if self.se == 0:
            return 0.0 if self.mean != null else 1.0
        return float(2 * stats.t.sf(abs(self.mean - null) / self.se, self.df))

    def p_above(self, bound: float) -> float:
        """The one-sided t test's p-value of a mean at most `bound` (small: the mean lies above it)."""
        if not self.df or math.isnan(self.se):
            return math.nan
        if self.se == 0:
            return 0.0 if self.mean > bound else 1.0
        return float(stats.t.sf((self.mean - bound) / self.se, self.df))

    def seeds_to_decide(self, margin: float, confidence: float = CONFIDENCE) -> int | None:
        """About how many seeds (pairs, for a paired difference; per variant, for Welch's) would make the
        interval's half-width smaller than `margin` at the spread measured; None when no number would
        (no spread known, or a mean exactly on the bound)."""
        if margin <= 0 or math.isnan(self.sd):
            return None
        for n in range(2, MAX_SEEDS + 1):
            if float(stats.t.ppf((1 + confidence) / 2, n - 1)) * self.sd / math.sqrt(n) < margin:
                return n
        return None


# An equivalence test: two one-sided tests at 5% each, i.e. the 90% interval inside the band.
EQUIVALENCE_CONFIDENCE = 0.90


@dataclass(frozen=True)
class Equivalence:
    """What two one-sided tests decided of a mean against a band of +-`slack` about zero: holds (the 90% interval
    inside), fails (the 95% interval wholly outside) or inconclusive; the interval that decided it and its confidence,
    about how many seeds would decide it, and the p-value of the test that decided it (or would have)."""
    verdict: str
    interval: tuple[float, float]
    confidence: float
    seeds_needed: int | None
    p_value: float


def equivalence(estimate: Estimate, slack: float) -> Equivalence:
    """Two one-sided tests of `estimate` within +-`slack` (see Equivalence); against the nearer edge of the band, the
    two-sided test of lying outside it."""
    inner, outer = estimate.interval(EQUIVALENCE_CONFIDENCE), estimate.interval(CONFIDENCE)
    inside = max(estimate.p_above(-slack), replace(estimate, mean=-estimate.mean).p_above(-slack))
    outside = estimate.p_two_sided(math.copysign(slack, estimate.mean))
    if -slack <= inner[0] and inner[1] <= slack:
        return Equivalence("holds", inner, EQUIVALENCE_CONFIDENCE, None, inside)
    if outer[0] > slack or outer[1] < -slack:
        return Equivalence("fails", outer, CONFIDENCE, None, outside)
    if abs(estimate.mean) < slack:
        return Equivalence("inconclusive", inner, EQUIVALENCE_CONFIDENCE,
                           estimate.seeds_to_decide(slack - abs(estimate.mean), EQUIVALENCE_CONFIDENCE), inside)
    return Equivalence("inconclusive", inner, EQUIVALENCE_CONFIDENCE,
                       estimate.seeds_to_decide(abs(estimate.mean) - slack), outside)


class Welch:
    """A difference of two seed means trained on different seeds (or a shift or scale of one)."""

    def __init__(self, estimate: Estimate, name: str):
        self.estimate_ = estimate
        self.name = name

    @classmethod
    def of(cls, a: Seeds, b: Seeds, symbol: str, reverse: bool) -> Welch | None:
        """`a - b` (or `+`); None when either holds a value no run recorded."""
        if a.missing() or b.missing():
            return None
        left, right = (b, a) if reverse else (a, b)
        ea, eb = left.estimate(), right.estimate()
        if ea.n < 2 or eb.n < 2:
            raise BlocklabError(f"claims.yaml: {left.name} {symbol} {right.name} needs two seeds on each side")
        va, vb = ea.sd ** 2 / ea.n, eb.sd ** 2 / eb.n
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va ** 2 / (ea.n - 1) + vb ** 2 / (eb.n - 1)) if va + vb > 0 else ea.n + eb.n - 2
        mean = ea.mean - eb.mean if symbol == "-" else ea.mean + eb.mean
        # The spread a further seed on each side would have: the one `seeds_to_decide` scales.
        sd = math.sqrt(ea.sd ** 2 + eb.sd ** 2)
        return cls(Estimate(mean, sd, min(ea.n, eb.n), se, df, f"Welch, {ea.n} and {eb.n} seeds"),
                   _named(left.name, symbol, right.name, False))

    def estimate(self) -> Estimate:
        return self.estimate_

    def missing(self) -> bool:
        return False

    def _scaled(self, factor: float, shift: float, name: str) -> Welch:
        e = self.estimate_
        return Welch(Estimate(e.mean * factor + shift, e.sd * abs(factor), e.n, e.se * abs(factor), e.df,
                              e.statistic), name)

    def __add__(self, other):
        if isinstance(other, (int, float)):
            return self._scaled(1, other, f"({self.name} + {other:g})")
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, (int, float)):
            return self._scaled(1, -other, f"({self.name} - {other:g})")
        return NotImplemented

    def __rsub__(self, other):
        if isinstance(other, (int, float)):
            return self._scaled(-1, other, f"({other:g} - {self.name})")
        return NotImplemented

    def __mul__(self, other):
        if isinstance(other, (int, float)):
            return self._scaled(other, 0, f"({self.name} * {other:g})")
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, (int, float)) and other:
            return self._scaled(1 / other, 0, f"({self.name} / {other:g})")
        return NotImplemented

    def __neg__(self):
        return self._scaled(-1, 0, f"-{self.name}")
