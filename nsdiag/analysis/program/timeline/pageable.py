"""pageable-memcpy: host-device copies from pageable memory, against the pinned-copy model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from nsdiag.analysis.program.analyses import PAGEABLE_MEMCPY
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.timeline.findings import Draft, per_range, share
from nsdiag.analysis.program.timeline.pinned import pageable_saving
from nsdiag.analysis.records.findings import Evidence, Finding
from nsdiag.analysis.rules.spec import RuleSpec


def gbps(nbytes: float, ns: float) -> float | None:
    return nbytes / ns if ns > 0 else None  # bytes per ns == GB/s


def pageable_memcpy(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = PAGEABLE_MEMCPY.params_of(rule)
    copies = ctx.pinned_copies(params)
    pageable = copies[copies["pageable"]]
    return per_range(
        PAGEABLE_MEMCPY,
        rule,
        ctx,
        pageable,
        pageable_saving,
        lambda device, name, group, saved: _draft(params, ctx, device, name, group, saved),
    )


def _directions(group: pd.DataFrame) -> dict[str, dict[str, Any]]:
    per_direction = {}
    for direction, part in group.groupby("direction"):
        bw = float(part["pinned_bw"].iloc[0])
        per_direction[str(direction)] = {
            "copies": len(part),
            "bytes": float(part["bytes"].sum()),
            "time_ns": float(part["duration"].sum()),
            "achieved_gb_per_s": gbps(part["bytes"].sum(), part["duration"].sum()),
            "pinned_gb_per_s": bw / 1e9 if bw > 0 else None,
        }
    return per_direction


def _draft(
    params: Mapping[str, float],
    ctx: ProgramContext,
    device: int,
    name: str,
    group: pd.DataFrame,
    saved: float,
) -> Draft:
    per_direction = _directions(group)
    nbytes, time_ns = float(group["bytes"].sum()), float(group["duration"].sum())
    pinned = [d["pinned_gb_per_s"] for d in per_direction.values() if d["pinned_gb_per_s"]]
    speedup = params["assumed_pinned_speedup"]
    achieved, best = gbps(nbytes, time_ns), max(pinned) if pinned else None
    values = {
        "copies": len(group),
        "copy_mb": nbytes / 1e6,
        "copy_ms": time_ns / 1e6,
        "copy_gb_per_s": achieved,
        "pinned_gb_per_s": best,
        "assumed_pinned_speedup": speedup,
        "pinned_basis": (
            f"pinned copies in this timeline reach {best:.1f} GB/s"
            if best
            else f"no pinned copy to compare with: assumed {speedup:g}x faster pinned"
        ),
    }
    evidence = (
        Evidence("pageable_copies", float(len(group))),
        Evidence("pageable_bytes", nbytes),
        Evidence("pageable_copy_time_ns", time_ns),
        Evidence("pageable_gb_per_s", achieved),
        Evidence("pinned_gb_per_s", best),
        share(ctx, saved, params["min_impact"]),
    )
    details = {
        "directions": per_direction,
        "streams": sorted(map(int, group["stream"].unique())),
    }
    return Draft(device, name, saved, values, evidence, details)
