"""The verdict rules: how a claim's measured quantities decide that it holds, fails or is inconclusive (with the
95% interval, paired by seed where it can be), and claims.yaml read into them."""

from __future__ import annotations

import math
import operator
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from blocklab.analysis.claims.expressions import elementwise, value_of
from blocklab.analysis.claims.family import corrected_for_the_family, family_count
from blocklab.analysis.claims.evidence import NOT_RUN, NotComparable, NotRunYet, Evidence
from blocklab.analysis.claims.transfer import agreement, share_agreeing
from blocklab.analysis.claims.trends import decide
from blocklab.analysis.intervals import CONFIDENCE, EQUIVALENCE_CONFIDENCE, Estimate, Seeds, Welch, equivalence
from blocklab.analysis.setting_words import written
from blocklab.errors import BlocklabError
from blocklab.params.problems import ParamsError

if TYPE_CHECKING:
    from blocklab.analysis.run_table import RunTable

CLAIMS_FILE = "claims.yaml"


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _missing(*values) -> bool:
    """Whether a quantity holds a value no run recorded (None): a claim over it fails."""
    for value in values:
        for v in _as_list(value):
            if v is None or (isinstance(v, Seeds) and v.missing()):
                return True
    return False


def _rounded(value):
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, Seeds) and value.missing():
        return [_rounded(v) for v in value.values.values()]  # every seed, a null where one recorded none
    if isinstance(value, (Seeds, Welch)):
        value = value.estimate().mean
    return None if value is None else round(value, 6)


def _has_interval(value) -> bool:
    return isinstance(value, (Seeds, Welch))


@dataclass
class Verdict:
    """What a claim's rule found: the verdict, what was measured and expected (for people), and, for a
    finding over seed means, the 95% interval of the quantity decided, the statistic, about how many
    seeds would decide it when it is inconclusive, and the p-value of the test that decided it (or would
    have): below 1 - CONFIDENCE exactly when it holds or fails, for the family-wise correction (family.py)."""
    verdict: str
    measured: object
    expected: object
    interval: list | None = None
    statistic: str | None = None
    seeds_needed: int | None = None
    note: str | None = None
    command: str | None = None  # not run yet: what would run it
    p_value: float | None = None
    sizes: list[dict] | None = None  # a trend's: each size's compute and effect (trends.SizePoint.record)
    agreements: list[dict] | None = None  # an agreement's: each comparison's verdicts (transfer.Agreement.record)
    ranking: dict | None = None  # a rank agreement's: each variant's rank and loss at both ends (transfer.Ranking)

    @property
    def ok(self) -> bool:
        return self.verdict == "holds"


def _interval(estimate: Estimate, confidence: float = CONFIDENCE) -> list[float] | None:
    lo, hi = estimate.interval(confidence)
    return None if math.isnan(lo) else [round(lo, 6), round(hi, 6)]


def _sign_verdict(difference, want: str) -> tuple[str, Estimate | None, int | None]:
    """Whether `difference` is negative (`want` "<" or "<=") or positive (">", ">="): for a seed mean, by
    its whole 95% interval; for a number, by its value."""
    below = want in ("<", "<=")
    if not _has_interval(difference):
        return ("holds" if COMPARISONS[want](difference, 0) else "fails"), None, None
    estimate = difference.estimate()
    lo, hi = estimate.interval()
    if math.isnan(lo):  # one seed: no spread, nothing decided
        return "inconclusive", estimate, None
    claimed = hi < 0 if below else lo > 0
    opposite = lo > 0 if below else hi < 0
    if claimed or (want in ("<=", ">=") and (hi <= 0 if below else lo >= 0)):
        return "holds", estimate, None
    if opposite:
        return "fails", estimate, None
    return "inconclusive", estimate, estimate.seeds_to_decide(abs(estimate.mean))


def _statistic(estimate: Estimate | None) -> str | None:
    return None if estimate is None else f"{estimate.statistic}, {CONFIDENCE:.0%} interval"


