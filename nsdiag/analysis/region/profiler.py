"""Region from the program's cudaProfilerStart/Stop calls: its author bracketed what matters."""

from __future__ import annotations

import pandas as pd

from nsdiag.analysis.records.region import Region, Window, ms
from nsdiag.analysis.region.steady import MIN_ITERATIONS, iteration_region, steady
from nsdiag.analysis.region.windows import IntArray, as_iterations

PROFILER_START = frozenset({"cudaProfilerStart", "cuProfilerStart"})
PROFILER_STOP = frozenset({"cudaProfilerStop", "cuProfilerStop"})


def profiler_windows(api: pd.DataFrame, trace_end: int) -> list[Window]:
    """Each cudaProfilerStart's return to the next cudaProfilerStop's call (to the end of the
    trace when it never stops)."""
    if not len(api) or "name" not in api:
        return []
    calls = api[api["name"].isin(PROFILER_START | PROFILER_STOP)].sort_values("start_ns")
    windows: list[Window] = []
    opened: int | None = None
    for name, start, end in zip(calls["name"], calls["start_ns"], calls["end_ns"], strict=True):
        if name in PROFILER_START and opened is None:
            opened = int(end)
        elif name in PROFILER_STOP and opened is not None:
            windows.append((opened, int(start)))
            opened = None
    if opened is not None:
        windows.append((opened, trace_end))
    return [w for w in windows if w[1] > w[0]]


def profiler_region(windows: list[Window], launches: IntArray, bounds: Window) -> Region:
    iterations = as_iterations(windows, launches)
    if len(windows) >= MIN_ITERATIONS and (parts := steady(iterations)) is not None:
        return iteration_region("profiler-range", "the cudaProfilerStart/Stop range", parts, bounds)
    kernels = sum(i.kernels for i in iterations)
    what = (
        "the cudaProfilerStart/Stop range"
        if len(windows) == 1
        else f"the {len(windows)} cudaProfilerStart/Stop ranges"
    )
    text = f"{what} ({ms(sum(e - s for s, e in windows))}, {kernels} kernel launches)"
    return Region("profiler-range", text, tuple(windows), *bounds)
