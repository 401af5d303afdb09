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

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.user_range import program_ranges
from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.analysis.region.sequence import synced_before
from nsdiag.analysis.region.windows import launch_times
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.session import Session
from nsdiag.model.signature import signature_codes, signature_key, signature_keys
from nsdiag.model.text_codes import factorize_all
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
    "kernel_id",  # the profiled signature's KernelDiagnosis.id, NaN for a launch of none
    "timeline_row",  # the launch's row of the region's timeline (position; -1: no timeline)
)


def _profiled(kernels: Sequence[KernelDiagnosis]) -> dict[str, KernelDiagnosis]:
    """The profiled signatures by key text (model/signature.py), under both their names."""
    out: dict[str, KernelDiagnosis] = {}
    for k in kernels:
        out.setdefault(signature_key(k.name, k.grid, k.block).text, k)
        out.setdefault(signature_key(k.demangled, k.grid, k.block).text, k)
    return out


def _metric(k: KernelDiagnosis | None, name: str) -> float:
    value = number(k.metrics.get(name)) if k is not None else None
    return np.nan if value is None else value


def _from_signature(
    frame: pd.DataFrame, profiled: Mapping[str, KernelDiagnosis]
) -> dict[str, npt.NDArray[Any]]:
    """Columns from each launch's profiled signature, bytes scaled by the launch's duration
    (over the profiled mean: the bytes are the profiled launches'). Keyed once per launch, looked
    up once per signature."""
    where, texts = signature_codes(frame)
    found = [profiled.get(key) for key in texts]

    def metric(name: str) -> np.ndarray:
        return np.asarray(np.array([_metric(k, name) for k in found], dtype="float64")[where])

    mean = metric("profiled_mean_ns")
    scale = np.where(mean > 0, frame["duration_ns"].to_numpy("float64") / mean, np.nan)
    bounds = [k.bound if k is not None else "" for k in found]
    return {
        "read_bytes": metric("dram_read_bytes") * scale,
        "write_bytes": metric("dram_write_bytes") * scale,
        "best_bytes_per_s": metric("dram_bytes_per_second"),
        "bound": np.array(bounds, dtype=object)[where],
        "dram_pct": metric("dram_throughput_pct"),
        "tensor_pct": metric("pipe_tensor_pct"),
        "kernel_id": _ids(found)[where],
    }


def _ids(found: Sequence[KernelDiagnosis | None]) -> npt.NDArray[np.float64]:
    return np.array([k.id if k is not None else np.nan for k in found], dtype="float64")


def _kinds(names: pd.Series) -> npt.NDArray[np.object_]:
    """Each launch's kernel_facts kind, parsed once per distinct name (an array of strings: a
    list of a million would be made and checked again by pandas)."""
    codes, distinct = factorize_all(names)  # a missing name parsed as pandas has it
    kinds = np.array([parse_kernel_name(n).kind or "" for n in distinct], dtype=object)
    return np.asarray(kinds[codes])


def from_timeline(session: Session, kernels: Sequence[KernelDiagnosis]) -> pd.DataFrame:
    """The region's kernel launches (`session` is the region's part of the session)."""
    timeline = session.timeline
    # only the columns read here: a million-row timeline has two dozen
    read = ("start_ns", "api_start_ns", "name", "grid", "block", "process_id", "stream")
    wanted = [c for c in (*read, "nvtx_range", "duration_ns") if c in timeline]
    rows = np.flatnonzero((timeline["kind"] == "kernel").to_numpy() if len(timeline) else [])
    if not len(rows):
        return pd.DataFrame(columns=list(COLUMNS))
    launch = launch_times(timeline)[rows]
    order = np.argsort(launch, kind="stable")
    k = timeline[wanted].iloc[rows[order]].reset_index(drop=True)  # one copy, in launch order
    launch = launch[order]
    rng = k["nvtx_range"] if "nvtx_range" in k else pd.Series("", index=k.index)
    frame = pd.DataFrame(
        {
            "name": k["name"].astype(str),
            "grid": k["grid"].astype(str),
            "block": k["block"].astype(str),
            "process_id": k.get("process_id", 0),
            "stream": k["stream"],
            "range": program_ranges(rng.to_numpy(dtype=object)),
            "launch_ns": launch,
            "duration_ns": pd.to_numeric(k["duration_ns"], errors="coerce").fillna(0.0),
            "synced_before": synced_before(launch, session.api_calls),
            "timeline_row": rows[order],
        },
        copy=False,  # `k` is this function's own
    )
    # the rest of the columns beside these, in COLUMNS order, by one constructor (an insert and
    # a concat of 10^5 rows cost more than their arithmetic)
    columns: dict[str, Any] = {
        **{c: frame[c] for c in frame.columns},
        "kind": _kinds(frame["name"]),
        **_from_signature(frame, _profiled(kernels)),
    }
    return pd.DataFrame({c: columns[c] for c in COLUMNS}, copy=False)  # fresh arrays


def from_profiled(derived: pd.DataFrame, kernels: Sequence[KernelDiagnosis]) -> pd.DataFrame:
    """Without a timeline: the profiled launches in the order ncu saw them."""
    d = derived
    if not len(d):
        return pd.DataFrame(columns=list(COLUMNS))
    d = d.sort_values("id").reset_index(drop=True)
    verdicts = {signature_key(k.name, k.grid, k.block).text: k.bound for k in kernels}

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
            "range": program_ranges(rng.to_numpy(dtype=object)),
            "launch_ns": np.arange(len(d)),
            "duration_ns": col("duration_ns").fillna(0.0),
            # no timeline, no synchronisations: NVTX range changes are the boundaries known
            "synced_before": (rng.astype(str) != rng.astype(str).shift()).to_numpy(),
            "kind": _kinds(d["name"].astype(str)),
            "read_bytes": col("dram_read_bytes"),
            "write_bytes": col("dram_write_bytes"),
            "best_bytes_per_s": col("dram_bytes_per_second"),
            "bound": [verdicts.get(key, "") for key in signature_keys(d)],
            "dram_pct": col("dram_throughput_pct"),
            "tensor_pct": col("pipe_tensor_pct"),
        }
    )
    where, texts = signature_codes(frame)
    profiled = _profiled(kernels)
    frame["kernel_id"] = _ids([profiled.get(key) for key in texts])[where]
    frame["timeline_row"] = -1
    return frame[list(COLUMNS)]


def launches(
    session: Session, derived: pd.DataFrame, kernels: Sequence[KernelDiagnosis]
) -> pd.DataFrame:
    """The region's launches (from the timeline where there is one), columns COLUMNS:
    `session` is the region's part of the session, `derived` its profiled launches with the
    derived metrics, `kernels` its profiled signatures."""
    if session.has_timeline():
        return from_timeline(session, kernels)
    return from_profiled(derived, kernels)
