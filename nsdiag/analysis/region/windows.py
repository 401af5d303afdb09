"""The analysed region's records (Region, Iteration) and the timeline reads every way of choosing
it shares: when the host launched each activity, the trace's bounds, windows as iterations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Window = tuple[int, int]


@dataclass(frozen=True)
class Iteration:
    index: int  # position among all detected iterations, warm-up included
    start_ns: int
    end_ns: int
    kernels: int  # kernel launches inside

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Region:
    """The windows of the timeline the diagnosis analyses (host time, ns since the trace's clock
    origin) and how they were chosen."""

    method: (
        str  # user | profiler-range | nvtx-iterations | nvtx-annotated | kernel-sequence | whole
    )
    description: str  # one line: which region, and how it was chosen
    windows: tuple[Window, ...]
    trace_start_ns: int
    trace_end_ns: int
    iterations: tuple[Iteration, ...] = ()  # steady-state iterations analysed
    warmup: tuple[Iteration, ...] = ()  # detected, left out

    @property
    def start_ns(self) -> int:
        return self.windows[0][0]

    @property
    def end_ns(self) -> int:
        return self.windows[-1][1]

    @property
    def wall_ns(self) -> int:
        return int(sum(end - start for start, end in self.windows))

    @property
    def is_whole(self) -> bool:
        return self.start_ns <= self.trace_start_ns and self.end_ns >= self.trace_end_ns

    @property
    def iteration_median_ns(self) -> float | None:
        if not self.iterations:
            return None
        return float(np.median([i.wall_ns for i in self.iterations]))

    def contains(self, times: npt.ArrayLike) -> BoolArray:
        """Whether each time falls in one of the windows."""
        return within(times, self.windows)

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method,
            "description": self.description,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "wall_ns": self.wall_ns,
            "windows": [list(w) for w in self.windows],
            "iterations": len(self.iterations),
            "warmup_iterations": len(self.warmup),
            "iteration_median_ns": self.iteration_median_ns,
        }


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
    ordered_ = launches if ordered else np.sort(launches)
    return [
        int(np.searchsorted(ordered_, e, "left") - np.searchsorted(ordered_, s, "left"))
        for s, e in windows
    ]


def as_iterations(
    windows: list[Window], launches: IntArray, ordered: bool = False
) -> list[Iteration]:
    counts_ = counts(launches, windows, ordered)
    return [
        Iteration(i, s, e, c) for i, ((s, e), c) in enumerate(zip(windows, counts_, strict=True))
    ]


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms" if ns < 1e9 else f"{ns / 1e9:.3g} s"
