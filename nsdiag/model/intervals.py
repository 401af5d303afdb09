"""Interval search shared by the nsys reader (NVTX range of each CUDA call) and the timeline
analysis (NVTX range open on a host thread at each moment)."""

from __future__ import annotations

import numpy as np


def enclosing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
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