Quantity = Union[str, float, int]
FORMER_KIND = "check"  # an invariant's kind before it was named apart from the `check` command
_said: list[str] = []  # the former kind's notice, once per process
COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class _Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    claim: str
    # A finding depends on training results; an invariant is deterministic (arithmetic, an untrained probe) and
    # holds exactly. (`check` is the command that reads both.)
    kind: Literal["finding", "invariant"]
    # A published claim that does not reproduce here keeps its rule and says why, with the measured numbers
    # (like pytest's xfail): its verdict is still recorded, and `check --strict` does not fail on it.
    known_to_fail: str | None = Field(None, min_length=1)
    reads_claims: ClassVar[bool] = False  # its check reads the other claims (check(evidence, claims))

    def rule_text(self) -> str:
        """The claim's rule, its quantities and relation, as text (without its words, id, kind or reason): what
        reads which runs, for the figures and `check` to find the ablations and maps a finding reads."""
        return str(self.model_dump(exclude={"id", "claim", "kind", "known_to_fail"}))

    @field_validator("kind", mode="before")
    @classmethod
    def _former_kind(cls, kind):
        if kind == FORMER_KIND:
            if not _said:
                print(f"note: a claim's kind `{FORMER_KIND}` is now `invariant` (the old name still works)",
                      file=sys.stderr)
                _said.append(kind)
            return "invariant"
        return kind


_BOUND = re.compile(r"^(?P<op><=|>=|<|>) (?P<bound>-?[0-9.e+-]+)$")
_BAND = re.compile(r"^(?P<centre>-?[0-9.e+-]+) ± (?P<tolerance>[0-9.e+-]+)$")


def bound_of(expected: str) -> tuple[str, float] | tuple[float, float] | None:
    """What a verdict's `expected` (as Within and Compare write it) asks of each value, where it is a number:
    (op, bound) of "< 2.8"; (centre, tolerance) of an absolute "3.3 ± 0.05"; None otherwise (a relative band, a
    list, a trend, a value not recorded)."""
    if (found := _BOUND.match(str(expected))):
        return found["op"], float(found["bound"])
    if (found := _BAND.match(str(expected))):
        return float(found["centre"]), float(found["tolerance"])
    return None


class Within(_Claim):
    """|value - expected| <= tolerance (relative to |expected| when `relative`): for every value of a list;
    for a seed mean, the 90% interval of value - expected inside the band (TOST at 5%)."""
    rule: Literal["within"]
    value: Quantity
    expected: Quantity
    tolerance: float = Field(gt=0)
    relative: bool = False

    def check(self, evidence: Evidence) -> Verdict:
        values, expected = value_of(self.value, evidence), value_of(self.expected, evidence)
        centre = _rounded(expected)
        shown = f"{centre:.6g} ± {self.tolerance:.0%}" if self.relative and centre is not None else \
            f"{centre if centre is None else format(centre, '.6g')} ± {self.tolerance:g}"
        if _missing(values, expected):
            return Verdict("fails", _rounded(values), f"{shown} (not recorded)")
        slack = self.tolerance * abs(_rounded(expected)) if self.relative else self.tolerance
        difference = elementwise(operator.sub, values, expected)
        if not any(_has_interval(d) for d in _as_list(difference)):
            ok = all(abs(d) <= slack for d in _as_list(difference))
            return Verdict("holds" if ok else "fails", _rounded(values), shown)
        estimate = difference.estimate()
        statistic = f"{estimate.statistic}, TOST at 5% (90% interval of the difference)"
        if math.isnan(estimate.interval(EQUIVALENCE_CONFIDENCE)[0]):
            return Verdict("inconclusive", _rounded(values), shown, None, statistic)
        found = equivalence(estimate, slack)
        if found.verdict == "fails":
            return Verdict("fails", _rounded(values), shown, _interval(estimate), f"{estimate.statistic}, 95% interval",
                           note="95% interval of value - expected, wholly outside the tolerance", p_value=found.p_value)
        return Verdict(found.verdict, _rounded(values), shown, [round(v, 6) for v in found.interval], statistic,
                       found.seeds_needed, note="90% interval of value - expected", p_value=found.p_value)


