"""The analysed region of a timeline: what the diagnosis is about, and how it was chosen.

Users fix their steady state, not their start-up. The region is, in this order:
1. what the user asked for (`--region`): `all`, `nvtx:NAME` (every instance of a range, as
   iterations) or `START:END` (milliseconds from the first event of the trace);
2. the `cudaProfilerStart`/`cudaProfilerStop` ranges the program calls: its author bracketed what
   matters (ranges that repeat are iterations too);
3. steady-state iterations: the instances of a top-level NVTX range that repeats (a user's
   `step`, PyTorch's `ProfilerStep#N`); where several different ranges repeat (variants of a
   benchmark) or none does, the part of the run the NVTX ranges cover;
4. without NVTX ranges, the repeating sequence of kernel launches (with the host's
   synchronisations, which mark iteration ends a signature alone may not show);
5. when nothing repeats, everything from the first kernel launch on: the host's work before it
   (imports, model construction, CUDA initialisation, module loading) is start-up, summarised
   and never ranked (the whole timeline when no kernel ran).
Three repetitions make a loop; two count where nothing repeats three times (a script that
runs its step twice). Leading iterations that are slower than the steady ones, or launch other
kernels (autotuning, compilation, lazy loading, allocator growth), are warm-up and left out.
An iteration runs from its start to the start of the next, so host work between iterations
(data loading, logging) belongs to the iteration it delays.
"""

from __future__ import annotations

import math

import pandas as pd

from nsdiag.analysis.records.region import Region, Window
from nsdiag.analysis.region.nvtx import nvtx_candidates, nvtx_region
from nsdiag.analysis.region.profiler import profiler_region, profiler_windows
from nsdiag.analysis.region.sequence import SEQUENCE_COLUMNS, sequence_region
from nsdiag.analysis.region.steady import iteration_region, steady
from nsdiag.analysis.region.windows import IntArray, kernels_in_launch_order, trace_bounds
from nsdiag.errors import InputError

MAX_REGION_MS = 1e12  # 31 years: a bound that keeps START and END in 64-bit nanoseconds


def _user_region(request: str, nvtx: pd.DataFrame, launches: IntArray, bounds: Window) -> Region:
    t0, t1 = bounds
    if request == "all":
        return Region("user", "the whole timeline (--region all)", ((t0, t1),), *bounds)
    if request.startswith("nvtx:"):
        name = request.removeprefix("nvtx:")
        found = nvtx_candidates(nvtx, launches, only=name) if len(nvtx) else []
        if not found:
            raise InputError(
                f"--region nvtx:{name}: no NVTX range {name!r} launches kernels",
                "run nsdiag explain without --region to see the ranges",
            )
        iterations = found[0][2]
        parts = steady(iterations) or ([], iterations)
        return iteration_region(
            "user", f"NVTX range '{name}' (--region nvtx:{name})", parts, bounds
        )
    start_ms, end_ms = _milliseconds(request)
    extent_ms = (t1 - t0) / 1e6
    if start_ms >= extent_ms:
        raise InputError(
            f"--region {request!r} starts after the trace ends: the trace spans "
            f"0-{extent_ms:.6g} ms from its first event",
            f"give START:END within 0:{extent_ms:.6g}, or --region all",
        )
    window = (t0 + round(start_ms * 1e6), min(t0 + round(end_ms * 1e6), t1))
    return Region(
        "user", f"{start_ms:g}-{end_ms:g} ms of the timeline (--region)", (window,), *bounds
    )


def _milliseconds(request: str) -> tuple[float, float]:
    """START:END of a `--region START:END`, checked: finite, START at 0 or later, END after
    START (a number like 1e300 is refused too: no trace is that long)."""
    try:
        start_ms, end_ms = (float(x) for x in request.split(":"))
    except ValueError:
        raise InputError(
            f"--region {request!r} is not auto, all, nvtx:NAME or START:END",
            "START:END are milliseconds from the first event of the trace, e.g. --region 500:900",
        ) from None
    if not all(math.isfinite(x) and abs(x) < MAX_REGION_MS for x in (start_ms, end_ms)):
        raise InputError(
            f"--region {request!r}: START and END must be finite numbers of milliseconds",
            "e.g. --region 500:900; --region all analyses the whole trace",
        )
    if start_ms < 0:
        raise InputError(f"--region {request!r}: START must be 0 or more", "e.g. --region 0:900")
    if end_ms <= start_ms:
        raise InputError(f"--region {request!r}: END must be after START", "e.g. --region 500:900")
    return start_ms, end_ms


def choose_region(
    timeline: pd.DataFrame, api: pd.DataFrame, nvtx: pd.DataFrame, request: str = "auto"
) -> Region:
    """The region to analyse (module docstring), with a sentence saying how it was chosen.
    With several ranks it is chosen on the first rank's work: the others follow it, held in
    step by their collectives."""
    bounds = trace_bounds([timeline, api, nvtx])
    timeline, api, nvtx = reference_rank(timeline, api, nvtx)
    rows, launches = kernels_in_launch_order(timeline)
    if request != "auto":
        return _user_region(request, nvtx, launches, bounds)
    windows = profiler_windows(api, bounds[1])
    if windows:
        return profiler_region(windows, launches, bounds)
    found = nvtx_region(nvtx, launches, bounds) or sequence_region(
        timeline[[c for c in SEQUENCE_COLUMNS if c in timeline]].iloc[rows], launches, api, bounds
    )
    return found or _after_start_up(launches, bounds)


def _after_start_up(launches: IntArray, bounds: Window) -> Region:
    """No loop and no range: the timeline from the first kernel launch on."""
    first = int(launches.min()) if len(launches) else bounds[0]
    if first <= bounds[0]:
        return Region(
            "whole", "the whole timeline (no loop or profiler range found)", (bounds,), *bounds
        )
    what = (
        "the timeline from the first kernel launch on (no loop or profiler range found; "
        "what came before it is start-up)"
    )
    return Region("whole", what, ((first, bounds[1]),), *bounds)


def reference_rank(
    timeline: pd.DataFrame, api: pd.DataFrame, nvtx: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The tables' rows of the lowest rank that launched kernels, when they hold several ranks
    (a `rank` column, model/ranks.py); else the tables as they are."""
    if "rank" not in timeline or not len(timeline):
        return timeline, api, nvtx
    ranks = pd.to_numeric(timeline["rank"], errors="coerce")
    launched = ranks[(timeline["kind"] == "kernel") & (ranks >= 0)] if "kind" in timeline else ranks
    if launched.nunique() < 2:
        return timeline, api, nvtx
    first = launched.min()

    def mine(frame: pd.DataFrame) -> pd.DataFrame:
        if "rank" not in frame or not len(frame):
            return frame
        keep: pd.DataFrame = frame[pd.to_numeric(frame["rank"], errors="coerce") == first]
        return keep

    return mine(timeline), mine(api), mine(nvtx)
