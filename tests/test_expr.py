"""The rule condition language: safe by construction, NaN-aware."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsdiag.analysis.expr import ExpressionError, parse

numbers = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(numbers, numbers)
def test_comparisons_match_python(a: float, b: float) -> None:
    for op in ("<", "<=", ">", ">=", "==", "!="):
        expression = parse(f"a {op} b")
        assert expression.evaluate({"a": a, "b": b}) == eval(f"{a!r} {op} {b!r}")


@given(numbers, numbers, numbers)
def test_arithmetic_and_functions(a: float, b: float, c: float) -> None:
    value = parse("max(a, b) - min(b, c) * 2 + abs(a)").evaluate({"a": a, "b": b, "c": c})
    assert value == pytest.approx(max(a, b) - min(b, c) * 2 + abs(a))


def test_missing_values_make_comparisons_false_and_arithmetic_nan() -> None:
    assert parse("x >= 1").evaluate({}) is False
    assert parse("x >= 1").evaluate({"x": float("nan")}) is False
    assert parse("not (x < 1)").evaluate({}) is True
    assert math.isnan(parse("x / 2").evaluate({"x": None}))
    assert math.isnan(parse("1 / y").evaluate({"y": 0}))


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os')",
        "open('x')",
        "a.b",
        "a[0]",
        "lambda: 1",
        "[a for a in b]",
        "'text' == a",
        "a if",
        "exec('1')",
        "(yield)",
        "a @ b",
        "f(a)",
        "min(a, key=b)",
        "a ** 2",
    ],
)
def test_unsafe_or_malformed_is_rejected(source: str) -> None:
    with pytest.raises(ExpressionError):
        parse(source)


def test_evidence_reads_as_the_condition_that_held() -> None:
    comparisons = parse("a >= 60 and not (b >= 5) and 10 > c").comparisons()
    assert [(c.metric, c.op, c.threshold) for c in comparisons] == [
        ("a", ">=", 60),
        ("b", "<", 5),
        ("c", "<", 10),
    ]