class Compare(_Claim):
    """left <op> right: for every value when either side is a list; for seed means, the whole 95% interval
    of left - right on the claimed side."""
    rule: Literal["compare"]
    left: Quantity
    op: Literal["<", "<=", ">", ">="]
    right: Quantity

    def check(self, evidence: Evidence) -> Verdict:
        left, right = value_of(self.left, evidence), value_of(self.right, evidence)
        expected = f"{self.op} {_rounded(right)}"
        if _missing(left, right):
            return Verdict("fails", _rounded(left), expected)
        difference = elementwise(operator.sub, left, right)
        if isinstance(difference, list):
            ok = all(COMPARISONS[self.op](d, 0) for d in difference)
            return Verdict("holds" if ok else "fails", _rounded(left), expected)
        verdict, estimate, needed = _sign_verdict(difference, self.op)
        interval = None if estimate is None else _interval(estimate)
        return Verdict(verdict, _rounded(left), expected, interval, _statistic(estimate), needed,
                       note=None if estimate is None else "interval of left - right",
                       p_value=None if estimate is None else estimate.p_two_sided())


class Monotone(_Claim):
    """The values, in the order given, strictly increase (or decrease); over seed means, every step's 95%
    interval on the claimed side."""
    rule: Literal["monotone"]
    values: Union[Quantity, list[Quantity]]
    direction: Literal["increasing", "decreasing"]

    def check(self, evidence: Evidence) -> Verdict:
        items = self.values if isinstance(self.values, list) else [self.values]
        values = [v for item in items for v in _as_list(value_of(item, evidence))]
        expected = f"strictly {self.direction}"
        if _missing(values) or len(values) < 2:
            return Verdict("fails", _rounded(values), expected)
        want = ">" if self.direction == "increasing" else "<"
        steps = [_sign_verdict(elementwise(operator.sub, b, a), want) for a, b in zip(values, values[1:])]
        verdicts = [v for v, _, _ in steps]
        verdict = "fails" if "fails" in verdicts else "inconclusive" if "inconclusive" in verdicts else "holds"
        estimates = [e for _, e, _ in steps if e is not None]
        if not estimates:
            return Verdict(verdict, _rounded(values), expected)
        needed = [n for v, _, n in steps if v == "inconclusive"]
        intervals = [None if e is None else _interval(e) for _, e, _ in steps]
        p_value = None
        if len(estimates) == len(steps):  # a step against the claim decides it; else every step (an
            against = [e.p_two_sided() for v, e, _ in steps if v == "fails"]  # intersection-union test: the largest p)
            p_value = min(against) if against else max(e.p_two_sided() for _, e, _ in steps)
        return Verdict(verdict, _rounded(values), expected, intervals, _statistic(estimates[0]),
                       None if not needed or None in needed else max(needed),
                       note="an interval per step (each value minus the one before)", p_value=p_value)


class Exact(_Claim):
    """value == expected (counts)."""
    rule: Literal["exact"]
    value: Quantity
    expected: Quantity

    def check(self, evidence: Evidence) -> Verdict:
        value, expected = value_of(self.value, evidence), value_of(self.expected, evidence)
        return Verdict("holds" if not _missing(value) and value == expected else "fails", value, expected)


class Spread(_Claim):
    """max / min of the values stays within a factor."""
    rule: Literal["spread"]
    values: Quantity
    max_ratio: float = Field(gt=1)

    def check(self, evidence: Evidence) -> Verdict:
        values = _as_list(value_of(self.values, evidence))
        if _missing(values):
            return Verdict("fails", _rounded(values), f"max/min <= {self.max_ratio:g}")
        ratio = max(values) / min(values)
        return Verdict("holds" if ratio <= self.max_ratio else "fails", round(ratio, 4),
                       f"max/min <= {self.max_ratio:g}")


