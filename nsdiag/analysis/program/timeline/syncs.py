"""sync-heavy: blocking synchronisations after little GPU work, each draining the GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsdiag.analysis.diagnosis import Evidence, Finding
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.timeline.findings import Draft, param, per_range, share
from nsdiag.analysis.rules.spec import RuleSpec


def sync_heavy(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    v = ctx.view
    if not len(v.syncs):
        return []
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
        if count < param(rule, "min_syncs", 20) or work > param(rule, "max_work_ns", 100_000):
            return None
        return _draft(rule, ctx, (device, name), mine, group)

    return per_range(rule, ctx, v.syncs, lambda group: float(group["claim_ns"].sum()), draft, 0.01)


def _draft(
    rule: RuleSpec,
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
        Evidence("sync_calls", float(count), ">=", param(rule, "min_syncs", 20)),
        Evidence(
            "median_gpu_work_between_syncs_ns", work, "<=", param(rule, "max_work_ns", 100_000)
        ),
        Evidence("host_blocked_ns", blocked),
        Evidence("gpu_idle_after_syncs_ns", idle),
        share(rule, ctx, saved, 0.01),
    )
    details = {
        "sync_calls": count,
        "draining_syncs": len(group),
        "host_blocked_ns": blocked,
        "gpu_idle_after_syncs_ns": idle,
        "median_work_ns": work,
    }
    return Draft(device, name, saved, values, evidence, details)
