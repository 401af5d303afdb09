"""Numbers made JSON-safe: JSON has no NaN or infinity, and numpy scalars are not numbers to it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_number(value: Any) -> Any:
    """JSON has no NaN: missing numbers become null."""
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return value
    if math.isnan(f) or math.isinf(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 and isinstance(value, int) else round(f, 6)


def clean(value: Any) -> Any:
    """Recursively make a structure JSON-safe (NaN -> null, numpy scalars -> Python)."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (str, bool)) or value is None:
        return value
    return json_number(value)
