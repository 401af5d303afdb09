"""Intervals on one time axis (ns): unions, merging and containment.

Shared by the nsys reader (the NVTX range of each CUDA call), the timeline analyses (busy time
per stage, the NVTX range open on a host thread, a host thread's CUDA calls as busy pieces, the
time covered by communication) and the timeline chart (merged bars, busy % per bin). Every
function is vectorised over numpy arrays.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

Array = npt.NDArray[Any]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def union_ns(starts: npt.ArrayLike, ends: npt.ArrayLike) -> float:
    """Length of the union of intervals (any order)."""
    s_all, e_all = np.asarray(starts), np.asarray(ends)
    if len(s_all) == 0:
        return 0.0
    if len(s_all) == 1:  # the sum below, without its arrays (asked once per iteration)
        return float(np.clip(e_all[0] - s_all[0], 0, None))
    order = np.argsort(s_all, kind="stable")
    s, e = s_all[order], e_all[order]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate([[s[0]], reach[:-1]])
    # Each interval adds what lies beyond everything before it.
    return float(np.sum(np.clip(e - np.maximum(s, prev), 0, None)))


def runs(starts: Array, ends: Array) -> tuple[IntArray, Array]:
    """Intervals sorted by start, merged into the disjoint pieces of their union (intervals that
    overlap or touch are one piece): the index of each piece's first interval, and its end."""
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return first, np.maximum.reduceat(reach, first)


def disjoint(starts: Array, ends: Array) -> tuple[Array, Array]:
    """The union of intervals (any order) as sorted disjoint intervals: their starts and ends."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    first, piece_ends = runs(s, e)
    return s[first], piece_ends


_FEW_GROUPS = 4096  # below this many, a loop over the groups beats a groupby


def union_ns_by_group(codes: Array, starts: Array, ends: Array, n_groups: int) -> FloatArray:
    """Length of the union of intervals per group code (0..n_groups-1)."""
    if len(codes) == 0:
        return np.zeros(n_groups)
    order = np.lexsort((starts, codes))
    g, s, e = codes[order], starts[order], ends[order]
    # the running latest end within each group: groups are contiguous blocks once sorted
    bounds = np.flatnonzero(np.diff(g)) + 1
    if len(bounds) < _FEW_GROUPS and e.dtype.kind in "iu":  # (pandas' cummax skips NaN)
        reach = np.concatenate([np.maximum.accumulate(part) for part in np.split(e, bounds)])
    else:
        reach = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[0] = s[0]
    prev[1:] = np.where(g[1:] == g[:-1], reach[:-1], s[1:])
    contribution = np.clip(e - np.maximum(s, prev), 0, None).astype("float64")
    counts = np.bincount(g.astype("int64"), weights=contribution, minlength=n_groups)
    return cast(FloatArray, counts)


def merge_ids(starts: Array, ends: Array, gap: float) -> IntArray:
    """Group ids for intervals sorted by start: a new group starts after a gap wider than `gap`
    (0: intervals that overlap or touch share a group)."""
    if len(starts) == 0:
        return np.zeros(0, dtype="int64")
    reach = np.maximum.accumulate(ends)
    breaks = starts[1:] > reach[:-1] + gap
    return np.concatenate([[0], np.cumsum(breaks)]).astype("int64")


def covered_fraction(starts: FloatArray, ends: FloatArray, edges: FloatArray) -> FloatArray:
    """Fraction of each bin (between consecutive `edges`) covered by the union of intervals."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    groups = merge_ids(s, e, 0.0)
    u_start = pd.Series(s).groupby(groups).min().to_numpy()
    u_end = pd.Series(e).groupby(groups).max().to_numpy()
    lengths = u_end - u_start
    prefix = np.concatenate([[0.0], np.cumsum(lengths)])
    idx = np.searchsorted(u_start, edges, side="right") - 1
    at = np.clip(idx, 0, None)
    covered = np.where(idx >= 0, prefix[at] + np.clip(edges - u_start[at], 0, lengths[at]), 0.0)
    widths = np.diff(edges)
    fraction: FloatArray = np.divide(
        np.diff(covered), widths, out=np.zeros_like(widths), where=widths > 0
    )
    return fraction


def enclosing(starts: Array, ends: Array, t: Array) -> IntArray:
    """Index of the latest-starting interval [start, end] containing each time, or -1 (starts
    sorted; for nested push/pop ranges that is the innermost). Binary lifting over a sparse table
    of running maxima of `ends` skips back over blocks of intervals that all end before t: O(log n)
    vectorised steps, no Python loop over rows."""
    pos = np.searchsorted(starts, t, side="right") - 1
    table = [np.asarray(ends, dtype="int64")]  # table[j][i] = max(ends[i - 2^j + 1 .. i])
    while (1 << len(table)) <= len(starts):
        prev, step = table[-1], 1 << (len(table) - 1)
        table.append(np.concatenate([prev[:step], np.maximum(prev[step:], prev[:-step])]))
    for j in range(len(table) - 1, -1, -1):
        can = pos - (1 << j) + 1 >= 0
        pos = np.where(can & (table[j][np.where(can, pos, 0)] < t), pos - (1 << j), pos)
    found = np.full(len(t), -1, dtype="int64")
    ok = pos >= 0
    found[ok] = np.where(np.asarray(ends)[pos[ok]] >= t[ok], pos[ok], -1)
    return found


def enclosing_disjoint(starts: Array, ends: Array, t: Array) -> IntArray:
    """`enclosing` for intervals that do not overlap (sorted, each starting where or after all
    before it ended: the outermost of nested ranges): the last interval starting at or before
    each time, where it reaches the time. Any earlier one ends by that start, so it holds the
    time only if that one does too (both at their shared point)."""
    pos = np.searchsorted(starts, t, side="right") - 1
    found = np.full(len(t), -1, dtype="int64")
    ok = pos >= 0
    found[ok] = np.where(np.asarray(ends)[pos[ok]] >= np.asarray(t)[ok], pos[ok], -1)
    return found
