"""The lesson's findings, and the code's regression checks, as claims a pipeline run upholds or not
(claims.yaml).

A claim is a *finding* (it depends on training results) or a *check* (deterministic arithmetic, such as
a parameter count, or an untrained probe). Its quantities are small arithmetic expressions over the
pipeline's reports and the runs' curves:

    loss("norm_order/post/seed0")             train_loss_last25 of one run
    metric("depth/l1/seed0", "n_params")      any field of one run
    mean("norm_order/pre", "val_loss")        the seed mean of a variant (field defaults to train_loss_last25),
                                              with its 95% Student-t interval
    std("norm_order/pre", "val_loss")         the seed standard deviation of a variant (n - 1 in the denominator)
    seeds("norm_order/post")                  every seed's value, as a list (a claim must hold for each)
    window("exercise2/post", 1, 500)          per seed, the mean of a curve column (default the training loss)
                                              over steps 1 to 500, as a seed mean with its interval
    at("exercise2/post", 500, "val_loss")     per seed, a curve column at one step, likewise
    baseline("unigram")                       reports/metrics.json baselines
    published("table_a", "norm_order/post/seed0")
                                              a published figure (reference.yaml); on another corpus than the
                                              one it was published on, the claim is "not comparable"
    grad("pre/with", 12)                      reports/gradients.json
    grads("pre/without")                      every depth's value, shallow to deep, as a list
    lr_sensitivity("stability/post", "w0")    per seed, a map variant's LR sensitivity over one group of cells
                                              (blocklab.analysis.maps: here no warmup), as a seed mean with its interval
    max_trainable_lr("stability/post", "w0")  per seed, the largest learning rate of that group at which the
                                              seed trains (neither collapsed nor diverged; null: at none)
    best_lr("proxies/standard", "d128")       per seed, the learning rate of that group with the lowest final
                                              validation loss (a diverged run is no candidate)

combined with + - * /, abs() and log10(). Arithmetic over two seed means trained on the same seeds is per seed
(the difference is paired); over different seeds, + and - give Welch's interval (blocklab.analysis.intervals).

Verdicts: `holds`, `fails`, `inconclusive` (a finding over seed means whose interval does not decide it)
or `not comparable`. A comparison holds when the whole 95% interval lies on the claimed side and fails
when it lies wholly on the other; `within` holds when the 90% interval lies inside the tolerance (an
equivalence test, two one-sided tests at 5%) and fails when the 95% interval lies wholly outside;
`monotone` holds when every step is decisive. Values of single runs and `seeds(...)` lists are decided
value by value. A run or field that is missing is an error (the pipeline broke), never a verdict. A
value a run recorded as null (a diverged run has no finite loss) makes the quantities it enters null,
and a claim over a null quantity fails, naming it.
"""

from __future__ import annotations

import ast
import csv
import math
import operator
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from blocklab.analysis.intervals import CONFIDENCE, MAX_SEEDS, Estimate, Seeds, Welch
from blocklab.analysis.maps import seed_best_lr, seed_max_trainable_lr, seed_sensitivities
from blocklab.analysis.reference import comparable
from blocklab.errors import BlocklabError

CLAIMS_FILE = "claims.yaml"
LOSS = "train_loss_last25"
# `within` is an equivalence test: two one-sided tests at 5% each, i.e. the 90% interval inside the band.
EQUIVALENCE_CONFIDENCE = 0.90
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


