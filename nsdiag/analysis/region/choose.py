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
5. the whole timeline, when nothing repeats.
Leading iterations that are slower than the steady ones, or launch other kernels (autotuning,
compilation, lazy loading, allocator growth), are warm-up and left out. An iteration runs from
its start to the start of the next, so host work between iterations (data loading, logging)
belongs to the iteration it delays.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.errors import InputError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Window = tuple[int, int]

PROFILER_START = frozenset({"cudaProfilerStart", "cuProfilerStart"})
PROFILER_STOP = frozenset({"cudaProfilerStop", "cuProfilerStop"})
MIN_ITERATIONS = 3  # fewer repeats are not a loop
WARMUP_SLOWER = 1.25  # an iteration this much slower than the steady median is warm-up
MIN_MATCH = 0.9  # share of launches that must repeat one period later
REGULAR_SPREAD = 1.5  # steady iterations: 75th over 25th percentile of their wall times
TIGHT_LOOP = 0.8  # instances covering this share of their span follow one another
MAIN_LOOP_SHARE = 0.5  # a loop runs at least this share of the time of the longest-running one
MAX_VARIANTS_SHARE = 0.2  # a second repeating range with more launches than this is a variant
_INSTANCE_SUFFIX = re.compile(r"[\s#_:\-]*\d+$")


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


# ---------------------------------------------------------------- reading the timeline


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


def _kernels_in_launch_order(timeline: pd.DataFrame) -> tuple[pd.DataFrame, IntArray]:
    kernels = timeline[timeline["kind"] == "kernel"] if "kind" in timeline else timeline
    launches = launch_times(kernels)
    order = np.argsort(launches, kind="stable")
    return kernels.iloc[order], launches[order]


def _counts(launches: IntArray, windows: list[Window]) -> list[int]:
    ordered = np.sort(launches)
    return [
        int(np.searchsorted(ordered, e, "left") - np.searchsorted(ordered, s, "left"))
        for s, e in windows
    ]


def _as_iterations(windows: list[Window], launches: IntArray) -> list[Iteration]:
    counts = _counts(launches, windows)
    return [
        Iteration(i, s, e, c) for i, ((s, e), c) in enumerate(zip(windows, counts, strict=True))
    ]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms" if ns < 1e9 else f"{ns / 1e9:.3g} s"


# ---------------------------------------------------------------- steady state


def split_warmup(iterations: list[Iteration]) -> tuple[list[Iteration], list[Iteration]]:
    """The leading iterations that are slower than the steady state, or launch a different
    number of kernels, are warm-up; the rest is the steady state."""
    if len(iterations) < 2:
        return [], iterations
    tail = iterations[len(iterations) // 2 :]
    median_wall = float(np.median([i.wall_ns for i in tail]))
    usual = int(pd.Series([i.kernels for i in tail]).mode().iloc[0])
    first = 0
    while first < len(iterations) // 2 and (
        iterations[first].wall_ns > WARMUP_SLOWER * median_wall
        or iterations[first].kernels != usual
    ):
        first += 1
    return iterations[:first], iterations[first:]


def _regular(iterations: list[Iteration]) -> bool:
    """A loop's iterations take about the same time (the middle half within REGULAR_SPREAD)."""
    walls = np.array([i.wall_ns for i in iterations], dtype="float64")
    low, high = np.percentile(walls, [25, 75])
    return bool(low > 0 and high / low <= REGULAR_SPREAD)


def _steady(iterations: list[Iteration]) -> tuple[list[Iteration], list[Iteration]] | None:
    """Warm-up and steady iterations, or None when what is left is too short or irregular to
    be a loop's steady state."""
    warmup, steady = split_warmup(iterations)
    if len(steady) < 2 or not _regular(steady):
        return None
    return warmup, steady


