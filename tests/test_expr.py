"""The rule condition language: safe by construction, NaN-aware."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsdiag.analysis.rules.expr import ExpressionError, parse

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


def test_missing_values_are_unknown_never_true_or_false() -> None:
    for values in ({}, {"x": float("nan")}, {"x": None}):
        assert parse("x >= 1").holds(values) is None
        assert parse("not (x < 50)").holds(values) is None  # was silently True
        assert parse("x / 2").evaluate(values) is None
        assert parse("max(x, 1)").evaluate(values) is None
        assert parse("1 if x > 0 else 2").evaluate(values) is None
    assert parse("x < 50 or y >= 1").holds({"y": 0.0}) is None
    assert parse("x >= 1").missing({"y": 1.0}) == ["x"]
    assert parse("a >= 1 and b >= 1").missing({"a": None, "b": float("nan")}) == ["a", "b"]


@pytest.mark.parametrize(
    "source, values, expected",
    [
        ("a >= 10 and x < 50", {"a": 5.0}, False),  # the known operand decides
        ("a >= 10 or x < 50", {"a": 12.0}, True),
        ("a >= 10 and x < 50", {"a": 12.0}, None),
        ("a >= 10 or x < 50", {"a": 5.0}, None),
        ("a < b < x", {"a": 3.0, "b": 1.0}, False),
        ("a < b < x", {"a": 0.0, "b": 1.0}, None),
    ],
)
def test_known_values_decide_when_they_can(
    source: str, values: dict, expected: bool | None
) -> None:
    assert parse(source).holds(values) is expected


def test_arithmetic_nan_compares_false() -> None:
    """Division by zero is undefined, not missing: a comparison on it is false."""
    assert math.isnan(parse("1 / y").evaluate({"y": 0}))
    assert parse("1 / y > 0").holds({"y": 0}) is False


def test_named_constants_become_thresholds() -> None:
    expression = parse("x >= SATURATED_PCT and not (y < LIMIT)", {"SATURATED_PCT": 60, "LIMIT": 5})
    assert expression.names == {"x", "y"} and expression.constants == {
        "LIMIT": 5.0,
        "SATURATED_PCT": 60.0,
    }
    assert expression.holds({"x": 60.0, "y": 5.0}) is True
    assert [(c.metric, c.op, c.threshold) for c in expression.comparisons()] == [
        ("x", ">=", 60.0),
        ("y", ">=", 5.0),
    ]


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
