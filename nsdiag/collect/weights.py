"""Profiled kernels matched back to phase 1's signatures: the timeline weights a targeted session
needs (it profiles one launch of a signature that ran many times), and the plan's coverage."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from nsdiag.collect.plan import Plan
from nsdiag.collect.signatures import Signature, signatures
from nsdiag.model.names import function_name, normalized
from nsdiag.model.session import Session

# One duration group of a signature: (median ns, launches, total ns, variant, variants)
Variant = tuple[float, int, float, int, int]


def _key(name: str, grid: object, block: object) -> tuple[str, str, str, str]:
    return function_name(name), str(grid), str(block), normalized(name)


def coverage(plan: Plan, session: Session) -> dict[str, Any]:
    """Which planned signatures the ncu reports hold (matched by function, grid, block and the
    demangled name with the spelling differences between nsys and ncu removed; a signature split
    into duration groups needs a launch matched to its own group)."""
    k = session.kernels
    variant = (
        k["timeline_variant"].fillna(0).astype(int)
        if "timeline_variant" in k
        else pd.Series(0, index=k.index)
    )
    profiled = (
        {
            (_key(str(n), g, b), v)
            for n, g, b, v in zip(k["name"], k["grid"], k["block"], variant, strict=True)
        }
        if len(k)
        else set()
    )
    keys = {p[0] for p in profiled}
    shapes = {p[0][:3] for p in profiled}
    found: list[Signature] = []
    missing: list[Signature] = []
    for s in plan.signatures:
        key = _key(s.name, s.grid, s.block)
        hit = (key, s.variant) in profiled if s.variants > 1 else (key in keys or key[:3] in shapes)
        (found if hit else missing).append(s)
    return {
        "planned": len(plan.signatures),
        "profiled": len(found),
        "profiled_share": round(sum(s.share for s in found), 6),
        "missing_share": round(sum(s.share for s in missing), 6),
        "missing": [
            {"name": s.name, "grid": s.grid, "block": s.block, "share": round(s.share, 6)}
            for s in missing
        ],
    }


def timeline_weights(kernels: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """Each profiled launch with its signature's launch count and total time in the phase-1
    timeline (`timeline_launches`, `timeline_total_ns`; `timeline_variant` of `timeline_variants`
    where the signature's launches fall in several duration groups): a targeted session profiles
    one launch of a signature that ran many times, and its share of GPU time comes from the
    timeline."""
    exact: dict[tuple[str, str, str, str], list[Variant]] = {}
    by_shape: dict[tuple[str, str, str], dict[str, list[Variant]]] = {}
    for s in signatures(launches):
        entry = (s.median_ns, s.launches, s.total_ns, s.variant, s.variants)
        exact.setdefault(_key(s.name, s.grid, s.block), []).append(entry)
        by_shape.setdefault((s.function, s.grid, s.block), {}).setdefault(s.name, []).append(entry)
    durations = (
        kernels["duration_ns"]
        if "duration_ns" in kernels
        else pd.Series(float("nan"), index=kernels.index)
    )
    counts, totals, groups, of = [], [], [], []
    for name, grid, block, ns in zip(
        kernels["name"].astype(str), kernels["grid"], kernels["block"], durations, strict=True
    ):
        key = _key(name, grid, block)
        shape = by_shape.get(key[:3], {})
        variants = exact.get(key) or (next(iter(shape.values())) if len(shape) == 1 else None)
        hit = _nearest(variants, ns) if variants else None
        counts.append(hit[1] if hit else float("nan"))
        totals.append(hit[2] if hit else float("nan"))
        groups.append(hit[3] if hit else float("nan"))
        of.append(hit[4] if hit else float("nan"))
    return kernels.assign(
        timeline_launches=counts,
        timeline_total_ns=totals,
        timeline_variant=groups,
        timeline_variants=of,
    )


def _nearest(variants: list[Variant], duration_ns: float) -> Variant:
    """The duration group a profiled launch belongs to: the nearest median, on a log scale."""
    if len(variants) == 1 or not duration_ns or duration_ns != duration_ns or duration_ns <= 0:
        return max(variants, key=lambda v: v[2])
    return min(variants, key=lambda v: abs(math.log(duration_ns / v[0])) if v[0] > 0 else math.inf)