def _iteration_region(
    method: str, what: str, parts: tuple[list[Iteration], list[Iteration]], bounds: Window
) -> Region:
    warmup, steady = parts
    median = float(np.median([i.wall_ns for i in steady]))
    text = f"{len(steady)} steady-state iterations of {what} (median {_ms(median)})" + (
        f", after {len(warmup)} warm-up iteration(s)" if warmup else ""
    )
    windows = _merged([(i.start_ns, i.end_ns) for i in steady])
    return Region(method, text, windows, *bounds, tuple(steady), tuple(warmup))


def _merged(windows: list[Window]) -> tuple[Window, ...]:
    """Windows that touch become one (consecutive iterations)."""
    out: list[Window] = []
    for start, end in sorted(windows):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return tuple(out)


# ---------------------------------------------------------------- profiler ranges


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


def _profiler_region(windows: list[Window], launches: IntArray, bounds: Window) -> Region:
    iterations = _as_iterations(windows, launches)
    if len(windows) >= MIN_ITERATIONS and (parts := _steady(iterations)) is not None:
        return _iteration_region(
            "profiler-range", "the cudaProfilerStart/Stop range", parts, bounds
        )
    kernels = sum(i.kernels for i in iterations)
    what = (
        "the cudaProfilerStart/Stop range"
        if len(windows) == 1
        else f"the {len(windows)} cudaProfilerStart/Stop ranges"
    )
    text = f"{what} ({_ms(sum(e - s for s, e in windows))}, {kernels} kernel launches)"
    return Region("profiler-range", text, tuple(windows), *bounds)


# ---------------------------------------------------------------- NVTX ranges


def base_name(name: str) -> str:
    """'ProfilerStep#12' -> 'ProfilerStep', 'step 3' -> 'step': instances of one range."""
    return _INSTANCE_SUFFIX.sub("", str(name)) or str(name)


def _top_level(nvtx: pd.DataFrame) -> pd.DataFrame:
    if "depth" not in nvtx:
        return nvtx
    return nvtx[pd.to_numeric(nvtx["depth"], errors="coerce").fillna(0) == 0]


def nvtx_candidates(
    nvtx: pd.DataFrame, launches: IntArray, only: str | None = None
) -> list[tuple[int, str, list[Iteration]]]:
    """Top-level NVTX ranges (or the one asked for, at any depth) that repeat without
    overlapping, with their instances as iterations, most kernel launches first. An instance
    runs to the start of the next where the instances follow one another closely (a loop whose
    body is the range); where other work sits between them, each instance is its own window."""
    frame = (nvtx if only else _top_level(nvtx)).assign(
        base=lambda f: f["name"].astype(str).map(base_name)
    )
    found = []
    for (base, _, _), group in frame.groupby(["base", "process_id", "thread_id"], sort=False):
        if only is not None and only not in (base, *group["name"].astype(str)):
            continue
        group = group.sort_values("start_ns")
        starts = group["start_ns"].to_numpy("int64")
        ends = group["end_ns"].to_numpy("int64")
        if len(group) < (1 if only else MIN_ITERATIONS) or np.any(starts[1:] < ends[:-1]):
            continue
        tight = (ends - starts).sum() >= TIGHT_LOOP * (ends[-1] - starts[0])
        stops = np.append(starts[1:], ends[-1]) if tight else ends
        iterations = _as_iterations(
            [(int(a), int(b)) for a, b in zip(starts, stops, strict=True)], launches
        )
        launched = sum(i.kernels for i in iterations)
        if launched:
            found.append((launched, str(base), iterations))
    return sorted(found, key=lambda c: -c[0])


def annotated_window(nvtx: pd.DataFrame, launches: IntArray) -> tuple[Window, list[str]] | None:
    """From the first top-level NVTX range that launches kernels to the end of the last one: the
    part of the run its author annotated, and the ranges' names in order."""
    top = _top_level(nvtx).sort_values("start_ns")
    windows = [(int(s), int(e)) for s, e in zip(top["start_ns"], top["end_ns"], strict=True)]
    used = [
        (w, str(n))
        for w, n, c in zip(windows, top["name"], _counts(launches, windows), strict=True)
        if c
    ]
    if not used:
        return None
    names = list(dict.fromkeys(n for _, n in used))
    return (min(w[0] for w, _ in used), max(w[1] for w, _ in used)), names


