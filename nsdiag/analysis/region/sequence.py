"""Region from the repeating sequence of kernel launches (with the host's synchronisations, which
mark iteration ends a signature alone may not show), for programs without NVTX ranges."""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.records.region import Iteration, Region, Window
from nsdiag.analysis.region.steady import (
    FEW_ITERATIONS,
    MIN_ITERATIONS,
    iteration_region,
    steady,
)
from nsdiag.analysis.region.windows import BoolArray, IntArray, as_iterations
from nsdiag.model.signature import signature_codes

MIN_MATCH = 0.9  # share of launches that must repeat one period later
MAIN_LOOP_SHARE = 0.5  # a loop runs at least this share of the time of the longest-running one
LAST_AT_MOST = 1.5  # the last iteration, ended by its GPU work, at most this many of the one before
# What the search reads of each kernel launch (its signature's parts, its end): a caller may
# pass these alone instead of a copy of every column of 10^5 launches.
SEQUENCE_COLUMNS = ("name", "grid", "block", "end_ns")


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
    # numbered as the key texts (with "s" appended where synced) would be, in order of first
    # appearance, without writing a text per launch
    codes, texts = signature_codes(kernels, exact=True)
    text_ids, _ = pd.factorize(np.array(texts, dtype=object))
    combined = text_ids[codes].astype("int64") * 2 + np.asarray(synced, dtype="int64")
    numbered, _ = pd.factorize(combined)
    out: IntArray = numbered.astype("int64")
    return out


def _candidate_periods(codes: IntArray, least: int) -> list[int]:
    """Spacings between repeats of each signature that occur often: the loop's period is among
    them. For a loop of two repetitions, most of a period's launches recur one period later
    (a spacing seen twice would make every pair of equal launches a candidate)."""
    order = np.argsort(codes, kind="stable")
    same = codes[order][1:] == codes[order][:-1]
    spacing = (order[1:] - order[:-1])[same]
    if not len(spacing):
        return []
    values, counts = np.unique(spacing, return_counts=True)
    often = counts >= (least - 1 if least >= MIN_ITERATIONS else MIN_MATCH * values)
    keep = values[often & (values * least <= len(codes))]
    return sorted(int(v) for v in keep if v > 0)


def _periodic_stretches(codes: IntArray, period: int, least: int) -> list[Window]:
    """Stretches [a, b) of launches that repeat one period later (MIN_MATCH of each
    period-long window), at least `least` periods long."""
    n = len(codes)
    # each launch's window of `period` launches from it: a running sum of the launches that
    # match, O(launches) whatever the period (a convolution is O(launches x period): 96 s on a
    # decode loop's 27,274); counted in integers (total[i]: matches before launch i), the
    # window's share against the fewest matches that reach MIN_MATCH
    fewest = _fewest_matches(period)
    same = codes[period:] == codes[:-period] if period < n else np.zeros(0, dtype=bool)
    # A stretch of `least` periods spans least - 1 disjoint windows that each hold `fewest`
    # matches: a period with fewer in all is no loop's, found without the running sum (most
    # candidate periods of a step of thousands of launches)
    if np.count_nonzero(same) < max(least - 1, 1) * fewest:
        return []
    total = np.zeros(n + 1, dtype="int64")
    np.cumsum(same, out=total[period + 1 :])
    ahead = np.full(n, total[n])  # total[min(i + period, n)], by slices
    inside = max(n - period, 0)
    ahead[:inside] = total[period : period + inside]
    good = np.zeros(n + 2, dtype="int8")
    good[1:-1] = ahead - total[:n] >= fewest
    edges = np.flatnonzero(np.diff(good))
    stretches = []
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        a, b = max(int(start) - period, 0), min(int(stop) + period - 1, n)
        if b - a >= least * period:
            stretches.append((a, b))
    return stretches


def _fewest_matches(period: int) -> int:
    """The fewest matching launches of `period` whose share (matches / period, in floating
    point) is at least MIN_MATCH."""
    fewest = math.ceil(MIN_MATCH * period)
    while fewest > 0 and (fewest - 1) / period >= MIN_MATCH:
        fewest -= 1
    while fewest / period < MIN_MATCH:
        fewest += 1
    return fewest


