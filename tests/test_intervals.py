"""model/intervals.py's merge: the union of intervals as disjoint pieces, held against the
definition (every time covered by some interval, and nothing else)."""

from __future__ import annotations

import numpy as np
import pytest

from nsdiag.model import intervals


def _covered(starts: np.ndarray, ends: np.ndarray, span: int) -> np.ndarray:
    """Which unit steps [t, t + 1) of 0..span an interval covers, one interval at a time."""
    out = np.zeros(span, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        out[s:e] = True
    return out


@pytest.mark.parametrize("seed", range(20))
def test_disjoint_pieces_cover_the_union(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    starts = rng.integers(0, 1000, n)
    ends = starts + rng.integers(0, 40, n)
    lo, hi = intervals.disjoint(starts, ends)
    assert np.all(lo[1:] > hi[:-1])  # sorted, apart: touching intervals merged
    assert np.array_equal(_covered(lo, hi, 1100), _covered(starts, ends, 1100))
    assert float((hi - lo).sum()) == intervals.union_ns(starts, ends)


def test_runs_name_each_pieces_first_interval_and_end() -> None:
    starts = np.array([0, 2, 5, 5, 9, 12])
    ends = np.array([3, 4, 7, 6, 12, 13])  # [0, 4), [5, 7), [9, 13): 9-12 touches 12-13
    first, piece_ends = intervals.runs(starts, ends)
    assert first.tolist() == [0, 2, 4] and piece_ends.tolist() == [4, 7, 13]
    empty = np.zeros(0, dtype="int64")
    assert [a.tolist() for a in intervals.runs(empty, empty)] == [[], []]