def _nvtx_region(nvtx: pd.DataFrame, launches: IntArray, bounds: Window) -> Region | None:
    if not len(nvtx):
        return None
    candidates = nvtx_candidates(nvtx, launches)
    single = len(candidates) == 1 or (
        len(candidates) > 1 and candidates[1][0] < MAX_VARIANTS_SHARE * candidates[0][0]
    )
    if single and (parts := _steady(candidates[0][2])) is not None:
        return _iteration_region(
            "nvtx-iterations", f"NVTX range '{candidates[0][1]}'", parts, bounds
        )
    annotated = annotated_window(nvtx, launches)
    if annotated is None:
        return None
    window, names = annotated
    shown = ", ".join(f"'{n}'" for n in names[:4]) + (", …" if len(names) > 4 else "")
    text = f"the part of the run the NVTX ranges cover ({shown}; no single range repeats as a loop)"
    return Region("nvtx-annotated", text, (window,), *bounds)


# ---------------------------------------------------------------- repeating kernel sequence


def synced_before(launches: IntArray, api: pd.DataFrame) -> BoolArray:
    """For each launch (in order): whether a blocking synchronisation returned since the one
    before."""
    if not len(api) or "is_sync" not in api:
        return np.zeros(len(launches), dtype=bool)
    ends = np.sort(api.loc[api["is_sync"].astype(bool), "end_ns"].to_numpy("int64"))
    done = np.searchsorted(ends, launches, side="right")
    flags: BoolArray = np.diff(done, prepend=0) > 0
    return flags


def _signature_codes(kernels: pd.DataFrame, synced: BoolArray) -> IntArray:
    """One integer per launch: its kernel signature, and whether the host synchronised with the
    GPU since the previous launch (an iteration boundary the signatures alone may not show)."""
    key: pd.Series = (
        kernels["name"].astype(str)
        + "\x1f"
        + kernels["grid"].astype(str)
        + "\x1f"
        + kernels["block"].astype(str)
        + np.where(synced, "\x1fs", "")
    )
    codes, _ = pd.factorize(key)
    return codes.astype("int64")


def _candidate_periods(codes: IntArray) -> list[int]:
    """Spacings between repeats of each signature that occur often: the loop's period is among
    them."""
    order = np.argsort(codes, kind="stable")
    same = codes[order][1:] == codes[order][:-1]
    spacing = (order[1:] - order[:-1])[same]
    if not len(spacing):
        return []
    values, counts = np.unique(spacing, return_counts=True)
    keep = values[(counts >= MIN_ITERATIONS - 1) & (values * MIN_ITERATIONS <= len(codes))]
    return sorted(int(v) for v in keep if v > 0)


def _periodic_stretches(codes: IntArray, period: int) -> list[Window]:
    """Stretches [a, b) of launches that repeat one period later (MIN_MATCH of each
    period-long window), at least MIN_ITERATIONS periods long."""
    n = len(codes)
    match = np.zeros(n, dtype="float64")
    match[period:] = codes[period:] == codes[:-period]
    window = np.convolve(match, np.ones(period), "full")[period - 1 : n + period - 1] / period
    good = np.concatenate([[False], window >= MIN_MATCH, [False]]).astype("int8")
    edges = np.flatnonzero(np.diff(good))
    stretches = []
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        a, b = max(int(start) - period, 0), min(int(stop) + period - 1, n)
        if b - a >= MIN_ITERATIONS * period:
            stretches.append((a, b))
    return stretches


