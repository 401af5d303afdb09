"""The kernel launches of the analysed region, in launch order, each with what is known of it:
what its name says (model/kernel_facts.py) and, where ncu profiled its signature, its bytes,
bandwidth, verdict and tensor-pipe use.

With a timeline the launches are the region's (every launch, as it ran); without one they are
the profiled launches themselves. A launch's DRAM bytes come from its signature's typical launch,
scaled by its own duration (launches of one signature that did different amounts of work move
bytes in proportion to their time: these are memory-shaped kernels). The analyses that read
this (fusion, layout conversions) mark an estimate `names` when a launch has no ncu data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.analysis.diagnosis import KernelDiagnosis
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.region.choose import launch_times, synced_before
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.matching import signature_key
from nsdiag.model.values import number

COLUMNS = (
    "name",
    "grid",
    "block",
    "process_id",
    "stream",
    "range",
    "launch_ns",
    "duration_ns",
    "synced_before",  # a blocking synchronisation returned since the previous launch
    "kind",  # kernel_facts kind: elementwise, layout-conversion, gemm ...
    "read_bytes",  # DRAM, NaN without ncu data
    "write_bytes",
    "best_bytes_per_s",
    "bound",  # the signature's verdict, "" without ncu data
    "dram_pct",
    "tensor_pct",
)


def _profiled(kernels: tuple[KernelDiagnosis, ...] | Any) -> dict[tuple[str, ...], KernelDiagnosis]:
    out: dict[tuple[str, ...], KernelDiagnosis] = {}
    for k in kernels:
        out.setdefault(signature_key(k.name, k.grid, k.block), k)
        out.setdefault(signature_key(k.demangled, k.grid, k.block), k)
    return out


def _metric(k: KernelDiagnosis | None, name: str) -> float:
    value = number(k.metrics.get(name)) if k is not None else None
    return np.nan if value is None else value


def _from_signature(
    frame: pd.DataFrame, profiled: Mapping[tuple[str, ...], KernelDiagnosis]
) -> pd.DataFrame:
    """Columns from each launch's profiled signature, bytes scaled by the launch's duration."""
    found = [
        profiled.get(signature_key(n, g, b))
        for n, g, b in zip(frame["name"], frame["grid"], frame["block"], strict=True)
    ]
    mean = np.array([_metric(k, "mean_duration_ns") for k in found])
    scale = np.where(mean > 0, frame["duration_ns"].to_numpy("float64") / mean, np.nan)
    return pd.DataFrame(
        {
            "read_bytes": np.array([_metric(k, "dram_read_bytes") for k in found]) * scale,
            "write_bytes": np.array([_metric(k, "dram_write_bytes") for k in found]) * scale,
            "best_bytes_per_s": [_metric(k, "dram_bytes_per_second") for k in found],
            "bound": [k.bound if k is not None else "" for k in found],
            "dram_pct": [_metric(k, "dram_throughput_pct") for k in found],
            "tensor_pct": [_metric(k, "pipe_tensor_pct") for k in found],
        },
        index=frame.index,
    )


def _kinds(names: pd.Series) -> list[str]:
    kinds = {n: parse_kernel_name(n).kind or "" for n in names.unique()}
    return [kinds[n] for n in names]


def from_timeline(ctx: ProgramContext) -> pd.DataFrame:
    """The region's kernel launches (ctx.session is the region's part of the session)."""
    timeline = ctx.session.timeline
    kernels = timeline[timeline["kind"] == "kernel"] if len(timeline) else timeline
    if not len(kernels):
        return pd.DataFrame(columns=list(COLUMNS))
    launch = launch_times(kernels)
    order = np.argsort(launch, kind="stable")
    k = kernels.iloc[order].reset_index(drop=True)
    launch = launch[order]
    rng = k["nvtx_range"] if "nvtx_range" in k else pd.Series("", index=k.index)
    frame = pd.DataFrame(
        {
            "name": k["name"].astype(str),
            "grid": k["grid"].astype(str),
            "block": k["block"].astype(str),
            "process_id": k.get("process_id", 0),
            "stream": k["stream"],
            "range": rng.astype("object").where(rng.notna(), "").astype(str),
            "launch_ns": launch,
            "duration_ns": pd.to_numeric(k["duration_ns"], errors="coerce").fillna(0.0),
            "synced_before": synced_before(launch, ctx.session.api_calls),
        }
    )
    frame["kind"] = _kinds(frame["name"])
    frame = pd.concat([frame, _from_signature(frame, _profiled(ctx.kernels))], axis=1)
    return frame[list(COLUMNS)]


def from_profiled(ctx: ProgramContext) -> pd.DataFrame:
    """Without a timeline: the profiled launches in the order ncu saw them."""
    d = ctx.derived
    if not len(d):
        return pd.DataFrame(columns=list(COLUMNS))
    d = d.sort_values("id").reset_index(drop=True)
    verdicts = {signature_key(k.name, k.grid, k.block): k.bound for k in ctx.kernels}

    def col(name: str) -> pd.Series:
        if name in d:
            return pd.to_numeric(d[name], errors="coerce")
        return pd.Series(np.nan, index=d.index)

    rng = d["nvtx_range"] if "nvtx_range" in d else pd.Series("", index=d.index)
    frame = pd.DataFrame(
        {
            "name": d["name"].astype(str),
            "grid": d["grid"].astype(str) if "grid" in d else "",
            "block": d["block"].astype(str) if "block" in d else "",
            "process_id": d.get("process_id", 0),
            "stream": d.get("stream", 0),
            "range": rng.astype("object").where(rng.notna(), "").astype(str),
            "launch_ns": np.arange(len(d)),
            "duration_ns": col("duration_ns").fillna(0.0),
            # no timeline, no synchronisations: NVTX range changes are the boundaries known
            "synced_before": (rng.astype(str) != rng.astype(str).shift()).to_numpy(),
            "kind": _kinds(d["name"].astype(str)),
            "read_bytes": col("dram_read_bytes"),
            "write_bytes": col("dram_write_bytes"),
            "best_bytes_per_s": col("dram_bytes_per_second"),
            "bound": [
                verdicts.get(signature_key(n, g, b), "")
                for n, g, b in zip(d["name"], d["grid"], d["block"], strict=True)
            ],
            "dram_pct": col("dram_throughput_pct"),
            "tensor_pct": col("pipe_tensor_pct"),
        }
    )
    return frame[list(COLUMNS)]


def launches(ctx: ProgramContext) -> pd.DataFrame:
    """The region's launches (from the timeline where there is one), columns COLUMNS."""
    return from_timeline(ctx) if ctx.session.has_timeline() else from_profiled(ctx)
