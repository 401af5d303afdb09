"""The timeline reads every way of choosing the analysed region shares (its records are in
records/region.py): whether times fall in windows, when the host launched each activity, the
trace's bounds, windows as iterations."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.records.region import Iteration, Window

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def within(times: npt.ArrayLike, windows: Sequence[Window]) -> BoolArray:
    """Whether each time falls in one of the windows [start, end)."""
    t = np.asarray(times, dtype="int64")
    inside = np.zeros(len(t), dtype=bool)
    for start, end in windows:
        inside |= (t >= start) & (t < end)
    return inside


def launch_times(timeline: pd.DataFrame) -> IntArray:
    """When the host launched each activity: its API call where known, else its GPU start."""
    start: IntArray = (
        pd.to_numeric(timeline["start_ns"], errors="coerce").fillna(-1).to_numpy("int64")
    )
    if "api_start_ns" not in timeline:
        return start
    api: IntArray = (
        pd.to_numeric(timeline["api_start_ns"], errors="coerce").fillna(-1).to_numpy("int64")
    )
    return np.where(api > 0, api, start)


def trace_bounds(frames: list[pd.DataFrame]) -> Window:
    """The first start and last end over the frames' start_ns/end_ns columns."""
    starts = [int(pd.to_numeric(f["start_ns"]).min()) for f in frames if len(f)]
    ends = [int(pd.to_numeric(f["end_ns"]).max()) for f in frames if len(f)]
    return (min(starts), max(ends)) if starts else (0, 0)


def kernels_in_launch_order(timeline: pd.DataFrame) -> tuple[IntArray, IntArray]:
    """The kernels' row positions in `timeline`, in launch order, and their launch times: the
    caller takes the rows (`timeline.iloc[rows]`) only where it reads them."""
    rows = (
        np.flatnonzero((timeline["kind"] == "kernel").to_numpy())
        if "kind" in timeline
        else np.arange(len(timeline))
    )
    launches = launch_times(timeline)[rows]
    order = np.argsort(launches, kind="stable")
    return rows[order], launches[order]


def counts(launches: IntArray, windows: list[Window], ordered: bool = False) -> list[int]:
    """Launches in each window; `ordered`: the launch times are sorted already (the region
    search cuts thousands of candidate loops from one sorted sequence: no sort each time)."""
    if not windows:
        return []
    ordered_ = launches if ordered else np.sort(launches)
    found = np.searchsorted(ordered_, np.asarray(windows, dtype="int64"), "left")
    return [int(c) for c in (found[:, 1] - found[:, 0]).tolist()]


def as_iterations(
    windows: list[Window], launches: IntArray, ordered: bool = False
) -> list[Iteration]:
    counts_ = counts(launches, windows, ordered)
    return [
        Iteration(i, s, e, c) for i, ((s, e), c) in enumerate(zip(windows, counts_, strict=True))
    ]
