"""A small, safe expression language for rule conditions and impact formulas.

Parsed with `ast` and checked against a whitelist (names, numbers, arithmetic, comparisons,
and/or/not, conditional expressions, min/max/abs/floor/ceil); evaluated by walking the tree,
never with `eval`. Named constants (e.g. SATURATED_PCT) are given to `parse` and become numbers
in the tree.

Missing values (None or NaN in `values`) are unknown, in three-valued logic: arithmetic,
comparisons and function calls on an unknown are unknown, `not unknown` is unknown, and and/or
are unknown only when the known operands do not decide (`x >= 10 and y > 1` is False when x is 5,
whatever y is). `evaluate` returns None for unknown, so a missing metric never makes a condition
silently true or false: the rule engine reports the rule as skipped (analysis/rules/evaluate.py).

Division (or %) by zero is undefined, not missing: it gives NaN, and so does any arithmetic,
function, comparison, `not` or conditional on a NaN (and/or only where the other operands do
not decide). A condition that is undefined does not hold; an impact that is undefined gives no
estimate, with a note (`zero_divisors` says which divisor was zero): never a silent 0.

`parse` refuses, besides syntax outside the whitelist, what could make evaluation fail: a
source longer than MAX_SOURCE or nested deeper than MAX_DEPTH, numbers that are not finite,
calls with the wrong number of arguments, and a division by a constant zero.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from nsdiag.model.values import missing as is_missing
from nsdiag.model.values import number

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


def _rounding(function: Callable[[float], int]) -> Callable[[float], float]:
    """floor/ceil that give inf and NaN back (math.floor raises on them)."""
    return lambda x: float(function(x)) if math.isfinite(x) else x


_FUNCS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "floor": _rounding(math.floor),
    "ceil": _rounding(math.ceil),
}
_ARITY: dict[str, tuple[int, int]] = {  # fewest and most arguments
    "min": (2, 32),
    "max": (2, 32),
    "abs": (1, 1),
    "floor": (1, 1),
    "ceil": (1, 1),
}
MAX_SOURCE = 2000  # characters; the longest shipped condition has about 300
MAX_DEPTH = 50  # nesting of the syntax tree; the deepest shipped one is about 12
Value = float | bool | None  # None: unknown, because a name it reads is missing

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
    names: frozenset[str]  # the names it reads (constants and functions aside)
    constants: Mapping[str, float] = field(default_factory=dict)  # the named constants it uses

    def evaluate(self, values: Mapping[str, Any]) -> Value:
        """The value; None when it depends on a name missing from `values`."""
        return self._compiled(values)

    @cached_property
    def _compiled(self) -> Callable[[Mapping[str, Any]], Value]:
        """The tree as nested closures, built on first use: what `_eval` computes, without
        finding each node's kind again on every call (a diagnosis evaluates 10^4 conditions)."""
        return _compile(self.tree.body)

    def holds(self, values: Mapping[str, Any]) -> bool | None:
        """Whether the condition holds; None when that depends on a missing name."""
        return _truth(self.evaluate(values))

    def missing(self, values: Mapping[str, Any]) -> list[str]:
        """The names it reads that are missing from `values` (None, NaN or not a number),
        sorted."""
        return sorted(name for name in self.names if number(values.get(name)) is None)

    def zero_divisors(self, values: Mapping[str, Any]) -> list[str]:
        """The divisors (as written) that are zero for these values: why the value is NaN."""
        return [
            ast.unparse(node.right)
            for node in ast.walk(self.tree)
            if isinstance(node, ast.BinOp)
            and isinstance(node.op, (ast.Div, ast.Mod))
            and _eval(node.right, values) == 0
        ]

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
        metric, threshold = None, 0.0
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
    assert isinstance(node, ast.Constant)
    return float(cast(float, node.value))