def _cut(launches: IntArray, period: int, a: int, b: int) -> list[Iteration]:
    """Iterations of a periodic stretch, cut where the host paused longest between launches."""
    host_gap = np.diff(launches, prepend=launches[0])
    scores = [float(np.median(host_gap[a + o : b : period])) for o in range(period)]
    cuts = list(range(a + int(np.argmax(scores)), b, period))
    windows = [(int(launches[i]), int(launches[j])) for i, j in itertools.pairwise(cuts)]
    return _as_iterations(windows, launches)


def sequence_iterations(
    kernels: pd.DataFrame, synced: BoolArray, launches: IntArray
) -> tuple[int, list[Iteration]] | None:
    """Iterations from the repeating kernel sequence. Of the stretches that repeat with some
    period and take at least MAIN_LOOP_SHARE of the time of the longest-running one (a main
    loop, not a phase's short inner loop), the one ending last: a program's steady state comes
    after its warm-up, autotuning and compilation loops. Ties go to the shortest period."""
    codes = _signature_codes(kernels, synced)
    if len(codes) < 2 * MIN_ITERATIONS:
        return None
    found = []
    for period in _candidate_periods(codes):
        for a, b in _periodic_stretches(codes, period):
            iterations = _cut(launches, period, a, b)
            if len(iterations) >= MIN_ITERATIONS:
                found.append((sum(i.wall_ns for i in iterations), period, iterations))
    if not found:
        return None
    longest = max(covered for covered, _, _ in found)
    main = [f for f in found if f[0] >= MAIN_LOOP_SHARE * longest]
    _, period, iterations = max(main, key=lambda f: (f[2][-1].end_ns, -f[1]))
    return period, iterations


def _sequence_region(
    kernels: pd.DataFrame, launches: IntArray, api: pd.DataFrame, bounds: Window
) -> Region | None:
    found = sequence_iterations(kernels, synced_before(launches, api), launches)
    if found is None:
        return None
    period, iterations = found
    parts = _steady(iterations)
    if parts is None:
        return None
    what = f"a repeating sequence of {period} kernel launch{'es' if period > 1 else ''}"
    return _iteration_region("kernel-sequence", what, parts, bounds)


# ---------------------------------------------------------------- choosing


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
        parts = _steady(iterations) or ([], iterations)
        return _iteration_region(
            "user", f"NVTX range '{name}' (--region nvtx:{name})", parts, bounds
        )
    try:
        start_ms, end_ms = (float(x) for x in request.split(":"))
    except ValueError:
        raise InputError(
            f"--region {request!r} is not auto, all, nvtx:NAME or START:END",
            "START:END are milliseconds from the first event of the trace, e.g. --region 500:900",
        ) from None
    if end_ms <= start_ms:
        raise InputError(f"--region {request!r}: END must be after START", "e.g. --region 500:900")
    window = (t0 + int(start_ms * 1e6), min(t0 + int(end_ms * 1e6), t1))
    return Region(
        "user", f"{start_ms:g}-{end_ms:g} ms of the timeline (--region)", (window,), *bounds
    )


def choose_region(
    timeline: pd.DataFrame, api: pd.DataFrame, nvtx: pd.DataFrame, request: str = "auto"
) -> Region:
    """The region to analyse (module docstring), with a sentence saying how it was chosen.
    With several ranks it is chosen on the first rank's work: the others follow it, held in
    step by their collectives."""
    bounds = trace_bounds([timeline, api, nvtx])
    timeline, api, nvtx = reference_rank(timeline, api, nvtx)
    kernels, launches = _kernels_in_launch_order(timeline)
    if request != "auto":
        return _user_region(request, nvtx, launches, bounds)
    windows = profiler_windows(api, bounds[1])
    if windows:
        return _profiler_region(windows, launches, bounds)
    found = _nvtx_region(nvtx, launches, bounds) or _sequence_region(kernels, launches, api, bounds)
    return found or Region(
        "whole", "the whole timeline (no loop or profiler range found)", (bounds,), *bounds
    )


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
