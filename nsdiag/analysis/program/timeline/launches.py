"""launch-overhead: runs of tiny kernels with idle gaps between them that a CUDA graph (or a
fused kernel) would close."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from nsdiag.analysis.diagnosis import Evidence, Finding
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.record import MIN_IMPACT, Param, ProgramAnalysis
from nsdiag.analysis.program.timeline.findings import RANGE_VALUES, Draft, per_range, share
from nsdiag.analysis.program.timeline.view import TimelineView

if TYPE_CHECKING:  # the rule loader imports the analyses' records
    from nsdiag.analysis.rules.spec import RuleSpec


def _links(v: TimelineView, params: Mapping[str, float]) -> pd.DataFrame:
    """Per busy segment: whether it is tiny (kernels only, short) and whether it links to the
    next one (both tiny, same NVTX range, a short gap with no sync return between them)."""
    seg = v.segments
    tiny = ((seg["end_ns"] - seg["start_ns"]) <= params["tiny_kernel_ns"]) & (
        seg["n_kernels"] == seg["n"]
    )
    link = np.zeros(len(seg), dtype=bool)  # link[i]: segment i continues into segment i + 1
    gap_len = np.zeros(len(seg))
    g = v.gaps
    ok = (g["length"] < params["max_gap_ns"]) & (g["sync_count"] == 0)
    i = g["seg"].to_numpy()
    after = np.minimum(i + 1, len(seg) - 1)
    same_range = seg["range"].to_numpy()[i] == seg["range"].to_numpy()[after]
    link[i] = ok.to_numpy() & tiny.to_numpy()[i] & tiny.to_numpy()[after] & same_range
    gap_len[i] = g["length"].to_numpy()
    return pd.DataFrame(
        {
            "run": np.cumsum(np.concatenate([[True], ~link[:-1]])) - 1,
            "device": seg["device"],
            "range": seg["range"],
            "tiny": tiny,
            "kernels": seg["n_kernels"],
            "busy": seg["end_ns"] - seg["start_ns"],
            "gap": np.where(link, gap_len, 0.0),
            "links": link.astype(int),
        }
    )


def launch_runs(v: TimelineView, params: Mapping[str, float]) -> pd.DataFrame:
    """Runs of tiny kernels separated by short idle gaps (no sync return inside) on one device,
    within one NVTX range. One row per run: kernels, busy and gap time, and the saving.
    `params`: LAUNCH_OVERHEAD's, complete (LAUNCH_OVERHEAD.params_of)."""
    runs = (
        _links(v, params)
        .groupby("run")
        .agg(
            device=("device", "first"),
            range=("range", "first"),
            tiny=("tiny", "all"),
            kernels=("kernels", "sum"),
            busy_ns=("busy", "sum"),
            gap_ns=("gap", "sum"),
            links=("links", "sum"),
        )
    )
    runs = runs[runs["tiny"] & (runs["kernels"] >= params["min_run_kernels"])]
    mean_gap = runs["gap_ns"] / runs["links"].clip(lower=1)
    mean_busy = runs["busy_ns"] / (runs["links"] + 1)
    runs = runs[mean_gap >= params["min_gap_to_duration"] * mean_busy].copy()
    runs["saved_ns"] = (runs["gap_ns"] - runs["links"] * params["graph_node_gap_ns"]).clip(lower=0)
    return runs


def launch_overhead(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    v = ctx.view
    params = LAUNCH_OVERHEAD.params_of(rule)
    runs = launch_runs(v, params)
    if runs.empty:
        return []
    kernels_only = v.acts[v.acts["stage"] == "kernel"]
    kernel_rows = {
        (int(cast(tuple[int, int], key)[0]), str(kernels_only["range"].iloc[rows[0]])): rows
        for key, rows in kernels_only.groupby(["device", "range_code"]).indices.items()
    }

    def draft(device: int, name: str, group: pd.DataFrame, saved: float) -> Draft:
        in_range = v.acts.iloc[kernel_rows.get((device, name), [])]
        return _draft(params, ctx, (device, name, saved), group, in_range)

    return per_range(
        LAUNCH_OVERHEAD, rule, ctx, runs, lambda group: float(group["saved_ns"].sum()), draft
    )


def _draft(
    params: Mapping[str, float],
    ctx: ProgramContext,
    where: tuple[int, str, float],
    group: pd.DataFrame,
    in_range: pd.DataFrame,
) -> Draft:
    """`where`: device, range and the saving; `group`: the range's runs; `in_range`: its
    kernels."""
    device, name, saved = where
    n, busy = int(group["kernels"].sum()), float(group["busy_ns"].sum())
    gaps = float(group["gap_ns"].sum())
    links = max(int(group["links"].sum()), 1)
    launch_call = (in_range["api_end_ns"] - in_range["api_start_ns"])[in_range["api_start_ns"] > 0]
    call = float(launch_call.median()) if len(launch_call) else None
    values = {
        "kernels": n,
        "runs": len(group),
        "busy_ms": busy / 1e6,
        "idle_ms": gaps / 1e6,
        "kernel_us": busy / n / 1e3,
        "gap_us": gaps / links / 1e3,
        "launch_call_us": call / 1e3 if call is not None else None,
        "launch_call": f"; each launch call takes {call / 1e3:.1f} us on the host" if call else "",
    }
    evidence = (
        Evidence("tiny_kernels", float(n), ">=", params["min_run_kernels"]),
        Evidence("mean_kernel_ns", busy / n, "<=", params["tiny_kernel_ns"]),
        Evidence("mean_gap_ns", gaps / links, "<", params["max_gap_ns"]),
        Evidence("launch_call_ns", call),
        share(ctx, saved, params["min_impact"]),
    )
    details = {
        "runs": len(group),
        "kernels": n,
        "busy_ns": busy,
        "gap_ns": gaps,
        "streams": sorted(map(int, in_range["stream"].unique())),
    }
    return Draft(device, name, saved, values, evidence, details)


LAUNCH_OVERHEAD = ProgramAnalysis(
    name="launch_overhead",
    function=launch_overhead,
    needs="timeline",
    tables=("kernels",),  # gaps between tiny kernels; launch calls only add detail
    values={
        **RANGE_VALUES,
        "kernels": "Tiny kernels in the range's runs.",
        "runs": "Runs of back-to-back tiny kernels.",
        "busy_ms": "GPU busy time of the runs, ms.",
        "idle_ms": "Idle GPU time between the runs' kernels, ms.",
        "kernel_us": "Mean busy time per kernel, us.",
        "gap_us": "Mean idle gap between two kernels of a run, us.",
        "launch_call_us": "Median host time of a launch call of the range's kernels, us (n/a "
        "when the timeline lacks it).",
        "launch_call": "Text: '; each launch call takes 4.1 us on the host' when the launch "
        "calls were traced, else empty.",
    },
    params={
        "tiny_kernel_ns": Param(10_000, "The longest busy stretch of kernels that is tiny, ns."),
        "max_gap_ns": Param(
            100_000,
            "The longest idle gap between two kernels of a run, ns (gpu_idle_gaps "
            "counts the longer ones: keep it at most that rule's min_gap_ns).",
        ),
        "min_run_kernels": Param(50, "The fewest tiny kernels a run counts."),
        "min_gap_to_duration": Param(
            0.5, "The smallest mean gap of a run, as a fraction of its mean kernel's busy time."
        ),
        "graph_node_gap_ns": Param(
            1000, "The gap a CUDA graph still leaves between two kernels, ns (not saved)."
        ),
        "min_impact": Param(0.01, MIN_IMPACT),
    },
)
