"""Missing values, one rule for the whole package.

A metric a GPU or an ncu version lacks is missing, not an error: a table cell holds NaN (or None,
or pandas' NA), and the analyses and renderers read cells through these helpers so that they all
agree on what counts as missing and how to read a number.
"""

from __future__ import annotations

import math
import sys


def missing(value: object) -> bool:
    """True for None, NaN (Python, numpy) and pandas' NA/NaT; other values, strings included,
    are present. (pandas is not imported here: a value can only be its NA or NaT once something
    else has imported it, and the rule loader runs without it.)"""
    if type(value) is float:  # the common case, asked hundreds of thousands of times
        return value != value
    if value is None:
        return True
    pd = sys.modules.get("pandas")
    if pd is not None and (value is pd.NA or value is pd.NaT):
        return True
    try:
        return math.isnan(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return False


def number(value: object) -> float | None:
    """The value as a float; None when it is missing or not a number."""
    if type(value) is float:
        return None if value != value else value
    if missing(value):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def number_or(value: object, default: float) -> float:
    """The value as a float; `default` when it is missing or not a number."""
    found = number(value)
    return default if found is None else found
