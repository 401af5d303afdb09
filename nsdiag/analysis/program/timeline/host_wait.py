"""Why the GPU waits, as four findings with a fix each: launch-bound (replay as a CUDA graph),
CPU-bound (move host work off the critical path), sync-bound (drop the synchronisation) and what
fits neither (allocation, module loading, an unknown host). They report disjoint parts of the
account in waits.py, so their savings add up to at most the idle time; each reports per device,
under the NVTX range that ends most of its idle time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.analyses import CPU_BOUND, IDLE_OTHER, LAUNCH_BOUND, SYNC_BOUND
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.record import ProgramAnalysis
from nsdiag.analysis.program.timeline.findings import (
    Draft,
    make_finding,
    share,
    worth_reporting,
)
from nsdiag.analysis.program.timeline.nvtx import host_ranges
from nsdiag.analysis.program.timeline.optimizer import claimed_gaps
from nsdiag.analysis.program.timeline.waits import ALLOC_PATTERN, WaitAccount, stretch_text
from nsdiag.analysis.program.user_range import activity_ranges
from nsdiag.analysis.records.findings import Evidence, Finding
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model import quantities
from nsdiag.model.ranks import rank_of
from nsdiag.model.tables import records

_ALLOC_WORDS = "allocating memory, loading modules or initialising CUDA"
# What the rank-imbalance finding claims of the late rank (rank_findings.py: claims_before).
_LATE_RANK_CLAIMED = ("cpu_bound", "gpu_idle_gaps")
# NSD407's advice: the input pipeline's remedies, or, where the PyTorch function ranges put the
# host's time inside the step's own PyTorch functions, how to batch or compile the work there.
INPUT_ADVICE = (
    "DataLoader(num_workers=N, pin_memory=True, persistent_workers=True, prefetch_factor=2) so "
    "batches are decoded and collated in worker processes ahead of the step; copy them with "
    "non_blocking=True from pinned memory; move preprocessing (normalisation, augmentation) to "
    "the GPU; keep per-step Python (logging, metrics, checkpoint bookkeeping) out of the loop "
    "or in a background thread."
)
STEP_ADVICE = (
    "the host spends it in {where}, not preparing input (no copy to the GPU follows it): "
    "batch the per-tensor Python there (foreach=True or fused=True for the optimizer, "
    "foreach=True for clip_grad_norm_), fewer and larger operations, or compile the step "
    "(torch.compile); keep per-step logging and metrics out of the loop."
)
UNKNOWN_HOST_ADVICE = (
    "the host is not preparing input there (no copy to the GPU follows it): find the Python "
    "that runs between the CUDA calls (nsdiag profile records which PyTorch function it is in; "
    "a Python profiler such as py-spy shows the rest), then batch it, move it out of the loop "
    "or into a background thread."
)
# The step's own PyTorch functions hold the host's time when they hold at least this share of
# the CPU idle time; a host stretch ends in input preparation when this share of it ends in a
# host-to-device copy (the input note's threshold).
STEP_SHARE = 0.5
INPUT_SHARE = 0.25
OWN_PYTHON = "the program's own Python between PyTorch calls"
# The outermost PyTorch range of a model's forward (nsys --pytorch=functions-trace)
MODULE_CALL = "torch.nn.modules.Module.__call__"
# What NSD413 claims of the idle time (optimizer.py: claims_before).
_OPTIMIZER_CLAIMED = ("launch_bound", "cpu_bound")


def _per_device(
    analysis: ProgramAnalysis,
    rule: RuleSpec,
    ctx: ProgramContext,
    column: str,
    draft: Callable[[int, str, pd.DataFrame, float], Draft | None],
    keep: npt.NDArray[np.bool_] | None = None,
) -> list[Finding]:
    """Findings per device whose `column` of the wait account reaches min_impact, one per NVTX
    range its idle time lies in (the range of the work that ended each gap): a range's evidence
    is its own gaps' (a program whose syncs are all in one phase gets the finding there, not in
    the phase with most idle time). A range too small to report alone is left out (its twin in
    another range may be the one to fix), unless no range is large enough alone: then the
    device's idle time is one finding, under its largest range. Where the lanes are ranks, the
    lane that would save most: the ranks step in lockstep, so a change made on every rank saves
    about the largest lane's part, not the sum; and the late rank's CPU-bound and other idle
    time is the rank-imbalance finding's (NSD420 names its cause), not counted again here. The
    idle time a per-parameter optimizer step holds is NSD413's (optimizer.py), not
    launch-bound's or CPU-bound's."""
    params = analysis.params_of(rule)
    gaps = ctx.waits.gaps
    if analysis.name in _OPTIMIZER_CLAIMED:
        gaps = gaps[~claimed_gaps(ctx) & (keep if keep is not None else True)]
    ranks = ctx.ranks
    candidates = []
    for key, group in gaps.groupby("device", sort=True):
        device = int(cast(int, key))
        if (
            ranks is not None
            and analysis.name in _LATE_RANK_CLAIMED
            and ctx.view.rank_of(device) == ranks.late_rank
        ):
            continue
        saved = _saving(analysis, params, group, float(group[column].sum()))
        if worth_reporting(ctx, saved, params["min_impact"]):
            candidates.append((saved, device, group))
    if ctx.view.lane_devices:
        candidates = sorted(candidates, key=lambda c: -c[0])[:1]
    findings = []
    for _, device, group in candidates:
        for name, part in _by_range(analysis, params, ctx, group, column):
            found = draft(device, name, part, _saving(analysis, params, part, part[column].sum()))
            if found is not None:
                findings.append(make_finding(analysis, rule, ctx, found))
    return findings


def _by_range(
    analysis: ProgramAnalysis,
    params: Mapping[str, float],
    ctx: ProgramContext,
    group: pd.DataFrame,
    column: str,
) -> list[tuple[str, pd.DataFrame]]:
    """A device's gaps per NVTX range whose saving reaches min_impact, most first; where none
    does (the device's total did), all of them under the name of the largest."""
    ranges = group["next_range"].fillna("").astype(str)
    parts = sorted(
        ((str(name), part) for name, part in group.groupby(ranges, sort=False)),
        key=lambda p: -float(p[1][column].sum()),
    )
    alone = [
        (name, part)
        for name, part in parts
        if worth_reporting(
            ctx, _saving(analysis, params, part, part[column].sum()), params["min_impact"]
        )
    ]
    rest = [(name, part) for name, part in parts if name not in {n for n, _ in alone}]
    if not alone and rest:  # spread thin: the device's total under its largest range
        alone.append((rest[0][0], pd.concat([part for _, part in rest])))
    return alone


def _saving(
    analysis: ProgramAnalysis, params: Mapping[str, float], group: pd.DataFrame, idle: float
) -> float:
    """A graph still leaves a short gap between its kernels: not saved."""
    if analysis.name != "launch_bound":
        return idle
    touched = float((group["launch"] > 0).sum())
    return max(idle - touched * params["graph_node_gap_ns"], 0.0)


def _per_iteration(ctx: ProgramContext) -> tuple[float, str]:
    n = ctx.iterations
    return (float(n), " per iteration") if n else (1.0, "")


def _device_gaps(account: WaitAccount, device: int) -> pd.DataFrame:
    return account.gaps[account.gaps["device"] == device]


def _busy_share(account: WaitAccount, group: pd.DataFrame) -> float:
    """The share of the iterations' wall time the device of `group` (its gaps) is busy."""
    it = account.iterations
    wall = float(it["wall_ns"].sum()) if len(it) else 0.0
    return max(1.0 - float(group["idle_ns"].sum()) / wall, 0.0) if wall else 0.0


# --- launch-bound ---------------------------------------------------------------------------


def launch_bound(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = LAUNCH_BOUND.params_of(rule)
    account = ctx.waits
    n, per = _per_iteration(ctx)
    acts = ctx.view.acts
    kernels = acts.loc[acts["stage"] == "kernel", ["device", "start_ns", "end_ns"]]
    forwards = _forwards_per_iteration(ctx)
    loop = forwards >= params["min_forwards"]
    outer, _ = ctx.gap_sites
    in_forward = np.asarray(outer == MODULE_CALL, dtype=bool)
    outside_ns = float(account.gaps.loc[~in_forward, "launch"].sum()) if loop else 0.0

    def draft(device: int, name: str, group: pd.DataFrame, saved: float) -> Draft:
        mine = kernels[kernels["device"] == device]
        kernels_run = len(mine)
        graphs = account.graph_launches
        # what the host launched: a replayed graph's kernels are one launch (the graph's)
        launches = account.kernel_launches + graphs if graphs else kernels_run
        gpu = float((mine["end_ns"] - mine["start_ns"]).sum())
        idle = float(group["launch"].sum())
        host_per_launch = (gpu + idle) / launches if launches else 0.0
        values = {
            "idle_ms": idle / n / 1e6,
            "per": per,
            "launches": round(launches / n),
            "kernel_us": gpu / kernels_run / 1e3 if kernels_run else 0.0,
            "host_per_launch_us": host_per_launch / 1e3,
            "busy_pct": _busy_share(account, _device_gaps(account, device)) * 100,
            "saved_per_ms": saved / n / 1e6,
            "loop_note": (
                f" The iteration runs the model's forward {forwards:.0f} times (a decode loop): "
                f"the saving counts the idle time inside the forwards; the host's own work "
                f"between them, {quantities.duration(outside_ns / n)}{per} "
                f"({quantities.duration(outside_ns / n / max(forwards, 1.0))} a forward: sampling, "
                "stopping criteria, cache bookkeeping), stays: a graph of the forward does not "
                "remove it."
                if loop
                else ""
            ),
            "graph_note": (
                f" The program already replays CUDA graphs ({graphs} graph launches beside "
                f"{account.kernel_launches} kernel launches): capture the rest of the step too, "
                "or fewer, larger graphs."
                if graphs
                else ""
            ),
        }
        evidence = (
            Evidence("launch_idle_ns", idle),
            Evidence("kernel_launches", float(launches)),
            Evidence("mean_kernel_ns", gpu / launches if launches else None),
            Evidence("host_ns_per_launch", host_per_launch),
            share(ctx, saved, params["min_impact"]),
        )
        details = {
            "launch_idle_ns": idle,
            "launches": launches,
            "gpu_busy_ns": gpu,
            "graph_launches": graphs,
            "kernel_launch_calls": account.kernel_launches,
            "account": _account_json(account, _device_gaps(account, device)),
        }
        return Draft(
            device, name, saved, values, evidence, details,
            idiom="graph-the-forward" if loop else ("graph-the-rest" if graphs else ""),
        )  # fmt: skip

    return _per_device(LAUNCH_BOUND, rule, ctx, "launch", draft, in_forward if loop else None)


def _forwards_per_iteration(ctx: ProgramContext) -> float:
    """Calls of a model's forward (the outermost `Module.__call__`) per iteration: many in one
    iteration is a loop over the model (a decode loop, one forward per token)."""
    if not ctx.functions.recorded or not ctx.iterations:
        return 0.0
    return ctx.functions.calls(MODULE_CALL) / ctx.iterations


# --- CPU-bound ------------------------------------------------------------------------------


def cpu_bound(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = CPU_BOUND.params_of(rule)
    account = ctx.waits
    n, per = _per_iteration(ctx)

    def draft(device: int, name: str, group: pd.DataFrame, saved: float) -> Draft:
        idle = float(group["cpu"].sum())
        stretches = account.cpu_stretches
        top = stretches.head(2)
        middle = ((top["start_ns"] + top["end_ns"]) // 2).to_numpy("int64")
        ranges = host_ranges(
            ctx.session.nvtx_ranges,
            top["process_id"].to_numpy("int64"),
            top["thread_id"].to_numpy("int64"),
            middle,
        )
        words = stretch_text(stretches, list(ranges))
        copy_share = (
            float(stretches.loc[stretches["after_copy"], "idle_ns"].sum())
            / float(stretches["idle_ns"].sum())
            if len(stretches) and stretches["idle_ns"].sum() > 0
            else 0.0
        )
        values = {
            "idle_ms": idle / n / 1e6,
            "per": per,
            "busy_pct": _busy_share(account, _device_gaps(account, device)) * 100,
            "stretches": "; ".join(words) if words else "no stretch recorded",
            "input_note": (
                f" {copy_share * 100:.0f}% of that time ends in a host-to-device copy: the host "
                "is preparing the next input."
                if copy_share >= INPUT_SHARE
                else ""
            ),
            "saved_per_ms": saved / n / 1e6,
            "advice": _cpu_advice(ctx, group, copy_share),
        }
        evidence = (
            Evidence("cpu_idle_ns", idle),
            Evidence("min_cpu_stretch_ns", float(account.min_cpu_stretch_ns)),
            Evidence("idle_ending_in_h2d_copy", copy_share),
            share(ctx, saved, params["min_impact"]),
        )
        details = {
            "cpu_idle_ns": idle,
            "longest_stretches": records(stretches.head(3)),
            "account": _account_json(account, _device_gaps(account, device)),
        }
        return Draft(device, name, saved, values, evidence, details)

    return _per_device(CPU_BOUND, rule, ctx, "cpu", draft)


def _cpu_advice(ctx: ProgramContext, group: pd.DataFrame, copy_share: float) -> str:
    """The input pipeline's remedies where the host's stretches end in copies to the GPU (it
    prepares input); else where the host spends the time (the step's own PyTorch functions, or
    the program's Python between them, where the PyTorch function ranges say) and what to do."""
    if not len(group) or copy_share >= INPUT_SHARE:
        return INPUT_ADVICE
    if not ctx.functions.recorded:
        return UNKNOWN_HOST_ADVICE
    outer, _ = ctx.gap_sites
    sites = pd.Series(outer, index=ctx.waits.gaps.index).loc[group.index]
    cpu = group["cpu"].groupby(sites.to_numpy()).sum()
    own = cpu[[bool(f) and not str(f).startswith("torch.utils.data") for f in cpu.index]]
    if float(own.sum()) >= STEP_SHARE * float(cpu.sum()) > 0:
        where = " and ".join(str(f) for f in own.sort_values(ascending=False).index[:2])
    else:
        where = OWN_PYTHON
    return STEP_ADVICE.format(where=where)


# --- sync-bound -----------------------------------------------------------------------------


def sync_bound(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = SYNC_BOUND.params_of(rule)
    account = ctx.waits
    n, per = _per_iteration(ctx)
    api = ctx.session.api_calls
    calls = api[api["is_sync"].astype(bool)] if len(api) and "is_sync" in api else api.iloc[:0]

    # each sync under the program's NVTX range around it (library ranges looked through)
    where = activity_ranges(calls, ctx.session.nvtx_ranges) if len(calls) else np.array([])
    one_range = account.gaps["next_range"].fillna("").astype(str).nunique() <= 1

    def draft(device: int, name: str, group: pd.DataFrame, saved: float) -> Draft:
        it = account.iterations
        inside = np.ones(len(calls), dtype=bool) if one_range else where == name
        mine = calls[inside]
        if ctx.view.lane_devices and "rank" in calls:  # a rank's own syncs
            mine = mine[rank_of(mine) == device]
        names = ", ".join(f"{c} x{k}" for c, k in mine["name"].value_counts().head(3).items())
        opened = (
            float(it["opened_idle_ns"].sum())
            if one_range
            else float(group.loc[group["opened"].astype(bool), "idle_ns"].sum())
        )
        slack = float(it["slack_ns"].sum())
        values = {
            "sync_calls": round(len(mine) / n),
            "per": per,
            "sync_names": names or "none recorded",
            "opened_ms": opened / n / 1e6,
            "slack_ms": slack / n / 1e6,
            "saved_per_ms": saved / n / 1e6,
        }
        evidence = (
            Evidence("sync_calls", float(len(mine))),
            Evidence("idle_after_syncs_ns", opened),
            Evidence("host_slack_ns", slack),
            share(ctx, saved, params["min_impact"]),
        )
        details = {
            "sync_calls": len(mine),
            "idle_after_syncs_ns": opened,
            "host_slack_ns": slack,
            "host_blocked_ns": float(it["blocked_ns"].sum()),
            "account": _account_json(account, _device_gaps(account, device)),
        }
        return Draft(device, name, saved, values, evidence, details)

    return _per_device(SYNC_BOUND, rule, ctx, "sync_ns", draft)


# --- what fits neither ----------------------------------------------------------------------


def idle_other(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = IDLE_OTHER.params_of(rule)
    account = ctx.waits
    n, per = _per_iteration(ctx)
    api = ctx.session.api_calls

    def draft(device: int, name: str, group: pd.DataFrame, saved: float) -> Draft:
        parts = {c: float(group[c].sum()) for c in ("alloc", "wait", "unknown")}
        words = []
        if parts["alloc"]:
            words.append(f"{_ALLOC_WORDS} {parts['alloc'] / n / 1e6:.2f} ms")
        if parts["wait"]:
            words.append(f"blocked in a synchronisation {parts['wait'] / n / 1e6:.2f} ms")
        if parts["unknown"]:
            words.append(f"unknown (no CUDA API record) {parts['unknown'] / n / 1e6:.2f} ms")
        values = {
            "idle_ms": saved / n / 1e6,
            "per": per,
            "host_activity": ", ".join(words),
            "top_calls": _alloc_calls(api),
            "saved_per_ms": saved / n / 1e6,
        }
        evidence = (
            Evidence("alloc_idle_ns", parts["alloc"]),
            Evidence("wait_idle_ns", parts["wait"]),
            Evidence("unknown_idle_ns", parts["unknown"]),
            share(ctx, saved, params["min_impact"]),
        )
        details = {**{f"{k}_idle_ns": v for k, v in parts.items()},
                   "account": _account_json(account, _device_gaps(account, device))}  # fmt: skip
        return Draft(device, name, saved, values, evidence, details)

    return _per_device(IDLE_OTHER, rule, ctx, "other", draft)


def _alloc_calls(api: pd.DataFrame) -> str:
    if not len(api):
        return "no CUDA API record"
    names = api["name"].astype(str)
    mine = names[names.str.contains(ALLOC_PATTERN, regex=True)]
    top = mine.value_counts().head(3)
    return ", ".join(f"{c} x{k}" for c, k in top.items()) or "none"


def _account_json(account: WaitAccount, group: pd.DataFrame) -> dict[str, float]:
    """The device's idle time by what the host did (after the syncs' claim), for the report."""
    cols = ["sync_ns", "launch", "cpu", "alloc", "wait", "unknown"]
    return {("sync" if c == "sync_ns" else c) + "_ns": float(group[c].sum()) for c in cols}
