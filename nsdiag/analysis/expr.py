"""A small, safe expression language for rule conditions and impact formulas.

Parsed with `ast` and checked against a whitelist (names, numbers, arithmetic, comparisons,
and/or/not, conditional expressions, min/max/abs/floor/ceil); evaluated by walking the tree,
never with `eval`. Missing values (None/NaN) make comparisons false and arithmetic NaN.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_BINOPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: a / b if b else math.nan,
    ast.Mod: lambda a, b: a % b if b else math.nan,
}
_CMPOPS: dict[type, Callable[[float, float], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "floor": math.floor,
    "ceil": math.ceil,
}
_SYMBOLS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class ExpressionError(ValueError):
    """The expression uses syntax outside the whitelist."""


@dataclass(frozen=True)
class Comparison:
    """One `metric OP threshold` test inside a condition, shown as evidence next to its value."""

    metric: str
    op: str
    threshold: float


@dataclass(frozen=True)
class Expression:
    source: str
    tree: ast.Expression
    names: frozenset[str]

    def evaluate(self, values: Mapping[str, float | None]) -> float | bool:
        return _eval(self.tree.body, values)

    def comparisons(self) -> list[Comparison]:
        """Every `metric OP number` test, with the operator flipped under `not` so the
        evidence reads as the condition that held (not (x >= 5) shows as x < 5)."""
        found: list[Comparison] = []
        _collect(self.tree.body, False, found)
        return found


_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _collect(node: ast.AST, negated: bool, found: list[Comparison]) -> None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _collect(node.operand, not negated, found)
        return
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right, op = node.left, node.comparators[0], _SYMBOLS[type(node.ops[0])]
        metric, threshold = None, None
        if isinstance(left, ast.Name) and _is_number(right):
            metric, threshold = left.id, _number(right)
        elif _is_number(left) and isinstance(right, ast.Name):
            metric, threshold, op = right.id, _number(left), _FLIPPED[op]
        if metric is not None:
            found.append(Comparison(metric, _NEGATED[op] if negated else op, threshold))
        return
    for child in ast.iter_child_nodes(node):
        _collect(child, negated, found)


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_number(node.operand)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _number(node: ast.AST) -> float:
    if isinstance(node, ast.UnaryOp):
        return -_number(node.operand)
    return float(node.value)  # type: ignore[attr-defined]


def parse(source: str) -> Expression:
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"syntax error in {source!r}: {exc.msg}") from exc
    names: set[str] = set()
    for node in ast.walk(tree):
        _check(node, source)
        if isinstance(node, ast.Name) and node.id not in _FUNCS:
            names.add(node.id)
    return Expression(source, tree, frozenset(names))


_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Compare,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Call,
    ast.IfExp,
    *_BINOPS,
    *_CMPOPS,
)


def _check(node: ast.AST, source: str) -> None:
    if not isinstance(node, _ALLOWED):
        raise ExpressionError(f"{type(node).__name__} is not allowed in {source!r}")
    if isinstance(node, ast.Constant) and type(node.value) not in (int, float, bool):
        raise ExpressionError(f"only numbers are allowed as constants in {source!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
            raise ExpressionError(f"only {', '.join(sorted(_FUNCS))} may be called in {source!r}")


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _eval(node: ast.AST, values: Mapping[str, float | None]) -> float | bool:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        value = values.get(node.id)
        return math.nan if _missing(value) else value  # type: ignore[return-value]
    if isinstance(node, ast.BoolOp):
        results = (_truth(_eval(v, values)) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values)
        if isinstance(node.op, ast.Not):
            return not _truth(operand)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, values), _eval(node.right, values)
        if _missing(left) or _missing(right):
            return math.nan
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, values)
            if _missing(left) or _missing(right) or not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _truth(_eval(node.test, values)) else node.orelse, values)
    if isinstance(node, ast.Call):
        args = [_eval(a, values) for a in node.args]
        if any(_missing(a) for a in args):
            return math.nan
        return float(_FUNCS[node.func.id](*args))  # type: ignore[union-attr]
    raise ExpressionError(f"cannot evaluate {type(node).__name__}")


def _truth(value: float | bool) -> bool:
    return False if _missing(value) else bool(value)