def parse(source: str, constants: Mapping[str, float] | None = None) -> Expression:
    """Parse and check `source`; names in `constants` are replaced by their values."""
    constants = constants or {}
    if not isinstance(source, str):
        raise ExpressionError(f"an expression is a string, not {type(source).__name__}")
    if len(source) > MAX_SOURCE:
        raise ExpressionError(f"longer than {MAX_SOURCE} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"syntax error in {source!r}: {exc.msg}") from exc
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte, too deep a nesting
        raise ExpressionError(f"cannot parse {source!r}: {exc}") from exc
    _check_depth(tree, source)
    _check_functions_called(tree, source)
    names: set[str] = set()
    for node in ast.walk(tree):
        _check(node, source)
        if isinstance(node, ast.Name) and node.id not in _FUNCS:
            names.add(node.id)
    used = {name: float(constants[name]) for name in sorted(names & set(constants))}
    tree = ast.fix_missing_locations(_Inline(used).visit(tree))
    _check_constant_parts(tree, source)
    return Expression(source, tree, frozenset(names - set(used)), used)


def _check_depth(tree: ast.AST, source: str) -> None:
    """Refuse a tree deeper than MAX_DEPTH (walked without recursion), so evaluating it never
    meets Python's recursion limit."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(f"nested deeper than {MAX_DEPTH} levels in {source[:60]!r}")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _constant(node: ast.AST) -> bool:
    return not any(isinstance(n, ast.Name) for n in ast.walk(node))


def _check_constant_parts(tree: ast.Expression, source: str) -> None:
    """A division by a divisor that is zero whatever the metrics are, or an expression that is
    undefined whatever they are, is a mistake in the rule."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, (ast.Div, ast.Mod))
            and _constant(node.right)
            and _eval(node.right, {}) in (0, None)
        ):
            raise ExpressionError(f"divides by zero ({ast.unparse(node)}) in {source!r}")
    if _constant(tree) and is_missing(_eval(tree.body, {})):
        raise ExpressionError(f"{source!r} is undefined (not a number)")


