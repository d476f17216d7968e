"""The claims' expression language: a small arithmetic over the reports' quantities (`value_of`), with seed means
kept paired by seed through + - * /, abs() and log10()."""

from __future__ import annotations

import ast
import math
import operator

from blocklab.analysis.claims.evidence import Evidence
from blocklab.analysis.intervals import Seeds, Welch
from blocklab.errors import BlocklabError


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def value_of(expression: str | float | int, evidence: Evidence):
    """The value of a claim quantity: a number, a list of numbers (for `seeds` and `grads`), or a seed
    mean (`Seeds`, or `Welch` for a difference over different seeds) whose interval a verdict reads."""
    if isinstance(expression, (int, float)):
        return expression
    functions = {"loss": evidence.metric, "metric": evidence.metric, "mean": evidence.mean, "std": evidence.std,
                 "seeds": evidence.seeds, "window": evidence.window, "at": evidence.at, "slope_at": evidence.slope_at,
                 "baseline": evidence.baseline, "published": evidence.published,
                 "grad": evidence.grad, "grads": evidence.grads,
                 "lr_sensitivity": evidence.lr_sensitivity, "max_trainable_lr": evidence.max_trainable_lr,
                 "best_lr": evidence.best_lr, "untrained": evidence.untrained, "lowest": evidence.lowest, "highest": evidence.highest, "abs": _absolute, "log10": _log10}

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return elementwise(operator.mul, walk(node.operand), -1)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return elementwise(_BINARY[type(node.op)], walk(node.left), walk(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            return functions[node.func.id](*(walk(a) for a in node.args))
        raise BlocklabError(f"claims.yaml: cannot evaluate '{ast.unparse(node)}' in '{expression}' (allowed: "
                            f"numbers, + - * /, and {', '.join(functions)})")

    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError:
        raise BlocklabError(f"claims.yaml: '{expression}' is not an expression") from None
    return walk(tree)


def elementwise(op, a, b):
    """A binary `op` over numbers, lists of numbers, or seed means; None (a value a run did not record)
    stays None."""
    if isinstance(a, list) or isinstance(b, list):
        if any(isinstance(x, (Seeds, Welch)) for x in (a, b)):
            raise BlocklabError("claims.yaml: a seed mean cannot be combined with a list of values")
        a_list = a if isinstance(a, list) else [a] * len(b)
        b_list = b if isinstance(b, list) else [b] * len(a)
        return [elementwise(op, x, y) for x, y in zip(a_list, b_list)]
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
