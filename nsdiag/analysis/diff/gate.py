"""The CI gate: did the region, or a kernel above a chosen share of it, get slower by more than
a threshold, beyond the run-to-run noise?

A quantity is slower when all of these hold (docs/diff.md, "The gate"):
- over the threshold: AFTER's median run is more than the threshold above BEFORE's (one run a
  side: the medians of their iterations);
- beyond the run-to-run noise (noise.py): the change is larger than two runs of the unchanged
  program differ, measured where a side has several runs, else the default or --run-noise;
- not within the iteration-to-iteration noise: a one-sided Mann-Whitney U test over the
  iterations (one run a side) or over the runs (MIN_SAMPLES runs a side or more) does not
  reject it at ALPHA; with fewer samples the test is not made.

The iterations of one run are not independent samples of the program: two recordings of
elementwise.py differ by +5.3% with p = 2e-19 over their iterations. The rank test alone would
call that a regression, and the quartile rule that replaced it passed a 5% gate at +5.3% by
luck of the spread; run-to-run noise is the measure of what two runs of one program differ by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nsdiag.analysis.diff.kernels import KernelMatch
from nsdiag.analysis.diff.noise import RunNoise, run_noise
from nsdiag.analysis.diff.side import KernelTimes, Run
from nsdiag.analysis.diff.stats import ALPHA, MIN_SAMPLES, Spread, p_greater
from nsdiag.model.names import short_name

DEFAULT_SHARE_PCT = 10.0


@dataclass(frozen=True)
class GateCheck:
    what: str  # "the region" or the kernel's short name
    match: int | None  # the kernel match checked (None: the region)
    before: Spread  # over the iterations of each side's first run
    after: Spread
    threshold_pct: float
    p_value: float | None  # None: too few samples to test (iterations, or runs a side)
    before_runs: tuple[float, ...]  # one value per run: the median iteration, or kernel time
    after_runs: tuple[float, ...]
    noise: RunNoise

    @property
    def runs(self) -> bool:
        """Whether a side has several runs (the change is then of their medians)."""
        return max(len(self.before_runs), len(self.after_runs)) > 1

    @property
    def before_ns(self) -> float:
        return float(np.median(self.before_runs)) if self.before_runs else self.before.median

    @property
    def after_ns(self) -> float:
        return float(np.median(self.after_runs)) if self.after_runs else self.after.median

    @property
    def change_pct(self) -> float:
        b = self.before_ns
        return (self.after_ns - b) / b * 100 if b > 0 else 0.0

    @property
    def over_threshold(self) -> bool:
        return self.change_pct > self.threshold_pct

    @property
    def beyond_run_noise(self) -> bool:
        return self.change_pct > self.noise.pct

    @property
    def beyond_noise(self) -> bool | None:
        return None if self.p_value is None else self.p_value < ALPHA

    @property
    def clear_of_spread(self) -> bool | None:
        """AFTER's lower quartile above BEFORE's upper quartile by more than the threshold (over
        the first runs' iterations; shown, no longer decisive)."""
        if self.p_value is None or self.runs:
            return None
        return self.after.q1 > self.before.q3 * (1 + self.threshold_pct / 100)

    @property
    def slower(self) -> bool:
        return self.over_threshold and self.beyond_run_noise and self.beyond_noise is not False


@dataclass(frozen=True)
class Gate:
    threshold_pct: float
    share_pct: float
    checks: tuple[GateCheck, ...]  # the region first, then the kernels above the share

    @property
    def failed(self) -> tuple[GateCheck, ...]:
        return tuple(c for c in self.checks if c.slower)

    @property
    def passed(self) -> bool:
        return not self.failed

    @property
    def noise(self) -> RunNoise:
        """The region's run-to-run noise: what the verdict rests on."""
        return self.checks[0].noise


def check(
    runs: tuple[Sequence[Run], Sequence[Run]],
    matches: tuple[KernelMatch, ...],
    threshold_pct: float,
    share_pct: float = DEFAULT_SHARE_PCT,
    noise_pct: float | None = None,
) -> Gate:
    """`runs`: BEFORE's and AFTER's runs, the diagnosed one first (its iterations are what the
    kernel matches were made on). Kernels checked: matched on both sides, above `share_pct`
    of the region's time (mean iteration of the first run) on either side. `noise_pct`: the
    user's run-to-run noise, instead of the measured or default one."""
    b_runs, a_runs = runs
    before, after = b_runs[0].region_time, a_runs[0].region_time
    checks = [
        _check(
            "the region",
            None,
            (before, after),
            ([r.median_ns for r in b_runs], [r.median_ns for r in a_runs]),
            threshold_pct,
            noise_pct,
        )
    ]
    for m in matches:
        if not m.before or not m.after:
            continue
        share = max(
            m.before_ns / before.mean if before.mean > 0 else 0.0,
            m.after_ns / after.mean if after.mean > 0 else 0.0,
        )
        if share * 100 >= share_pct:
            checks.append(
                _check(
                    short_name(m.before[0].name),
                    m.id,
                    (Spread(m.samples("before")), Spread(m.samples("after"))),
                    (_kernel_runs(m.before, b_runs), _kernel_runs(m.after, a_runs)),
                    threshold_pct,
                    noise_pct,
                )
            )
    return Gate(threshold_pct, share_pct, tuple(checks))


def _kernel_runs(kernels: tuple[KernelTimes, ...], runs: Sequence[Run]) -> list[float]:
    """The kernels' time per iteration in each run where every one of them ran."""
    out = []
    for run in runs:
        times = [run.kernel_ns.get(k.key) for k in kernels]
        if all(t is not None for t in times):
            out.append(float(sum(t for t in times if t is not None)))
    return out


def _check(
    what: str,
    match: int | None,
    iterations: tuple[Spread, Spread],
    per_run: tuple[list[float], list[float]],
    pct: float,
    noise_pct: float | None,
) -> GateCheck:
    b, a = iterations
    b_runs, a_runs = per_run
    if len(b_runs) == len(a_runs) == 1:
        p = p_greater(b.samples, a.samples)
    elif min(len(b_runs), len(a_runs)) >= MIN_SAMPLES:
        p = p_greater(b_runs, a_runs)
    else:
        p = None  # several runs, too few to rank: the run-to-run noise decides
    noise = run_noise(b_runs, a_runs, noise_pct)
    return GateCheck(what, match, b, a, pct, p, tuple(b_runs), tuple(a_runs), noise)
