"""gpu-idle-gaps: long stretches with no GPU work, and what the host did meanwhile."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nsdiag.analysis.diagnosis import Evidence, Finding
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.record import MIN_IMPACT, Param, ProgramAnalysis
from nsdiag.analysis.program.timeline.attribution import gap_parts
from nsdiag.analysis.program.timeline.findings import RANGE_VALUES, Draft, per_range, share
from nsdiag.model.intervals import union_ns
from nsdiag.model.tables import records

if TYPE_CHECKING:  # the rule loader imports the analyses' records
    from nsdiag.analysis.rules.spec import RuleSpec


def gpu_idle_gaps(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    v = ctx.view
    params = GPU_IDLE_GAPS.params_of(rule)
    gaps = v.gaps[v.gaps["length"] >= params["min_gap_ns"]]
    if gaps.empty:
        return []
    parts = gap_parts(ctx.session.nvtx_ranges, gaps).join(gaps, on="gap")
    # time inside communication kernels is not idle: the rank analyses account for it
    free = (parts["length"] - parts["comm_ns"]).clip(lower=0)
    parts["idle"] = free * parts["fraction"]
    parts["claim"] = (free - parts["sync_claim_ns"]).clip(lower=0) * parts["fraction"]
    api = ctx.session.api_calls
    api = api.sort_values("start_ns") if len(api) else api
    return per_range(
        GPU_IDLE_GAPS,
        rule,
        ctx,
        parts,
        lambda group: float(group["claim"].sum()),
        lambda device, name, group, saved: _draft(params, ctx, (device, name, saved), group, api),
    )


def _draft(
    params: Mapping[str, float],
    ctx: ProgramContext,
    where: tuple[int, str, float],
    group: pd.DataFrame,
    api: pd.DataFrame,
) -> Draft:
    """`where`: device, range and the saving; `group`: the range's parts of idle gaps."""
    device, name, saved = where
    min_gap = params["min_gap_ns"]
    idle = float(group["idle"].sum())
    largest = [_largest(g, api) for g in records(group.nlargest(3, "idle"))]
    values = {
        "idle_ms": idle / 1e6,
        "gaps": len(group),
        "min_gap_us": min_gap / 1e3,
        "largest_gap_ms": largest[0]["length_ns"] / 1e6,
        "host_activity": _describe_host(largest),
    }
    evidence = (
        Evidence("idle_gaps", float(len(group))),
        Evidence("idle_ns", idle),
        Evidence("largest_gap_ns", largest[0]["length_ns"], ">=", min_gap),
        share(ctx, saved, params["min_impact"]),
    )
    details = {
        "gaps": len(group),
        "idle_ns": idle,
        "attributed_to_syncs_ns": float((group["sync_claim_ns"] * group["fraction"]).sum()),
        "largest": largest,
    }
    return Draft(device, name, saved, values, evidence, details)


def _largest(gap: dict[str, Any], api: pd.DataFrame) -> dict[str, Any]:
    top, covered = _host_activity(
        api, int(gap["start_ns"]), int(gap["end_ns"]), int(gap["process_id"])
    )
    return {
        "start_ns": int(gap["start_ns"]),
        "length_ns": float(gap["length"]),
        "in_range_ns": float(gap["idle"]),
        "host_api": top,
        "host_api_coverage": covered,
    }


def _host_activity(
    api: pd.DataFrame, start: int, end: int, pid: int
) -> tuple[list[dict[str, Any]], float]:
    """CUDA API calls of the process during [start, end): top names by time, and the share of
    the window they cover."""
    if not len(api):
        return [], 0.0
    window = api[(api["start_ns"] < end) & (api["end_ns"] > start) & (api["process_id"] == pid)]
    if not len(window):
        return [], 0.0
    lo = np.maximum(window["start_ns"].to_numpy(), start)
    hi = np.minimum(window["end_ns"].to_numpy(), end)
    by_name = (
        pd.Series(hi - lo, index=window["name"].to_numpy())
        .groupby(level=0)
        .sum()
        .sort_values(ascending=False)
    )
    top = [{"name": str(n), "time_ns": float(t)} for n, t in by_name.head(3).items()]
    return top, union_ns(lo, hi) / (end - start)


def _describe_host(largest: list[dict[str, Any]]) -> str:
    first = largest[0]
    if first["host_api"]:
        calls = ", ".join(f"{c['name']} ({c['time_ns'] / 1e6:.2f} ms)" for c in first["host_api"])
        return (
            f"During the largest gap the host was in {calls}: "
            f"{first['host_api_coverage'] * 100:.0f}% of it inside CUDA calls."
        )
    return (
        "During the largest gap the host made no CUDA call: it was busy elsewhere "
        "(CPU work, I/O, Python)."
    )


GPU_IDLE_GAPS = ProgramAnalysis(
    name="gpu_idle_gaps",
    function=gpu_idle_gaps,
    needs="timeline",
    tables=("kernels",),
    values={
        **RANGE_VALUES,
        "idle_ms": "Idle GPU time in the range's gaps of at least min_gap_ns, ms.",
        "gaps": "How many such gaps the range has a part of.",
        "min_gap_us": "The rule's min_gap_ns, us.",
        "largest_gap_ms": "The largest gap, ms.",
        "host_activity": "Text: a sentence on what the host did during the largest gap (its "
        "CUDA calls and the share of the gap inside them, or that it made none).",
    },
    params={
        "min_gap_ns": Param(100_000, "The shortest idle gap counted, ns."),
        "min_impact": Param(0.05, MIN_IMPACT),
    },
)
