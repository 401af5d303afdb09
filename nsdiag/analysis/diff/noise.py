"""Run-to-run noise: the variation between two runs of one unchanged program, what the gate's
verdict rests on.

The iterations of one run are not independent samples of the program: a run's host speed,
clocks and memory placement hold for the whole run. Two recordings of `elementwise.py` on the
H200 (tests/data/diff_demo/elementwise_run1/2) are each steady (quartiles 543-547 µs and
567-583 µs) and 5.3% apart; a rank test over their iterations calls that p = 2e-19. So the gate
compares runs with run-to-run noise:

- several runs a side (`--before A --before B`): the runs of one side are the same code, so the
  spread of their medians is run-to-run noise, measured (the widest side's (max - min) / median);
- one run a side: it cannot be measured; the default is RUN_NOISE_PCT, the widest run-to-run
  spread of one program among the recordings under tests/data (docs/diff.md lists them), or the
  user's own (`--run-noise PCT`, what two runs of their unchanged program differ by).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The four recordings of elementwise.py (programs/elementwise, programs/verify/elementwise,
# diff_demo/elementwise_run1/2): median iterations 561, 565, 545 and 574 µs, 5.3% from the
# fastest to the slowest. Rounded up so that two runs of one program pass a 5% gate.
RUN_NOISE_PCT = 6.0
MEASURED, DEFAULT, GIVEN = "measured", "default", "given"


@dataclass(frozen=True)
class RunNoise:
    """The run-to-run noise of one quantity (the region, or a kernel match), in percent."""

    pct: float
    basis: str  # MEASURED | DEFAULT | GIVEN
    runs: tuple[int, int]  # runs of BEFORE and AFTER

    def describe(self) -> str:
        """`run-to-run noise 5.3% (measured: 2 vs 2 runs)`."""
        b, a = self.runs
        why = {
            MEASURED: f"measured over {b} vs {a} runs",
            DEFAULT: "not measured with one run a side: nsdiag's default; give several runs a "
            "side (--before A --before B ...) or --run-noise PCT",
            GIVEN: "--run-noise",
        }[self.basis]
        return f"run-to-run noise {self.pct:.1f}% ({why})"

    def to_json(self) -> dict[str, object]:
        return {"pct": self.pct, "basis": self.basis, "runs": list(self.runs)}


def spread_pct(values: Sequence[float]) -> float | None:
    """(max - min) / median of one side's run values, in percent; None for fewer than two."""
    finite = [v for v in values if np.isfinite(v)]
    if len(finite) < 2:
        return None
    middle = float(np.median(finite))
    return (max(finite) - min(finite)) / middle * 100 if middle > 0 else None


def run_noise(
    before: Sequence[float], after: Sequence[float], given_pct: float | None = None
) -> RunNoise:
    """`before`, `after`: one value per run (a run's median iteration, or a kernel's time per
    iteration in it). Given by the user, else measured where a side has several runs (its
    runs are one program, so their spread is noise), else the default."""
    runs = (len(before), len(after))
    if given_pct is not None:
        return RunNoise(given_pct, GIVEN, runs)
    measured = [p for p in (spread_pct(before), spread_pct(after)) if p is not None]
    if measured:
        return RunNoise(max(measured), MEASURED, runs)
    return RunNoise(RUN_NOISE_PCT, DEFAULT, runs)