class Trend(_Claim):
    """The effect of variant `left` minus `right` over map `map`'s sizes grows, shrinks, flips its sign, or stays
    flat within `margin` (its slope per tenfold training compute), paired by seed (blocklab.analysis.claims.trends)."""
    rule: Literal["trend"]
    map: str
    left: str
    right: str
    quantity: Literal["val_loss", "lr_sensitivity"] = "val_loss"
    expect: Literal["grows", "shrinks", "flips", "flat"]
    margin: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _margin_for_flat_only(self) -> "Trend":
        if (self.expect == "flat") != (self.margin is not None):
            raise ValueError("a trend expected flat needs its margin (the slope per tenfold compute it stays "
                             "within), and only it has one")
        return self

    def rule_text(self) -> str:
        """Its rule, naming the map variants it reads as claims.yaml's expressions name runs ("<map>/<variant>")."""
        return f'{super().rule_text()} reads "{self.map}/{self.left}" and "{self.map}/{self.right}"'

    def expected_text(self) -> str:
        if self.expect == "flat":
            return f"flat: slope within ± {self.margin:g}"
        return {"grows": "grows: slope > 0", "shrinks": "shrinks: slope < 0", "flips":
                "flips: smallest and largest sizes of opposite signs"}[self.expect]

    def check(self, evidence: Evidence) -> Verdict:
        points = evidence.trend(self.map, self.left, self.right, self.quantity)
        found = decide(points, self.expect, self.margin)
        interval = None if math.isnan(found.interval[0]) else [round(v, 6) for v in found.interval]
        return Verdict(found.verdict, round(found.slope.mean, 6), self.expected_text(), interval,
                       f"{found.slope.statistic}, {found.confidence:.0%} interval", found.seeds_needed,
                       note=f"the slope of {self.left} - {self.right} ({self.quantity}) per tenfold training compute, "
                            f"over {len(points)} sizes; the effect at each: "
                            + ", ".join(f"{p.size} {p.effect.estimate().mean:+.4f}" for p in points),
                       p_value=found.p_value, sizes=[p.record() for p in points])


class Agreement(_Claim):
    """Does small predict large: over every trend finding of the claims file, the share whose verdict at the
    smallest size (which variant ends lower, decided at 95%, or neither) is the verdict at the largest, tested
    against the share `than` (blocklab.analysis.claims.transfer)."""
    rule: Literal["agreement"]
    than: float = Field(gt=0, lt=1)
    reads_claims: ClassVar[bool] = True

    def expected_text(self) -> str:
        return f"share > {self.than:g}"

    def check(self, evidence: Evidence, claims: list = ()) -> Verdict:
        trends = [c for c in claims if c.kind == "finding" and isinstance(c, Trend)]
        found, waiting = [], []
        for trend in trends:
            try:
                found.append(agreement(trend.id, evidence.trend(trend.map, trend.left, trend.right, trend.quantity)))
            except NotRunYet as why:
                waiting.append(why)
        if waiting:
            stages = sorted({s for why in waiting for s in why.command.removeprefix("dvc repro").split()})
            raise NotRunYet(f"{len(waiting)} of the {len(trends)} trend findings have not run here yet",
                            " ".join(["dvc repro", *stages]))
        share = share_agreeing(found, self.than)
        return Verdict(share.verdict, round(share.share, 6), self.expected_text(),
                       [round(v, 6) for v in share.interval], f"exact binomial, {CONFIDENCE:.0%} interval",
                       note=f"{share.agreeing} of {share.total} comparisons: the verdict at the smallest size is the "
                            f"largest's; the same variant lower on the mean at both in "
                            f"{sum(a.same_winner for a in found)} (DataDecide's count, decided or not)", p_value=share.p_value, agreements=[a.record() for a in found])


class RankAgreement(_Claim):
    """Map `map`'s variants ranked by final validation loss at its smallest size and at its largest agree:
    Kendall's tau > 0 at 95% (blocklab.analysis.claims.transfer)."""
    rule: Literal["rank_agreement"]
    map: str
    variants: list[str] = Field(min_length=3)

    def rule_text(self) -> str:
        """Its rule, naming the map variants it reads as claims.yaml's expressions name runs ("<map>/<variant>")."""
        return f"{super().rule_text()} reads " + " and ".join(f'"{self.map}/{v}"' for v in self.variants)

    def expected_text(self) -> str:
        return "Kendall's tau > 0"

    def check(self, evidence: Evidence) -> Verdict:
        ranking = evidence.ranking(self.map, self.variants)
        return Verdict(ranking.verdict, round(ranking.tau, 6), self.expected_text(), None,
                       "Kendall's tau, exact test", note=f"{len(self.variants)} variants ranked at {ranking.smallest} "
                       f"and at {ranking.largest}", p_value=ranking.p_value, ranking=ranking.record())


