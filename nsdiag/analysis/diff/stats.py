"""Iteration-to-iteration spread, and whether AFTER's samples are larger than BEFORE's beyond
their noise (a one-sided Mann-Whitney U test, normal approximation with tie and continuity
corrections; docs/diff.md says why this test)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Fewer samples a side than this cannot tell a change from noise at ALPHA (with 5 against 5, all
# of AFTER above all of BEFORE gives p = 0.006).
MIN_SAMPLES = 5
ALPHA = 0.01


@dataclass(frozen=True)
class Spread:
    """A quantity's values over iterations (one value when the side has no iterations)."""

    samples: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.samples)

    def _q(self, q: float) -> float:
        return float(np.percentile(self.samples, q)) if self.samples else math.nan

    @property
    def median(self) -> float:
        return self._q(50)

    @property
    def mean(self) -> float:
        return float(np.mean(self.samples)) if self.samples else math.nan

    @property
    def q1(self) -> float:
        return self._q(25)

    @property
    def q3(self) -> float:
        return self._q(75)

    @property
    def low(self) -> float:
        return min(self.samples) if self.samples else math.nan

    @property
    def high(self) -> float:
        return max(self.samples) if self.samples else math.nan

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def to_json(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "median_ns": self.median,
            "mean_ns": self.mean,
            "min_ns": self.low,
            "max_ns": self.high,
            "q1_ns": self.q1,
            "q3_ns": self.q3,
        }


def p_greater(before: Sequence[float], after: Sequence[float]) -> float | None:
    """One-sided p-value that AFTER's values tend to be larger than BEFORE's (Mann-Whitney U,
    normal approximation); None when a side has fewer than MIN_SAMPLES values."""
    n1, n2 = len(before), len(after)
    if n1 < MIN_SAMPLES or n2 < MIN_SAMPLES:
        return None
    values = np.concatenate([np.asarray(after, float), np.asarray(before, float)])
    ranks = _ranks(values)
    u = float(ranks[:n2].sum()) - n2 * (n2 + 1) / 2  # pairs where AFTER is the larger
    n = n1 + n2
    _, counts = np.unique(values, return_counts=True)
    ties = float(((counts**3) - counts).sum())
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0  # every value equal: no evidence of a change
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


def p_less(before: Sequence[float], after: Sequence[float]) -> float | None:
    """One-sided p-value that AFTER's values tend to be smaller than BEFORE's."""
    return p_greater(after, before)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.arange(1, len(values) + 1)
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + 1 + end) / 2
            start = end
    return ranks
