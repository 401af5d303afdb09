"""Steady state: which of a loop's iterations are warm-up, whether the rest is regular enough to be
a loop, and the region they make."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsdiag.analysis.records.region import Iteration, Region, Window, ms
from nsdiag.model import quantities

MIN_ITERATIONS = 3  # repeats that make a loop
# A short run's repeats (a script that runs its step twice): iterations only where nothing repeats
# MIN_ITERATIONS times, so a loop is never cut into pairs of its parts.
FEW_ITERATIONS = 2
WARMUP_SLOWER = 1.25  # an iteration this much slower than the steady median is warm-up
REGULAR_SPREAD = 1.5  # steady iterations: 75th over 25th percentile of their wall times
# Many iterations that each launch the same number of kernels are a loop even when the host's
# speed wanders: a launch-bound BERT request on the H200 took 7 ms or 12 ms by turns (the host's
# pace, not the work), 218 times over, each with the same 166 launches.
MANY_ITERATIONS = 10
LOOSE_SPREAD = 3.0


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
    """A loop's iterations take about the same time (the middle half within REGULAR_SPREAD, or
    LOOSE_SPREAD for MANY_ITERATIONS or more that launch the same number of kernels each)."""
    walls = np.array([i.wall_ns for i in iterations], dtype="float64")
    low, high = np.percentile(walls, [25, 75])
    same_work = len(iterations) >= MANY_ITERATIONS and len({i.kernels for i in iterations}) == 1
    spread = LOOSE_SPREAD if same_work else REGULAR_SPREAD
    return bool(low > 0 and high / low <= spread)


def steady(iterations: list[Iteration]) -> tuple[list[Iteration], list[Iteration]] | None:
    """Warm-up and steady iterations, or None when what is left is too short or irregular to
    be a loop's steady state. Of two iterations the first is warm-up when it is slower, and the
    second is the steady state alone."""
    warmup, rest = split_warmup(iterations)
    short_run = len(iterations) == FEW_ITERATIONS and len(rest) == 1
    if (len(rest) < 2 and not short_run) or not _regular(rest):
        return None
    return warmup, rest


def iteration_region(
    method: str, what: str, parts: tuple[list[Iteration], list[Iteration]], bounds: Window
) -> Region:
    warmup, steady_ = parts
    median = float(np.median([i.wall_ns for i in steady_]))
    text = f"{len(steady_)} steady-state iterations of {what} (median {ms(median)})" + (
        f", after {quantities.plural(len(warmup), 'warm-up iteration')}" if warmup else ""
    )
    windows = merged([(i.start_ns, i.end_ns) for i in steady_])
    return Region(method, text, windows, *bounds, tuple(steady_), tuple(warmup))


def merged(windows: list[Window]) -> tuple[Window, ...]:
    """Windows that touch become one (consecutive iterations)."""
    out: list[Window] = []
    for start, end in sorted(windows):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return tuple(out)