class _Inline(ast.NodeTransformer):
    """Replace named constants by numbers, so they compare and show as thresholds."""

    def __init__(self, constants: Mapping[str, float]) -> None:
        self.constants = constants

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.constants:
            return ast.copy_location(ast.Constant(self.constants[node.id]), node)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        """Integers become floats, so arithmetic never grows a huge int (`_check` made sure
        they are finite as floats)."""
        if type(node.value) is int:
            return ast.copy_location(ast.Constant(float(node.value)), node)
        return node


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
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float, bool):
            raise ExpressionError(f"only numbers are allowed as constants in {source!r}")
        try:
            finite = math.isfinite(float(cast(float, node.value)))
        except OverflowError:
            finite = False
        if not finite:
            raise ExpressionError(f"the number {str(node.value)[:20]} is not finite in {source!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
            raise ExpressionError(f"only {', '.join(sorted(_FUNCS))} may be called in {source!r}")
        fewest, most = _ARITY[node.func.id]
        if not fewest <= len(node.args) <= most:
            wanted = str(fewest) if fewest == most else f"{fewest} to {most}"
            raise ExpressionError(
                f"{node.func.id} takes {wanted} argument(s), not {len(node.args)}, in {source!r}"
            )


def _check_functions_called(tree: ast.AST, source: str) -> None:
    """A function's name only where it is called (`min + 1` is a mistake, not a metric)."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _FUNCS and id(node) not in called:
            raise ExpressionError(
                f"{node.id} is a function: call it, {node.id}(...), in {source!r}"
            )


def _eval(node: ast.AST, values: Mapping[str, Any]) -> Value:
    if isinstance(node, ast.Constant):
        return cast(float | bool, node.value)  # _check allows finite numbers only
    if isinstance(node, ast.Name):
        return number(values.get(node.id))  # a missing or non-numeric value is unknown
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, values)
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values)
        if operand is None or is_missing(operand):
            return operand
        if isinstance(node.op, ast.Not):
            return not operand
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, values), _eval(node.right, values)
        if left is None or right is None:
            return None
        if is_missing(left) or is_missing(right):
            return math.nan
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        return _compare(node, values)
    if isinstance(node, ast.IfExp):
        test = _eval(node.test, values)
        if test is None or is_missing(test):
            return test
        return _eval(node.body if test else node.orelse, values)
    if isinstance(node, ast.Call):
        args = [_eval(a, values) for a in node.args]
        if any(a is None for a in args):
            return None
        if any(is_missing(a) for a in args):
            return math.nan
        return float(_FUNCS[node.func.id](*args))  # type: ignore[attr-defined]
    raise ExpressionError(f"cannot evaluate {type(node).__name__}")


Compiled = Callable[[Mapping[str, Any]], Value]


def _compile(node: ast.AST) -> Compiled:
    """`_eval(node, values)` as a function of `values`, node by node the same rules."""
    if isinstance(node, ast.Constant):
        constant = cast(float | bool, node.value)
        return lambda values: constant
    if isinstance(node, ast.Name):
        name = node.id
        return lambda values: number(values.get(name))
    if isinstance(node, ast.BoolOp):
        return _compiled_bool_op(node)
    if isinstance(node, ast.UnaryOp):
        return _compiled_unary(node)
    if isinstance(node, ast.BinOp):
        left, right, apply = _compile(node.left), _compile(node.right), _BINOPS[type(node.op)]

        def binop(values: Mapping[str, Any]) -> Value:
            a, b = left(values), right(values)
            if a is None or b is None:
                return None
            if is_missing(a) or is_missing(b):
                return math.nan
            return apply(a, b)

        return binop
    if isinstance(node, ast.Compare):
        return _compiled_compare(node)
    if isinstance(node, ast.IfExp):
        test, body, orelse = _compile(node.test), _compile(node.body), _compile(node.orelse)

        def choose(values: Mapping[str, Any]) -> Value:
            held = test(values)
            if held is None or is_missing(held):
                return held
            return body(values) if held else orelse(values)

        return choose
    if isinstance(node, ast.Call):
        arguments = [_compile(a) for a in node.args]
        function = _FUNCS[node.func.id]  # type: ignore[attr-defined]

        def call(values: Mapping[str, Any]) -> Value:
            args = [a(values) for a in arguments]
            if any(a is None for a in args):
                return None
            if any(is_missing(a) for a in args):
                return math.nan
            return float(function(*args))

        return call
    raise ExpressionError(f"cannot evaluate {type(node).__name__}")


def _compiled_unary(node: ast.UnaryOp) -> Compiled:
    operand, op = _compile(node.operand), node.op

    def unary(values: Mapping[str, Any]) -> Value:
        x = operand(values)
        if x is None or is_missing(x):
            return x
        if isinstance(op, ast.Not):
            return not x
        return -x if isinstance(op, ast.USub) else +x

    return unary


def _compiled_bool_op(node: ast.BoolOp) -> Compiled:
    parts = [_compile(v) for v in node.values]
    decisive = isinstance(node.op, ast.Or)

    # `_bool_op`'s rules; a compiled part gives a float, a bool or None, so `r != r` is
    # is_missing (NaN), and the first operand that settles it ends the evaluation (pure)
    def bool_op(values: Mapping[str, Any]) -> Value:
        unknown = undefined = False
        for part in parts:
            r = part(values)
            if r is None:
                unknown = True
            elif r != r:
                undefined = True
            elif bool(r) == decisive:
                return decisive
        if unknown:
            return None
        return math.nan if undefined else not decisive

    return bool_op


def _compiled_compare(node: ast.Compare) -> Compiled:
    first = _compile(node.left)
    steps = [
        (_CMPOPS[type(op)], _compile(c)) for op, c in zip(node.ops, node.comparators, strict=True)
    ]
    if len(steps) == 1:  # `metric OP threshold`, most of them: `compare` with one pair
        (test, right_of) = steps[0]

        def compare_one(values: Mapping[str, Any]) -> Value:
            left, right = first(values), right_of(values)
            if left is None or right is None:
                return None
            if left != left or right != right:  # NaN (a compiled part gives no other missing)
                return math.nan
            return bool(test(left, right))

        return compare_one

    def compare(values: Mapping[str, Any]) -> Value:
        unknown = undefined = False
        left = first(values)
        for test, comparator in steps:
            right = comparator(values)
            if left is None or right is None:
                unknown = True
            elif is_missing(left) or is_missing(right):
                undefined = True
            elif not test(left, right):
                return False
            left = right
        return None if unknown else math.nan if undefined else True

    return compare


def _bool_op(node: ast.BoolOp, values: Mapping[str, Any]) -> Value:
    """and/or in three-valued logic: an unknown (or undefined) operand decides only when the
    known ones do not (False and unknown is False; True and unknown is unknown). Unknown wins
    over undefined: a missing metric may still decide."""
    results = [_eval(v, values) for v in node.values]
    decisive = isinstance(node.op, ast.Or)  # the value that settles it: True for or
    if any(r is not None and not is_missing(r) and bool(r) == decisive for r in results):
        return decisive
    if any(r is None for r in results):
        return None
    return math.nan if any(is_missing(r) for r in results) else not decisive


def _compare(node: ast.Compare, values: Mapping[str, Any]) -> Value:
    """A comparison chain: False as soon as a known pair fails, unknown when a pair depends on
    a missing name, undefined (NaN) when a pair compares a NaN that arithmetic produced
    (0 / 0), else True."""
    unknown = undefined = False
    left = _eval(node.left, values)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = _eval(comparator, values)
        if left is None or right is None:
            unknown = True
        elif is_missing(left) or is_missing(right):
            undefined = True
        elif not _CMPOPS[type(op)](left, right):
            return False
        left = right
    return None if unknown else math.nan if undefined else True


def _truth(value: Value) -> bool | None:
    """True or False; None when unknown. Undefined (NaN) is not true: a condition that divides
    by zero does not hold."""
    if value is None:
        return None
    return False if is_missing(value) else bool(value)
