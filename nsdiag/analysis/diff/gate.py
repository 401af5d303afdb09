"""The CI gate: did the region, or a kernel above a chosen share of it, get slower by more than
a threshold, beyond the iteration-to-iteration noise?

A quantity is slower when AFTER's median exceeds BEFORE's by more than the threshold, a
one-sided Mann-Whitney U test over the iterations says AFTER's values are larger at p < ALPHA,
AND the threshold is cleared between the spreads too: AFTER's lower quartile is more than the
threshold above BEFORE's upper quartile. The last condition is there because two runs of one
program differ by more than the iterations of one run do (two recordings of elementwise.py:
+5.3% with p = 5e-19, their quartiles 543-547 us and 567-582 us): a rank test alone calls that
a regression. With fewer than MIN_SAMPLES iterations on a side the noise cannot be measured;
the threshold alone then decides, and the gate's line (render/diff/rows.py) says so.
docs/diff.md has the reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsdiag.analysis.diff.kernels import KernelMatch
from nsdiag.analysis.diff.stats import ALPHA, Spread, p_greater
from nsdiag.model.names import short_name

DEFAULT_SHARE_PCT = 10.0


@dataclass(frozen=True)
class GateCheck:
    what: str  # "the region" or the kernel's short name
    match: int | None  # the kernel match checked (None: the region)
    before: Spread
    after: Spread
    threshold_pct: float
    p_value: float | None  # None: too few iterations to measure the noise

    @property
    def change_pct(self) -> float:
        b = self.before.median
        return (self.after.median - b) / b * 100 if b > 0 else 0.0

    @property
    def over_threshold(self) -> bool:
        return self.change_pct > self.threshold_pct

    @property
    def beyond_noise(self) -> bool | None:
        return None if self.p_value is None else self.p_value < ALPHA

    @property
    def clear_of_spread(self) -> bool | None:
        """AFTER's lower quartile above BEFORE's upper quartile by more than the threshold."""
        if self.p_value is None:
            return None
        return self.after.q1 > self.before.q3 * (1 + self.threshold_pct / 100)

    @property
    def slower(self) -> bool:
        return (
            self.over_threshold
            and self.beyond_noise is not False
            and self.clear_of_spread is not False
        )


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


def check(
    region: tuple[Spread, Spread],
    matches: tuple[KernelMatch, ...],
    threshold_pct: float,
    share_pct: float = DEFAULT_SHARE_PCT,
) -> Gate:
    """`region`: BEFORE's and AFTER's region time per iteration. Kernels checked: matched on
    both sides, above `share_pct` of the region's time
    (mean iteration) on either side."""
    before, after = region
    checks = [_check("the region", None, before, after, threshold_pct)]
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
                    Spread(m.samples("before")),
                    Spread(m.samples("after")),
                    threshold_pct,
                )
            )
    return Gate(threshold_pct, share_pct, tuple(checks))


def _check(what: str, match: int | None, b: Spread, a: Spread, pct: float) -> GateCheck:
    return GateCheck(what, match, b, a, pct, p_greater(b.samples, a.samples))
