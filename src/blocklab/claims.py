"""The lesson's findings as claims that a pipeline run either upholds or not (claims.yaml).

A claim's quantities are small arithmetic expressions over the pipeline's reports:

    loss("norm_order/post/seed0")             train_loss_last25 of one run
    metric("depth/l1/seed0", "n_params")      any field of one run
    mean("norm_order/pre", "val_loss")        the seed mean of a variant (field defaults to train_loss_last25)
    std("norm_order/pre", "val_loss")         the seed standard deviation of a variant (n - 1 in the denominator)
    seeds("norm_order/post")                  every seed's value, as a list (a claim must hold for each)
    baseline("unigram")                       reports/metrics.json baselines
    grad("pre/with", 12)                      reports/gradients.json
    grads("pre/without")                      every depth's value, shallow to deep, as a list

combined with + - * / and abs(). A run or field that is missing is an error (the pipeline broke),
never a failed claim. A value a run recorded as null (a diverged run has no finite loss) makes the
quantities it enters null, and a claim over a null quantity fails, naming it.
"""

from __future__ import annotations

import ast
import operator
import statistics
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from blocklab.errors import BlocklabError

CLAIMS_FILE = "claims.yaml"
LOSS = "train_loss_last25"


class MissingResult(BlocklabError):
    """A claim names a run or value the reports do not have: the pipeline is incomplete, not wrong."""


class Reports:
    """What claims are evaluated over: reports/metrics.json and reports/gradients.json."""

    def __init__(self, metrics: dict, gradients: dict):
        self.runs = metrics.get("runs", {})
        self.baselines = metrics.get("baselines", {})
        self.gradients = gradients

    def metric(self, run: str, field: str = LOSS) -> float:
        if run not in self.runs:
            raise MissingResult(f"run '{run}' is not in reports/metrics.json: is it in params.yaml, and did "
                                f"`dvc repro` finish?")
        if field not in self.runs[run]:
            raise MissingResult(f"run '{run}' has no field '{field}' in reports/metrics.json")
        return self.runs[run][field]

    def seeds(self, variant: str, field: str = LOSS) -> list[float]:
        keys = sorted((k for k in self.runs if k.rsplit("/", 1)[0] == variant), key=lambda k: int(k.rsplit("seed")[-1]))
        if not keys:
            raise MissingResult(f"no runs of variant '{variant}' in reports/metrics.json")
        return [self.metric(k, field) for k in keys]

    def mean(self, variant: str, field: str = LOSS) -> float | None:
        values = self.seeds(variant, field)
        return None if None in values else sum(values) / len(values)

    def std(self, variant: str, field: str = LOSS) -> float | None:
        values = self.seeds(variant, field)
        return None if None in values or len(values) < 2 else statistics.stdev(values)

    def baseline(self, name: str) -> float:
        if name not in self.baselines:
            raise MissingResult(f"baseline '{name}' is not in reports/metrics.json")
        return self.baselines[name]

    def grad(self, stack: str, depth: int) -> float:
        try:
            return self.gradients[stack][str(depth)]
        except KeyError:
            raise MissingResult(f"reports/gradients.json has no '{stack}' at depth {depth}") from None

    def grads(self, stack: str) -> list[float]:
        if stack not in self.gradients:
            raise MissingResult(f"reports/gradients.json has no '{stack}'")
        return [v for _, v in sorted(self.gradients[stack].items(), key=lambda kv: int(kv[0]))]


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(expression: str | float | int, reports: Reports):
    """The value of a claim quantity: a number, or a list of numbers (for `seeds` and `grads`)."""
    if isinstance(expression, (int, float)):
        return expression
    functions = {"loss": reports.metric, "metric": reports.metric, "mean": reports.mean, "std": reports.std,
                 "seeds": reports.seeds, "baseline": reports.baseline, "grad": reports.grad, "grads": reports.grads,
                 "abs": lambda x: _elementwise(lambda a, _: abs(a), x, 0)}

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _elementwise(lambda a, _: -a, walk(node.operand), 0)
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
    """`op` over numbers or lists of numbers; None (a value a run did not record) stays None."""
    if isinstance(a, list) or isinstance(b, list):
        a_list = a if isinstance(a, list) else [a] * len(b)
        b_list = b if isinstance(b, list) else [b] * len(a)
        return [_elementwise(op, x, y) for x, y in zip(a_list, b_list)]
    return None if a is None or b is None else op(a, b)


def _as_list(value) -> list[float]:
    return value if isinstance(value, list) else [value]


def _missing(*values) -> bool:
    """Whether a quantity holds a value no run recorded (None): a claim over it fails."""
    return any(v is None for value in values for v in _as_list(value))


def _rounded(value):
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return None if value is None else round(value, 6)


Quantity = Union[str, float, int]
COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class _Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    claim: str
    # A published claim that does not reproduce here keeps its rule and says why, with the measured numbers
    # (like pytest's xfail): its verdict is still recorded, and `check --strict` does not fail on it.
    known_to_fail: str | None = Field(None, min_length=1)


class Within(_Claim):
    """|value - expected| <= tolerance (relative to |expected| when `relative`), for every value."""
    rule: Literal["within"]
    value: Quantity
    expected: Quantity
    tolerance: float = Field(gt=0)
    relative: bool = False

    def check(self, reports: Reports):
        values, expected = evaluate(self.value, reports), evaluate(self.expected, reports)
        if _missing(expected):
            return False, _rounded(values), f"{self.expected} (not recorded)"
        slack = self.tolerance * abs(expected) if self.relative else self.tolerance
        ok = not _missing(values) and all(abs(v - expected) <= slack for v in _as_list(values))
        shown = f"{expected:.6g} ± {self.tolerance:.0%}" if self.relative else f"{expected:.6g} ± {self.tolerance:g}"
        return ok, _rounded(values), shown


