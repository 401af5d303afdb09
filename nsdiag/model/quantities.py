"""Quantities in words for people: the one unit system every text nsdiag writes uses (durations
in ns, µs, ms, s; sizes in B, kB, MB, GB, TB; rates with an SI prefix; counts with thousands
separators), each with three significant digits (`4.30 µs`, `336 ms`, `1.25 s`, `7.00 kB`).

In the model layer so that the analyses' message templates (analysis/rules/template.py) and the
renderers (render/fmt.py) print one number the same way.
"""

from __future__ import annotations

import math

DIGITS = 3  # significant digits

_TIME = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"))
_SIZE = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
_PREFIX = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def significant(value: float, digits: int = DIGITS) -> str:
    """`value` with `digits` significant digits, trailing zeros kept (4.30, 336, 12.0), never
    in e-notation."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def _rounds_to(value: float, digits: int = DIGITS) -> float:
    """`value` as printed with `digits` significant digits (999.7 -> 1000)."""
    return float(significant(value, digits))


def scaled(value: float, units: tuple[tuple[float, str], ...], base: str, whole: bool) -> str:
    """`value` in the largest unit it reaches, three significant digits (`whole`: the base unit
    as a whole number: 512 ns, 96 B); a value that rounds up to the next unit takes it."""
    for scale, unit in units:
        shown = _rounds_to(value / scale)  # 0.9997 ms is 1.00 ms, not 1.000
        if abs(shown) >= 1:
            return f"{significant(shown)} {unit}"
    if whole or abs(value) >= 10 ** (DIGITS - 1):
        return f"{value:.0f} {base}"
    return f"{significant(value)} {base}"


def duration(ns: float) -> str:
    """Nanoseconds in words: `512 ns`, `4.30 µs`, `336 ms`, `1.25 s`."""
    return scaled(ns, _TIME, "ns", whole=abs(ns) >= 1)


def size(nbytes: float) -> str:
    """Bytes in words: `96 B`, `7.00 kB`, `134 kB`, `1.85 TB`."""
    return scaled(nbytes, _SIZE, "B", whole=True)


def rate(value: float, unit: str) -> str:
    """A rate with an SI prefix: `4.09 TB/s`, `103 TFLOP/s`, `512 B/s`."""
    units = tuple((scale, f"{prefix}{unit}") for scale, prefix in _PREFIX)
    return scaled(value, units, unit, whole=False)


def count(n: float) -> str:
    """A count with thousands separators: `5,475`; a fraction keeps three digits (`1.50`)."""
    if float(n).is_integer() or abs(n) >= 1e3:
        return f"{n:,.0f}"
    return significant(n)


def plural(n: float, noun: str, nouns: str | None = None) -> str:
    """`1 kernel signature`, `7 kernel signatures`, `2,628 launches` (`nouns`: an irregular
    plural)."""
    many = (
        nouns
        if nouns is not None
        else (noun + "es" if noun.endswith(("s", "sh", "ch", "x")) else noun + "s")
    )
    return f"{count(n)} {noun if n == 1 else many}"


def percent(value: float, low: float = 0.0, high: float = 100.0) -> float:
    """A derived percentage that is physically bounded (a hit rate, a share of time), held to
    [low, high]: counters sampled in different passes can add up past 100 by rounding."""
    if math.isnan(value):
        return value
    return min(max(value, low), high)