Claim = Annotated[Union[Within, Compare, Monotone, Exact, Spread, Trend, Agreement, RankAgreement],
                  Field(discriminator="rule")]


class ClaimsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    claims: list[Claim] = Field(min_length=1)


def load_claims(path: str | Path = CLAIMS_FILE, table: RunTable | None = None) -> list:
    """The claims of `path`, validated, their words written from the plan's resolved settings (`{<run>:<setting>}`
    and `{<field>}` of the claim's own rule: blocklab.analysis.setting_words.written) where `table` is given."""
    path = Path(path)
    try:
        parsed = ClaimsFile.model_validate(yaml.safe_load(path.read_text()))
    except FileNotFoundError:
        raise BlocklabError(f"{path} not found") from None
    except ValidationError as err:
        problems = "\n  - ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        raise BlocklabError(f"{path} is not a valid claims file:\n  - {problems}") from None
    ids = [c.id for c in parsed.claims]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise BlocklabError(f"{path}: claim ids must be unique; repeated: {', '.join(duplicates)}")
    if table is None:
        return parsed.claims
    try:
        return [claim.model_copy(update={"claim": written(claim.claim, table, claim.model_dump())})
                for claim in parsed.claims]
    except ParamsError as err:
        raise BlocklabError(f"{path}: a claim's words name {err}") from None


def check_claims(claims: list, evidence: Evidence) -> dict[str, dict]:
    """`{id: verdict}`, reports/claims.json's entries: `ok`, `measured`, `expected`, `verdict` (holds, fails,
    inconclusive, not comparable, not run yet), `kind`, `interval`, `statistic`, `seeds_needed`, `known_to_fail`,
    and the `claim` in words; a claim not run yet has the `command` that would run what it needs; a trend its
    `sizes` (each size's compute, and its effect with the 95% interval). MissingResult
    of a run params.yaml does not plan propagates (an error, not a verdict)."""
    verdicts = {}
    for claim in claims:
        try:
            found = claim.check(evidence, claims) if claim.reads_claims else claim.check(evidence)
        except NotComparable as why:
            found = Verdict("not comparable", None, None, note=str(why))
        except NotRunYet as why:
            found = Verdict(NOT_RUN, None, None, note=str(why), command=why.command)
        verdicts[claim.id] = {"ok": found.ok, "measured": found.measured, "expected": found.expected,
                              "verdict": found.verdict, "kind": claim.kind, "interval": found.interval,
                              "statistic": found.statistic, "seeds_needed": found.seeds_needed,
                              "note": found.note, "known_to_fail": claim.known_to_fail is not None,
                              "p_value": None if found.p_value is None or math.isnan(found.p_value) else
                              float(f"{found.p_value:.6g}"),
                              "claim": claim.claim, **({"command": found.command} if found.command else {}),
                              **({"sizes": found.sizes} if found.sizes else {}),
                              **({"agreements": found.agreements} if found.agreements else {}),
                              **({"ranking": found.ranking} if found.ranking else {})}
    return corrected_for_the_family(verdicts)


def claims_count(verdicts: dict[str, dict]) -> dict[str, int]:
    """Findings and invariants counted apart, and the findings after Holm's correction (family.py): the claims
    figures `dvc exp show` lists."""
    findings = [v["verdict"] for v in verdicts.values() if v["kind"] == "finding"]
    invariants = [v["verdict"] for v in verdicts.values() if v["kind"] == "invariant"]
    count = {"findings_hold": findings.count("holds"), "findings_inconclusive": findings.count("inconclusive"),
             "findings_fail": findings.count("fails"), "findings_not_comparable": findings.count("not comparable"),
             "findings_total": len(findings), "invariants_hold": invariants.count("holds"),
             "invariants_total": len(invariants), **family_count(verdicts)}
    not_run = findings.count(NOT_RUN) + invariants.count(NOT_RUN)  # none in a complete run: then not listed at all
    return {**count, "not_run_yet": not_run} if not_run else count
