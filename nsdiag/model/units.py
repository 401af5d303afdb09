"""Normalise Nsight Compute units to base units (ns, bytes, bytes/s, Hz, %, counts).

ncu prints base units with `--print-units base` ("nsecond", "byte", "byte/second") and rescaled
ones by default ("usecond", "Mbyte", "Gbyte/second", "Ghz"). Prefixes are decimal (SI).
"""
from __future__ import annotations

import re
from functools import lru_cache

_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_SCALE_TO_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
                     "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
_TIME_PER_SECOND = {"nsecond": 1e9, "usecond": 1e6, "msecond": 1e3, "second": 1.0}
_BYTE_WORD = re.compile(r"^([KMGTP]?)(i?)byte$")


@lru_cache(maxsize=None)
def parse_unit(unit: str) -> tuple[str, float]:
    """Return (base unit, factor) so that value_in_base = value * factor.

    Unknown units are returned unchanged with factor 1: counts such as "inst", "warp",
    "sector", "register/thread" or "cycle/usecond" rates we do not need to rescale are
    kept as ncu printed them.
    """
    u = (unit or "").strip()
    if u in ("", "%", "none"):
        return u, 1.0
    if u in _TIME_SCALE_TO_NS:
        return "nsecond", _TIME_SCALE_TO_NS[u]
    if "/" in u:
        num, den = u.split("/", 1)
        if den in _TIME_PER_SECOND:
            base_num, factor = parse_unit(num)
            return f"{base_num}/second", factor * _TIME_PER_SECOND[den]
        return u, 1.0
    m = _BYTE_WORD.match(u)
    if m:
        power = 1024.0 if m.group(2) else 1000.0
        exponent = "KMGTP".index(m.group(1)) + 1 if m.group(1) else 0
        return "byte", power**exponent
    lowered = u.lower()
    if lowered.endswith("hz"):
        return "hz", _PREFIX.get(u[0] if len(u) > 2 else "", 1.0)
    for word in ("cycle", "inst", "sector", "request", "warp", "thread", "block", "wavefront"):
        if u.endswith(word) and u[: -len(word)] in _PREFIX:
            return word, _PREFIX[u[: -len(word)]]
    return u, 1.0


def to_base(value: float, unit: str) -> tuple[float, str]:
    base, factor = parse_unit(unit)
    return value * factor, base
