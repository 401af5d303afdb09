"""Normalise Nsight Compute units to base units (ns, byte, byte/s, hz, %, counts).

ncu prints base units with `--print-units base` ("ns", "byte", "byte/s", "sector/s") and
rescaled ones by default ("us", "Mbyte", "Gbyte/s", "Ghz", "sector/ns", "Kbyte/block",
"%/Kbyte"); older versions spell time "nsecond"/"usecond" and clocks "cycle/second" (read as
hz). Prefixes are decimal (SI); the binary "Kibyte" family is 1024-based. A compound unit scales
numerator and denominator.
"""

from __future__ import annotations

import re
from functools import cache

_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_NS = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}
_BYTE = re.compile(r"^([KMGTP]?)(i?)byte$")
_COUNTS = ("cycle", "inst", "sector", "request", "warp", "thread", "block", "wavefront", "register")


@cache
def parse_unit(unit: str) -> tuple[str, float]:
    """Return (base unit, factor) so that value_in_base = value * factor.

    Units nsdiag does not know are kept as printed with factor 1.
    """
    u = (unit or "").strip()
    if u in ("", "%", "none"):
        return u, 1.0
    if "/" in u:
        num, den = u.split("/", 1)
        base_num, f_num = parse_unit(num)
        if den in _TIME_NS:  # a rate: per second (cycles per second are a clock: ncu 2019-2020)
            unit = "hz" if base_num == "cycle" else f"{base_num}/s"
            return unit, f_num * 1e9 / _TIME_NS[den]
        base_den, f_den = parse_unit(den)
        return f"{base_num}/{base_den}", f_num / f_den
    if u in _TIME_NS:
        return "ns", _TIME_NS[u]
    match = _BYTE.match(u)
    if match:
        power = 1024.0 if match.group(2) else 1000.0
        exponent = "KMGTP".index(match.group(1)) + 1 if match.group(1) else 0
        return "byte", power**exponent
    if u.lower().endswith("hz") and u[:-2] in _PREFIX:
        return "hz", _PREFIX[u[:-2]]
    for word in _COUNTS:
        if u.endswith(word) and u[: -len(word)] in _PREFIX:
            return word, _PREFIX[u[: -len(word)]]
    return u, 1.0
