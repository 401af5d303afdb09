"""sync-heavy: blocking synchronisations after little GPU work, each draining the GPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nsdiag.analysis.diagnosis import Evidence, Finding
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.record import MIN_IMPACT, Param, ProgramAnalysis
from nsdiag.analysis.program.timeline.findings import RANGE_VALUES, Draft, per_range, share

if TYPE_CHECKING:  # the rule loader imports the analyses' records
    from nsdiag.analysis.rules.spec import RuleSpec


def sync_heavy(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    v = ctx.view
    if not len(v.syncs):
        return []
    params = SYNC_HEAVY.params_of(rule)
    api = ctx.session.api_calls
    calls = api[api["is_sync"].astype(bool)]
    named = (
        calls["nvtx_range"]
        if "nvtx_range" in calls
        else pd.Series(np.nan, index=calls.index, dtype=object)
    )
    call_range = named.astype("object").where(named.notna(), "")

    def draft(device: int, name: str, group: pd.DataFrame, saved: float) -> Draft | None:
        mine = calls[call_range == name]
        count, work = len(mine), float(group["work_ns"].median())
        if count < params["min_syncs"] or work > params["max_work_ns"]:
            return None
        return _draft(params, ctx, (device, name), mine, group)

    return per_range(
        SYNC_HEAVY, rule, ctx, v.syncs, lambda group: float(group["claim_ns"].sum()), draft
    )


def _draft(
    params: Mapping[str, float],
    ctx: ProgramContext,
    where: tuple[int, str],
    mine: pd.DataFrame,
    group: pd.DataFrame,
) -> Draft:
    """`mine`: the range's sync calls; `group`: those that drained the GPU."""
    device, name = where
    count, work = len(mine), float(group["work_ns"].median())
    saved, blocked = float(group["claim_ns"].sum()), float(mine["duration_ns"].sum())
    idle = float(ctx.view.gaps.loc[group["gap"].unique(), "length"].sum())
    names = ", ".join(f"{n} x{c}" for n, c in mine["name"].value_counts().head(3).items())
    values = {
        "sync_calls": count,
        "sync_names": names,
        "median_work_us": work / 1e3,
        "host_blocked_ms": blocked / 1e6,
        "gpu_idle_ms": idle / 1e6,
    }
    evidence = (
        Evidence("sync_calls", float(count), ">=", params["min_syncs"]),
        Evidence("median_gpu_work_between_syncs_ns", work, "<=", params["max_work_ns"]),
        Evidence("host_blocked_ns", blocked),
        Evidence("gpu_idle_after_syncs_ns", idle),
        share(ctx, saved, params["min_impact"]),
    )
    details = {
        "sync_calls": count,
        "draining_syncs": len(group),
        "host_blocked_ns": blocked,
        "gpu_idle_after_syncs_ns": idle,
        "median_work_ns": work,
    }
    return Draft(device, name, saved, values, evidence, details)


SYNC_HEAVY = ProgramAnalysis(
    name="sync_heavy",
    function=sync_heavy,
    needs="timeline",
    tables=("kernels", "api_calls"),
    values={
        **RANGE_VALUES,
        "sync_calls": "Blocking synchronisation calls in the range.",
        "sync_names": "Text: the three most frequent calls with their counts "
        "('cudaStreamSynchronize x40, cudaMemcpy x20').",
        "median_work_us": "GPU work between a draining sync and the previous one, median, us.",
        "host_blocked_ms": "Time the host was blocked in the calls, ms.",
        "gpu_idle_ms": "Idle GPU time in the gaps the syncs returned in, ms.",
    },
    params={
        "min_syncs": Param(20, "The fewest blocking synchronisation calls in a range reported."),
        "max_work_ns": Param(
            100_000, "The most GPU work between two draining syncs (median) reported, ns."
        ),
        "min_impact": Param(0.01, MIN_IMPACT),
    },
    # The idle gap a sync returns in is its own: gpu_idle_gaps counts the gap less the sync's
    # claim (view.py: sync_claim_ns), and launch_overhead never links kernels across it.
    claims_before=("gpu_idle_gaps", "launch_overhead"),
)