def _cut(
    launches: IntArray,
    ends: IntArray,
    period: int,
    a: int,
    b: int,
    host_gap: npt.NDArray[np.int64] | None = None,
) -> list[Iteration]:
    """Iterations of a periodic stretch, cut where the host paused longest between launches.
    Each runs from its first launch to the next one's; the last complete one, which has no next,
    about as long as the others (below), so a loop of three repetitions gives three
    iterations. `host_gap`: the gaps between launches, np.diff(launches) with a leading 0
    (computed once by the caller: it weighs thousands of stretches)."""
    if host_gap is None:
        host_gap = np.diff(launches, prepend=launches[0])
    cuts = list(range(a + int(np.argmax(_offset_medians(host_gap[a:b], period))), b, period))
    windows = [(int(launches[i]), int(launches[j])) for i, j in itertools.pairwise(cuts)]
    last = cuts[-1]
    if last + period <= b and windows:
        # as long as the iteration before it, or to the end of its GPU work where that is
        # later (never past LAST_AT_MOST times that: work queued long before it ran is not the
        # loop's), nor past the launch after the stretch
        start = int(launches[last])
        typical = float(windows[-1][1] - windows[-1][0])  # its predecessor (past warm-up)
        own = int(ends[last : last + period].max()) + 1
        # of two repetitions the one before may be warm-up: no guide to the last one's length
        end = max(own, start + int(typical)) if len(windows) > 1 else own
        end = min(end, start + int(LAST_AT_MOST * typical))
        if b < len(launches):
            end = min(end, int(launches[b]))
        if end > launches[last + period - 1]:
            windows.append((start, end))
    return as_iterations(windows, launches, ordered=True)  # launch order: sorted


def _offset_medians(gaps: npt.NDArray[np.int64], period: int) -> npt.NDArray[np.float64]:
    """Per offset o in a period: the median of gaps[o::period], all offsets at once (the rows of
    a period-wide matrix; the first `rem` offsets have one gap more)."""
    rows, rem = divmod(len(gaps), period)
    if rows == 0:
        return np.array([float(np.median(gaps[o::period])) for o in range(period)])
    full = gaps[: rows * period].reshape(rows, period)
    out = np.empty(period)
    if rem:
        out[:rem] = np.median(np.vstack([full[:, :rem], gaps[rows * period :]]), axis=0)
    out[rem:] = np.median(full[:, rem:], axis=0)
    return out


def sequence_iterations(
    kernels: pd.DataFrame, synced: BoolArray, launches: IntArray, least: int = MIN_ITERATIONS
) -> tuple[int, list[Iteration]] | None:
    """Iterations from the repeating kernel sequence. Of the stretches that repeat with some
    period and take at least MAIN_LOOP_SHARE of the time of the longest-running one (a main
    loop, not a phase's short inner loop), the one ending last: a program's steady state comes
    after its warm-up, autotuning and compilation loops. Ties go to the shortest period. A loop
    repeats `least` times or more."""
    codes = _signature_codes(kernels, synced)
    if len(codes) < 2 * least:
        return None
    ends = pd.to_numeric(kernels["end_ns"], errors="coerce").fillna(0).to_numpy("int64")
    ends = np.maximum(ends, launches)
    host_gap = np.diff(launches, prepend=launches[0]) if len(launches) else launches
    stretches = [
        (period, a, b)
        for period in _candidate_periods(codes, least)
        for a, b in _periodic_stretches(codes, period, least)
    ]
    # A stretch's iterations lie between its first launch and the launch after it: a bound on
    # the time they cover. Cut longest-bound first, and leave uncut the stretches whose bound is
    # under MAIN_LOOP_SHARE of the longest covered so far, which can be neither the longest nor
    # a main loop (a step of thousands of launches has thousands of short inner stretches).
    n = len(launches)
    bound = [(int(launches[b]) if b < n else math.inf) - int(launches[a]) for _, a, b in stretches]
    cut: dict[int, tuple[int, int, list[Iteration]]] = {}
    longest = 0
    for i in sorted(range(len(stretches)), key=lambda i: -bound[i]):
        if bound[i] < MAIN_LOOP_SHARE * longest:
            break  # and every one after it
        period, a, b = stretches[i]
        iterations = _cut(launches, ends, period, a, b, host_gap)
        if len(iterations) >= least:
            cut[i] = (sum(it.wall_ns for it in iterations), period, iterations)
            longest = max(longest, cut[i][0])
    found = [cut[i] for i in sorted(cut)]  # in the order of periods and stretches, as found
    if not found:
        return None
    longest = max(covered for covered, _, _ in found)
    main = [f for f in found if f[0] >= MAIN_LOOP_SHARE * longest]
    # the last iteration's start: where the last cut falls (its end is estimated from GPU work)
    _, period, iterations = max(main, key=lambda f: (f[2][-1].start_ns, -f[1]))
    return period, iterations


def sequence_region(
    kernels: pd.DataFrame, launches: IntArray, api: pd.DataFrame, bounds: Window
) -> Region | None:
    synced = synced_before(launches, api)
    # a sequence that runs twice is the short run's step only where none runs three times
    found = sequence_iterations(kernels, synced, launches) or sequence_iterations(
        kernels, synced, launches, FEW_ITERATIONS
    )
    if found is None:
        return None
    period, iterations = found
    parts = steady(iterations)
    if parts is None:
        return None
    what = f"a repeating sequence of {period} kernel launch{'es' if period > 1 else ''}"
    return iteration_region("kernel-sequence", what, parts, bounds)