class Reports:
    """What claims are evaluated over: reports/metrics.json, reports/gradients.json, and the published
    figures (reference.yaml) with the sha256 of the corpus this run trained on."""

    def __init__(self, metrics: dict, gradients: dict | None, reference: dict | None = None, corpus: str | None = None,
                 runs_dir: Path | None = None, maps: dict | None = None, planned: dict[str, str] | None = None):
        self.maps = maps or {}  # blocklab.analysis.maps.lr_groups(params): which cells each map variant's groups hold
        self.runs = metrics.get("runs", {})
        self.baselines = metrics.get("baselines", {})
        self.gradients = gradients  # None: the gradients stage has not run here
        self.reference = reference or {}
        self.corpus = corpus
        self.runs_dir = None if runs_dir is None else Path(runs_dir)
        # {run key: the DVC stage that trains it} for every run params.yaml plans (planned_runs(params)): a run
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
                raise self._not_run(run, "its curve is not here (data/runs/: trained by the stage)") or MissingResult(
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

    def seeds(self, variant: str, field: str = LOSS) -> list[float]:
        return list(dict(sorted(self._by_seed(variant, field).items())).values())

    def mean(self, variant: str, field: str = LOSS) -> Seeds:
        return Seeds(self._by_seed(variant, field), f"{variant}" if field == LOSS else f"{variant}:{field}")

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


def planned_runs(params) -> dict[str, str]:
    """{run key: the DVC stages that train it (`train_<ablation>`, `map_<map>`: every variant's)} for every run of
    params.yaml (blocklab.run.config.Params)."""
    return {spec.key(seed): f"{'map' if spec.ablation in params.maps else 'train'}_{spec.ablation}"
            for spec in params.specs() + params.map_specs() for seed in spec.seeds}


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(expression: str | float | int, reports: Reports):
    """The value of a claim quantity: a number, a list of numbers (for `seeds` and `grads`), or a seed
    mean (`Seeds`, or `Welch` for a difference over different seeds) whose interval a verdict reads."""
    if isinstance(expression, (int, float)):
        return expression
    functions = {"loss": reports.metric, "metric": reports.metric, "mean": reports.mean, "std": reports.std,
                 "seeds": reports.seeds, "window": reports.window, "at": reports.at,
                 "baseline": reports.baseline, "published": reports.published,
                 "grad": reports.grad, "grads": reports.grads,
                 "lr_sensitivity": reports.lr_sensitivity, "max_trainable_lr": reports.max_trainable_lr,
                 "best_lr": reports.best_lr, "abs": _absolute, "log10": _log10}

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _elementwise(operator.mul, walk(node.operand), -1)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _elementwise(_BINARY[type(node.op)], walk(node.left), walk(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            return functions[node.func.id](*(walk(a) for a in node.args))
        raise BlocklabError(f"claims.yaml: cannot evaluate '{ast.unparse(node)}' in '{expression}' (allowed: "
                            f"numbers, + - * /, and {', '.join(functions)})")

    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError:
        raise BlocklabError(f"claims.yaml: '{expression}' is not an expression") from None
    return walk(tree)


def _elementwise(op, a, b):
    """A binary `op` over numbers, lists of numbers, or seed means; None (a value a run did not record)
    stays None."""
    if isinstance(a, list) or isinstance(b, list):
        if any(isinstance(x, (Seeds, Welch)) for x in (a, b)):
            raise BlocklabError("claims.yaml: a seed mean cannot be combined with a list of values")
        a_list = a if isinstance(a, list) else [a] * len(b)
        b_list = b if isinstance(b, list) else [b] * len(a)
        return [_elementwise(op, x, y) for x, y in zip(a_list, b_list)]
    return None if a is None or b is None else op(a, b)


def _absolute(value):
    """abs() of a number, of each value of a list, or of each seed's value."""
    if isinstance(value, list):
        return [_absolute(v) for v in value]
    if isinstance(value, Seeds):
        return Seeds({s: None if v is None else abs(v) for s, v in value.values.items()}, f"|{value.name}|",
                     value.paired)
    if isinstance(value, Welch):
        raise BlocklabError(f"claims.yaml: abs() of {value.name}, a difference over different seeds, has no "
                            f"interval")
    return None if value is None else abs(value)


def _log10(value):
    """log10() of a number, of each value of a list, or of each seed's value (None where not positive)."""
    def one(v):
        return None if v is None or v <= 0 else math.log10(v)

    if isinstance(value, list):
        return [_log10(v) for v in value]
    if isinstance(value, Seeds):
        return Seeds({s: one(v) for s, v in value.values.items()}, f"log10({value.name})", value.paired)
    if isinstance(value, Welch):
        raise BlocklabError(f"claims.yaml: log10() of {value.name}, a difference over different seeds, has no "
                            f"interval")
    return one(value)


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
    finding over seed means, the 95% interval of the quantity decided, the statistic, and about how many
    seeds would decide it when it is inconclusive."""
    verdict: str
    measured: object
    expected: object
    interval: list | None = None
    statistic: str | None = None
    seeds_needed: int | None = None
    note: str | None = None
    command: str | None = None  # not run yet: what would run it

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
COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class _Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    claim: str
    # A finding depends on training results; a check is deterministic (arithmetic, an untrained probe).
    kind: Literal["finding", "check"]
    # A published claim that does not reproduce here keeps its rule and says why, with the measured numbers
    # (like pytest's xfail): its verdict is still recorded, and `check --strict` does not fail on it.
    known_to_fail: str | None = Field(None, min_length=1)


class Within(_Claim):
    """|value - expected| <= tolerance (relative to |expected| when `relative`): for every value of a list;
    for a seed mean, the 90% interval of value - expected inside the band (TOST at 5%)."""
    rule: Literal["within"]
    value: Quantity
    expected: Quantity
    tolerance: float = Field(gt=0)
    relative: bool = False

    def check(self, reports: Reports) -> Verdict:
        values, expected = evaluate(self.value, reports), evaluate(self.expected, reports)
        centre = _rounded(expected)
        shown = f"{centre:.6g} ± {self.tolerance:.0%}" if self.relative and centre is not None else \
            f"{centre if centre is None else format(centre, '.6g')} ± {self.tolerance:g}"
        if _missing(values, expected):
            return Verdict("fails", _rounded(values), f"{shown} (not recorded)")
        slack = self.tolerance * abs(_rounded(expected)) if self.relative else self.tolerance
        difference = _elementwise(operator.sub, values, expected)
        if not any(_has_interval(d) for d in _as_list(difference)):
            ok = all(abs(d) <= slack for d in _as_list(difference))
            return Verdict("holds" if ok else "fails", _rounded(values), shown)
        estimate = difference.estimate()
        inner, outer = estimate.interval(EQUIVALENCE_CONFIDENCE), estimate.interval(CONFIDENCE)
        statistic = f"{estimate.statistic}, TOST at 5% (90% interval of the difference)"
        if math.isnan(inner[0]):
            return Verdict("inconclusive", _rounded(values), shown, None, statistic)
        interval = [round(inner[0], 6), round(inner[1], 6)]
        note = "90% interval of value - expected"
        if -slack <= inner[0] and inner[1] <= slack:
            return Verdict("holds", _rounded(values), shown, interval, statistic, note=note)
        if outer[0] > slack or outer[1] < -slack:
            return Verdict("fails", _rounded(values), shown, _interval(estimate), f"{estimate.statistic}, 95% interval",
                           note="95% interval of value - expected, wholly outside the tolerance")
        if abs(estimate.mean) < slack:
            needed = estimate.seeds_to_decide(slack - abs(estimate.mean), EQUIVALENCE_CONFIDENCE)
        else:
            needed = estimate.seeds_to_decide(abs(estimate.mean) - slack)
        return Verdict("inconclusive", _rounded(values), shown, interval, statistic, needed, note=note)


class Compare(_Claim):
    """left <op> right: for every value when either side is a list; for seed means, the whole 95% interval
    of left - right on the claimed side."""
    rule: Literal["compare"]
    left: Quantity
    op: Literal["<", "<=", ">", ">="]
    right: Quantity

    def check(self, reports: Reports) -> Verdict:
        left, right = evaluate(self.left, reports), evaluate(self.right, reports)
        expected = f"{self.op} {_rounded(right)}"
        if _missing(left, right):
            return Verdict("fails", _rounded(left), expected)
        difference = _elementwise(operator.sub, left, right)
        if isinstance(difference, list):
            ok = all(COMPARISONS[self.op](d, 0) for d in difference)
            return Verdict("holds" if ok else "fails", _rounded(left), expected)
        verdict, estimate, needed = _sign_verdict(difference, self.op)
        interval = None if estimate is None else _interval(estimate)
        return Verdict(verdict, _rounded(left), expected, interval, _statistic(estimate), needed,
                       note=None if estimate is None else "interval of left - right")


class Monotone(_Claim):
    """The values, in the order given, strictly increase (or decrease); over seed means, every step's 95%
    interval on the claimed side."""
    rule: Literal["monotone"]
    values: Union[Quantity, list[Quantity]]
    direction: Literal["increasing", "decreasing"]

    def check(self, reports: Reports) -> Verdict:
        items = self.values if isinstance(self.values, list) else [self.values]
        values = [v for item in items for v in _as_list(evaluate(item, reports))]
        expected = f"strictly {self.direction}"
        if _missing(values) or len(values) < 2:
            return Verdict("fails", _rounded(values), expected)
        want = ">" if self.direction == "increasing" else "<"
        steps = [_sign_verdict(_elementwise(operator.sub, b, a), want) for a, b in zip(values, values[1:])]
        verdicts = [v for v, _, _ in steps]
        verdict = "fails" if "fails" in verdicts else "inconclusive" if "inconclusive" in verdicts else "holds"
        estimates = [e for _, e, _ in steps if e is not None]
        if not estimates:
            return Verdict(verdict, _rounded(values), expected)
        needed = [n for v, _, n in steps if v == "inconclusive"]
        intervals = [None if e is None else _interval(e) for _, e, _ in steps]
        return Verdict(verdict, _rounded(values), expected, intervals, _statistic(estimates[0]),
                       None if not needed or None in needed else max(needed),
                       note="an interval per step (each value minus the one before)")


class Exact(_Claim):
    """value == expected (counts)."""
    rule: Literal["exact"]
    value: Quantity
    expected: Quantity

    def check(self, reports: Reports) -> Verdict:
        value, expected = evaluate(self.value, reports), evaluate(self.expected, reports)
        return Verdict("holds" if not _missing(value) and value == expected else "fails", value, expected)


class Spread(_Claim):
    """max / min of the values stays within a factor."""
    rule: Literal["spread"]
    values: Quantity
    max_ratio: float = Field(gt=1)

    def check(self, reports: Reports) -> Verdict:
        values = _as_list(evaluate(self.values, reports))
        if _missing(values):
            return Verdict("fails", _rounded(values), f"max/min <= {self.max_ratio:g}")
        ratio = max(values) / min(values)
        return Verdict("holds" if ratio <= self.max_ratio else "fails", round(ratio, 4),
                       f"max/min <= {self.max_ratio:g}")


Claim = Annotated[Union[Within, Compare, Monotone, Exact, Spread], Field(discriminator="rule")]


class ClaimsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    claims: list[Claim] = Field(min_length=1)


def load_claims(path: str | Path = CLAIMS_FILE) -> list:
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
    return parsed.claims


def check_claims(claims: list, reports: Reports) -> dict[str, dict]:
    """`{id: verdict}`, reports/claims.json's entries: `ok`, `measured`, `expected`, `verdict` (holds, fails,
    inconclusive, not comparable, not run yet), `kind`, `interval`, `statistic`, `seeds_needed`, `known_to_fail`,
    and the `claim` in words; a claim not run yet has the `command` that would run what it needs. MissingResult
    of a run params.yaml does not plan propagates (an error, not a verdict)."""
    verdicts = {}
    for claim in claims:
        try:
            found = claim.check(reports)
        except NotComparable as why:
            found = Verdict("not comparable", None, None, note=str(why))
        except NotRunYet as why:
            found = Verdict(NOT_RUN, None, None, note=str(why), command=why.command)
        verdicts[claim.id] = {"ok": found.ok, "measured": found.measured, "expected": found.expected,
                              "verdict": found.verdict, "kind": claim.kind, "interval": found.interval,
                              "statistic": found.statistic, "seeds_needed": found.seeds_needed,
                              "note": found.note, "known_to_fail": claim.known_to_fail is not None,
                              "claim": claim.claim, **({"command": found.command} if found.command else {})}
    return verdicts


def claims_count(verdicts: dict[str, dict]) -> dict[str, int]:
    """Findings and checks counted apart: the claims figures `dvc exp show` lists."""
    findings = [v["verdict"] for v in verdicts.values() if v["kind"] == "finding"]
    checks = [v["verdict"] for v in verdicts.values() if v["kind"] == "check"]
    count = {"findings_hold": findings.count("holds"), "findings_inconclusive": findings.count("inconclusive"),
             "findings_fail": findings.count("fails"), "findings_not_comparable": findings.count("not comparable"),
             "findings_total": len(findings), "checks_exact": checks.count("holds"), "checks_total": len(checks)}
    not_run = findings.count(NOT_RUN) + checks.count(NOT_RUN)  # none in a complete run: then not listed at all
    return {**count, "not_run_yet": not_run} if not_run else count


def count_in_words(count: dict[str, int]) -> str:
    """"N of M findings hold, K inconclusive, J not comparable; C of C checks exact"."""
    extra = "".join(f", {count[f'findings_{key}']} {word}" for key, word in
                    (("fail", "fail"), ("inconclusive", "inconclusive"), ("not_comparable", "not comparable"))
                    if count[f"findings_{key}"])
    not_run = f"; {count['not_run_yet']} claims not run yet" if count.get("not_run_yet") else ""
    return (f"{count['findings_hold']} of {count['findings_total']} findings hold{extra}; "
            f"{count['checks_exact']} of {count['checks_total']} checks exact{not_run}")


def _in_words(cid: str, words: dict[str, str], verdict: dict) -> str:
    text = (f"{cid}: {words.get(cid, '(not in the claims file)')} Measured {verdict['measured']}, "
            f"expected {verdict['expected']}")
    if verdict.get("interval") is not None:
        text += f"; {verdict.get('note') or 'interval'} {verdict['interval']} ({verdict['statistic']})"
    if verdict.get("verdict") == "inconclusive":
        needed = verdict.get("seeds_needed")
        text += (f"; about {needed} seeds would decide it at the spread measured" if needed else
                 f"; at the spread measured not even {MAX_SEEDS} seeds would decide it")
    return text + "."


def _undecided(verdict: dict) -> bool:
    """Neither holds nor is beside the point: fails, or is inconclusive."""
    return verdict.get("verdict", "holds" if verdict["ok"] else "fails") in ("fails", "inconclusive")


def failing_in_words(claims: list, verdicts: dict[str, dict]) -> list[str]:
    """One line per claim that fails or is inconclusive and is not marked `known_to_fail`: what it says,
    what was measured, what was expected, with its interval. `verdicts` may be read back from
    reports/claims.json; the words come from `claims`."""
    words = {c.id: c.claim for c in claims}
    marked = {c.id for c in claims if c.known_to_fail}
    return [f"[{v.get('verdict', 'fails')}] {_in_words(cid, words, v)}" for cid, v in verdicts.items()
            if _undecided(v) and cid not in marked]


def marked_in_words(claims: list, verdicts: dict[str, dict]) -> tuple[list[str], list[str]]:
    """The claims marked `known_to_fail`: (those that fail or are inconclusive, with why; those that now
    hold, to unmark)."""
    words = {c.id: c.claim for c in claims}
    failing, holding = [], []
    for claim in claims:
        if claim.known_to_fail and claim.id in verdicts:
            verdict = verdicts[claim.id]
            if verdict["ok"]:
                holding.append(_in_words(claim.id, words, verdict))
            elif _undecided(verdict):
                failing.append(f"[{verdict.get('verdict', 'fails')}] {_in_words(claim.id, words, verdict)} "
                               f"Known to fail: {claim.known_to_fail}")
    return failing, holding


def verdicts_markdown(claims: list, verdicts: dict[str, dict]) -> str:
    """The verdicts as a section of reports/summary.md: those that fail or are inconclusive first, in
    words, then every finding and every check."""
    from tabulate import tabulate

    count = claims_count(verdicts)
    failing = failing_in_words(claims, verdicts)
    known, now_hold = marked_in_words(claims, verdicts)
    lines = [f"## Claims: {count_in_words(count)}\n",
             "A *finding* depends on training results and carries its uncertainty: over seed means it holds only "
             "when its whole 95% interval (paired by seed where the variants share their seeds) lies on the "
             "claimed side, and is *inconclusive* otherwise. A *check* is deterministic arithmetic or an "
             "untrained probe.\n"]
    if failing:
        lines += [f"**Fail or are inconclusive ({len(failing)}):**\n", *(f"- {line}" for line in failing), ""]
    if known:
        lines += [f"**Known not to reproduce here ({len(known)}), marked `known_to_fail` in `{CLAIMS_FILE}`:**\n",
                  *(f"- {line}" for line in known), ""]
    if now_hold:
        lines += [f"**Marked `known_to_fail` but hold on this run ({len(now_hold)}):**\n",
                  *(f"- {line}" for line in now_hold), ""]
    not_comparable = [cid for cid, v in verdicts.items() if v.get("verdict") == "not comparable"]
    if not_comparable:
        lines += [f"**Not comparable on this corpus ({len(not_comparable)}):** they read figures published on "
                  f"another corpus: {', '.join(not_comparable)}.\n"]
    if not failing and not known:
        lines.append(f"Every finding in `{CLAIMS_FILE}` that applies to this corpus holds on this run.\n")
    words = {c.id: c.claim for c in claims}
    for kind, title in (("finding", "Every finding"), ("check", "Every check")):
        rows = [(cid, v.get("verdict", "holds" if v["ok"] else "fails") if v["ok"] else
                 f"**{v.get('verdict', 'fails')}**", v["measured"], v["expected"],
                 "" if v.get("interval") is None else v["interval"], words.get(cid, ""))
                for cid, v in verdicts.items() if v.get("kind", "finding") == kind]
        if rows:
            table = tabulate(rows, headers=["claim", "verdict", "measured", "expected", "interval", "in words"],
                             tablefmt="pipe")
            lines.append(f"<details><summary>{title}</summary>\n\n{table}\n\n</details>\n")
    return "\n".join(lines)