class Compare(_Claim):
    """left <op> right, for every value when either side is a list."""
    rule: Literal["compare"]
    left: Quantity
    op: Literal["<", "<=", ">", ">="]
    right: Quantity

    def check(self, reports: Reports):
        left, right = evaluate(self.left, reports), evaluate(self.right, reports)
        ok = not _missing(left, right) and all(_as_list(_elementwise(COMPARISONS[self.op], left, right)))
        return ok, _rounded(left), f"{self.op} {_rounded(right)}"


class Monotone(_Claim):
    """The values, in the order given, strictly increase (or decrease)."""
    rule: Literal["monotone"]
    values: Union[Quantity, list[Quantity]]
    direction: Literal["increasing", "decreasing"]

    def check(self, reports: Reports):
        items = self.values if isinstance(self.values, list) else [self.values]
        values = [v for item in items for v in _as_list(evaluate(item, reports))]
        if _missing(values):
            return False, _rounded(values), f"strictly {self.direction}"
        pairs = list(zip(values, values[1:]))
        ok = len(values) > 1 and all((b > a) if self.direction == "increasing" else (b < a) for a, b in pairs)
        return ok, _rounded(values), f"strictly {self.direction}"


class Exact(_Claim):
    """value == expected (counts)."""
    rule: Literal["exact"]
    value: Quantity
    expected: Quantity

    def check(self, reports: Reports):
        value, expected = evaluate(self.value, reports), evaluate(self.expected, reports)
        return not _missing(value) and value == expected, value, expected


class Spread(_Claim):
    """max / min of the values stays within a factor."""
    rule: Literal["spread"]
    values: Quantity
    max_ratio: float = Field(gt=1)

    def check(self, reports: Reports):
        values = _as_list(evaluate(self.values, reports))
        if _missing(values):
            return False, _rounded(values), f"max/min <= {self.max_ratio:g}"
        ratio = max(values) / min(values)
        return ratio <= self.max_ratio, round(ratio, 4), f"max/min <= {self.max_ratio:g}"


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
    """`{id: {"ok", "measured", "expected", "claim"}}`; MissingResult propagates (an error, not a verdict)."""
    verdicts = {}
    for claim in claims:
        ok, measured, expected = claim.check(reports)
        verdicts[claim.id] = {"ok": bool(ok), "measured": measured, "expected": expected, "claim": claim.claim}
    return verdicts


def claims_count(verdicts: dict[str, dict]) -> dict[str, int]:
    """How many claims hold, of how many: the one claims figure `dvc exp show` lists."""
    return {"claims_hold": sum(bool(v["ok"]) for v in verdicts.values()), "claims_total": len(verdicts)}


def _in_words(cid: str, words: dict[str, str], verdict: dict) -> str:
    return (f"{cid}: {words.get(cid, '(not in the claims file)')} Measured {verdict['measured']}, "
            f"expected {verdict['expected']}.")


def failing_in_words(claims: list, verdicts: dict[str, dict]) -> list[str]:
    """One line per claim that does not hold and is not marked `known_to_fail`: what it says, what was
    measured, what was expected. `verdicts` may be read back from reports/claims.json, which holds no
    words: they come from `claims`."""
    words = {c.id: c.claim for c in claims}
    marked = {c.id for c in claims if c.known_to_fail}
    return [_in_words(cid, words, v) for cid, v in verdicts.items() if not v["ok"] and cid not in marked]


def marked_in_words(claims: list, verdicts: dict[str, dict]) -> tuple[list[str], list[str]]:
    """The claims marked `known_to_fail`: (those that fail, with why; those that now hold, to unmark)."""
    words = {c.id: c.claim for c in claims}
    failing, holding = [], []
    for claim in claims:
        if claim.known_to_fail and claim.id in verdicts:
            verdict = verdicts[claim.id]
            if verdict["ok"]:
                holding.append(_in_words(claim.id, words, verdict))
            else:
                failing.append(f"{_in_words(claim.id, words, verdict)} Known to fail: {claim.known_to_fail}")
    return failing, holding


def verdicts_markdown(claims: list, verdicts: dict[str, dict]) -> str:
    """The verdicts as a section of reports/summary.md: those that fail first, in words, then every one."""
    from tabulate import tabulate

    count = claims_count(verdicts)
    failing = failing_in_words(claims, verdicts)
    known, now_hold = marked_in_words(claims, verdicts)
    lines = [f"## Claims: {count['claims_hold']} of {count['claims_total']} hold\n"]
    if failing:
        lines += [f"**Do not hold ({len(failing)}):**\n", *(f"- {line}" for line in failing), ""]
    if known:
        lines += [f"**Known not to reproduce here ({len(known)}), marked `known_to_fail` in `{CLAIMS_FILE}`:**\n",
                  *(f"- {line}" for line in known), ""]
    if now_hold:
        lines += [f"**Marked `known_to_fail` but hold on this run ({len(now_hold)}):**\n",
                  *(f"- {line}" for line in now_hold), ""]
    if not failing and not known:
        lines.append(f"Every finding in `{CLAIMS_FILE}` holds on this run.\n")
    words = {c.id: c.claim for c in claims}
    rows = [(cid, "holds" if v["ok"] else "**fails**", v["measured"], v["expected"], words.get(cid, ""))
            for cid, v in verdicts.items()]
    table = tabulate(rows, headers=["claim", "verdict", "measured", "expected", "in words"], tablefmt="pipe")
    lines.append(f"<details><summary>Every claim</summary>\n\n{table}\n\n</details>\n")
    return "\n".join(lines)
