"""Profiled kernel launches matched to a timeline's kernel signatures.

A targeted session profiles one launch of a signature that ran many times; its share of GPU time,
and of the analysed region, comes from the timeline. Kernels are matched by their signature key
(model/signature.py: function name, grid, block and the demangled name with the spelling
differences between nsys and ncu removed; by function, grid and block where the timeline has one
name for that shape), and a signature whose launches did different work under one grid (duration
groups) by the nearest duration. Used at profile time (collect/) and when diagnosing a region
(analysis/).
"""

from __future__ import annotations

import math

import pandas as pd

from nsdiag.model.launches import signatures
from nsdiag.model.signature import SignatureKey, signature_key

# One duration group of a signature: (median ns, launches, total ns, variant, variants)
Variant = tuple[float, int, float, int, int]


def timeline_weights(kernels: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """Each profiled launch with its signature's launch count and total time in the phase-1
    timeline (`timeline_launches`, `timeline_total_ns`; `timeline_variant` of `timeline_variants`
    where the signature's launches fall in several duration groups): a targeted session profiles
    one launch of a signature that ran many times, and its share of GPU time comes from the
    timeline."""
    exact: dict[SignatureKey, list[Variant]] = {}
    by_shape: dict[tuple[str, str, str], dict[str, list[Variant]]] = {}
    for s in signatures(launches):
        entry = (s.median_ns, s.launches, s.total_ns, s.variant, s.variants)
        exact.setdefault(s.key, []).append(entry)
        by_shape.setdefault(s.shape, {}).setdefault(s.name, []).append(entry)
    durations = (
        kernels["duration_ns"]
        if "duration_ns" in kernels
        else pd.Series(float("nan"), index=kernels.index)
    )
    counts, totals, groups, of = [], [], [], []
    for name, grid, block, ns in zip(
        kernels["name"].astype(str), kernels["grid"], kernels["block"], durations, strict=True
    ):
        key = signature_key(name, grid, block)
        shape = by_shape.get(key.shape, {})
        variants = exact.get(key) or (next(iter(shape.values())) if len(shape) == 1 else None)
        hit = _nearest(variants, ns) if variants else None
        counts.append(hit[1] if hit else float("nan"))
        totals.append(hit[2] if hit else float("nan"))
        groups.append(hit[3] if hit else float("nan"))
        of.append(hit[4] if hit else float("nan"))
    weights = pd.DataFrame(
        {
            "timeline_launches": counts,
            "timeline_total_ns": totals,
            "timeline_variant": groups,
            "timeline_variants": of,
        },
        index=kernels.index,
    )
    # One concat instead of four inserts: a raw full-set table has thousands of columns.
    return pd.concat(
        [kernels.drop(columns=list(weights.columns), errors="ignore"), weights], axis=1
    )


def _nearest(variants: list[Variant], duration_ns: float) -> Variant:
    """The duration group a profiled launch belongs to: the nearest median, on a log scale."""
    if len(variants) == 1 or not duration_ns or duration_ns != duration_ns or duration_ns <= 0:
        return max(variants, key=lambda v: v[2])
    return min(variants, key=lambda v: abs(math.log(duration_ns / v[0])) if v[0] > 0 else math.inf)
