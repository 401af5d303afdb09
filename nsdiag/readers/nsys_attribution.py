"""Who launched each GPU activity of an nsys export: its CUDA call (same process and correlation
id), that call's thread and times, and the innermost NVTX range open on that thread when the call
started; the NVTX range of each CUDA call likewise."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsdiag.model.intervals import enclosing
from nsdiag.readers.nsys_tables import ACTIVITY_COLUMNS, call_key, pick


def attribute(timeline: pd.DataFrame, api: pd.DataFrame, nvtx: pd.DataFrame) -> pd.DataFrame:
    """Each activity's launching call (same process and correlation id), and the innermost NVTX
    range open on the launching thread when that call started."""
    if not len(timeline):
        return timeline
    calls = api[api["correlation_id"] > 0]
    keys = pd.Index(call_key(calls["process_id"], calls["correlation_id"]))
    if not keys.is_unique:  # runtime and driver records of one launch: keep the first (runtime)
        first = ~keys.duplicated()
        calls, keys = calls[first], keys[first]
    found = keys.get_indexer(call_key(timeline["process_id"], timeline["correlation_id"]))
    for column, source in (
        ("api_start_ns", "start_ns"),
        ("api_end_ns", "end_ns"),
        ("thread_id", "thread_id"),
    ):
        # int64 also when the export has no CUDA calls (an empty table's columns are objects)
        timeline[column] = pick(calls[source].to_numpy(dtype="int64"), found, -1)
    thread_key = pick(calls["thread_key"].to_numpy(), found, 0)
    timeline["nvtx_range"] = range_names(nvtx, thread_key, timeline["api_start_ns"].to_numpy())
    return timeline.reindex(columns=list(ACTIVITY_COLUMNS))


def range_names(
    nvtx: pd.DataFrame, thread_keys: np.ndarray | pd.Series, times: np.ndarray | pd.Series
) -> np.ndarray:
    """Name of the innermost NVTX range on `thread_keys[i]` that encloses `times[i]` (NaN if
    none)."""
    out = np.full(len(times), np.nan, dtype=object)
    if not len(nvtx) or not len(times):
        return out
    keys, t = np.asarray(thread_keys, dtype="int64"), np.asarray(times, dtype="int64")
    names = nvtx["name"].to_numpy(dtype=object)
    for key, rows in nvtx.groupby("thread_key", sort=False).indices.items():
        wanted = np.flatnonzero(keys == key)
        if not len(wanted):
            continue
        found = enclosing(
            nvtx["start_ns"].to_numpy()[rows], nvtx["end_ns"].to_numpy()[rows], t[wanted]
        )
        hit = found >= 0
        out[wanted[hit]] = names[rows[found[hit]]]
    return out
