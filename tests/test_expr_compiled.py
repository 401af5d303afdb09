"""Issue 39, item 2: rule expressions run as closures built once (`Expression._compiled`), not by
walking the syntax tree on every call. Both must give the same value for every expression and
every input, in the three-valued logic: unknown (None), undefined (NaN), or the value."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsdiag.analysis.rules.expr import ExpressionError, Value, _eval, parse
from nsdiag.analysis.ruleset import default_rules

NAMES = ("a", "b", "c")
leaves = st.sampled_from([*NAMES, "0", "1", "2.5", "100", "-3"])


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, st.sampled_from(["+", "-", "*", "/", "%"]), children)
    compare = st.tuples(children, st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), children)
    return st.one_of(
        binary.map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        compare.map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]} < {t[1]} <= {t[2]})"),
        st.tuples(children, st.sampled_from(["and", "or"]), children, children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]} {t[1]} {t[3]})"
        ),
        children.map(lambda c: f"(not {c})"),
        children.map(lambda c: f"(-{c})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        st.tuples(st.sampled_from(["min", "max"]), children, children).map(
            lambda t: f"{t[0]}({t[1]}, {t[2]})"
        ),
        st.tuples(st.sampled_from(["abs", "floor", "ceil"]), children).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
    )


expressions = st.recursive(leaves, _combine, max_leaves=12)
inputs = st.one_of(
    st.none(),
    st.just(math.nan),
    st.just(0.0),
    st.just(math.inf),
    st.booleans(),
    st.just("not a number"),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
)


def _same(a: Value, b: Value) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and type(a) is type(b)


def _both(source: str, values: dict[str, Any]) -> tuple[Value, Value]:
    expression = parse(source)
    return expression.evaluate(values), _eval(expression.tree.body, values)


@settings(max_examples=400, deadline=None)
@given(expressions, st.fixed_dictionaries(dict.fromkeys(NAMES, inputs)))
@example("(a / b) >= 1 or c", {"a": 1.0, "b": 0.0, "c": None})
@example("max(a, b) if not c else -a", {"a": math.nan, "b": 2.0, "c": False})
def test_compiled_expression_equals_the_tree_walk(source: str, values: dict[str, Any]) -> None:
    try:
        compiled, walked = _both(source, values)
    except ExpressionError:
        return  # refused at parse time (a constant divisor of zero, an undefined constant)
    assert _same(compiled, walked), (source, values, compiled, walked)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_shipped_rules_evaluate_as_the_tree_walk(data: st.DataObject) -> None:
    for rule in default_rules():
        for expression in (rule.condition, rule.impact, rule.ncu_condition):
            if expression is None:
                continue
            values = {name: data.draw(inputs) for name in sorted(expression.names)}
            compiled = expression.evaluate(values)
            walked = _eval(expression.tree.body, values)
            assert _same(compiled, walked), (rule.id, expression.source, values)
