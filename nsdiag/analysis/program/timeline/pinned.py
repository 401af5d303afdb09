"""The pinned-copy model: how long each host-device copy would take from pinned memory."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from nsdiag.analysis.program.timeline.view import TimelineView
from nsdiag.model.intervals import union_ns


def pinned_model(v: TimelineView, params: Mapping[str, float]) -> pd.DataFrame:
    """Host-device copies with the time each would take from pinned memory.

    The pinned bandwidth is measured on this timeline's pinned copies of at least
    min_copy_bytes in the same direction on the same device (else the other direction); with
    none, pageable copies are assumed assumed_pinned_speedup times slower than pinned ones.
    Copies under min_copy_bytes are latency-bound: they keep their time. `params`:
    PAGEABLE_MEMCPY's, complete (PAGEABLE_MEMCPY.params_of).
    """
    min_bytes = params["min_copy_bytes"]
    speedup = max(params["assumed_pinned_speedup"], 1.0)
    acts = v.acts
    copies = acts[acts["stage"].isin(["h2d", "d2h"])].copy()
    copies["direction"] = copies["stage"]
    host_kind = np.where(
        copies["direction"] == "h2d",
        copies["src_kind"].astype("object"),
        copies["dst_kind"].astype("object"),
    )
    copies["host_kind"] = host_kind
    copies["duration"] = (copies["end_ns"] - copies["start_ns"]).astype("float64")
    big = copies["bytes"].fillna(0) >= min_bytes
    pinned = copies[big & (copies["host_kind"] == "pinned")]
    bw = pinned.groupby(["device", "direction"])[["bytes", "duration"]].sum()
    by_device = pinned.groupby("device")[["bytes", "duration"]].sum()
    copies["pinned_bw"] = _bandwidth(copies, bw, by_device)
    measured = copies["pinned_bw"] > 0
    ideal = np.where(
        measured,
        copies["bytes"].fillna(0) / copies["pinned_bw"].where(measured, 1.0) * 1e9,
        copies["duration"] / speedup,
    )
    pageable = big & (copies["host_kind"] == "pageable")
    copies["pinned_ns"] = np.where(
        pageable, np.minimum(ideal, copies["duration"]), copies["duration"]
    )
    copies["pageable"] = pageable
    return copies


def _bandwidth(copies: pd.DataFrame, bw: pd.DataFrame, by_device: pd.DataFrame) -> np.ndarray:
    """Measured pinned bandwidth (bytes/s) per copy: same device and direction, else same
    device, else 0."""
    keys = pd.MultiIndex.from_arrays([copies["device"], copies["direction"]])
    pair = (bw["bytes"] / bw["duration"] * 1e9).reindex(keys).to_numpy()
    dev = (by_device["bytes"] / by_device["duration"] * 1e9).reindex(copies["device"]).to_numpy()
    return np.nan_to_num(np.where(np.isnan(pair), dev, pair))


def pageable_saving(copies: pd.DataFrame) -> float:
    """Copy time beyond the pinned estimate, at most the wall time the pageable copies took."""
    pageable = copies[copies["pageable"]]
    extra = float((pageable["duration"] - pageable["pinned_ns"]).sum())
    return min(extra, union_ns(pageable["start_ns"].to_numpy(), pageable["end_ns"].to_numpy()))


def pinned_ratio(copies: pd.DataFrame) -> float:
    """The copies' time from pinned memory, as a fraction of their time now."""
    total = float(copies["duration"].sum())
    return float(copies["pinned_ns"].sum()) / total if total > 0 else 1.0
