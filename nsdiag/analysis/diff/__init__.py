"""`nsdiag diff`: two diagnosed input sets compared, BEFORE and AFTER a change.

side.py      each side as time per iteration (region and kernel signatures)
stats.py     spread over iterations; the Mann-Whitney test the gate uses
noise.py     run-to-run noise: measured over several runs a side, else a default
kernels.py   kernels matched across the sides, renames and fusions included
findings.py  findings resolved, persisting, changed and new; predicted against measured, per
             finding and per change of BEFORE made in full
evidence.py  whether AFTER shows each change of BEFORE made (precision, shape, graphs, ...)
by_change.py the prediction check as one row per change of BEFORE, as ranked, and its total
sameness.py  whether the two sides are one program
gate.py      the CI gate (--fail-if-slower)
result.py    the record and its JSON (docs/diff.schema.json)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nsdiag.analysis.diff.by_change import ChangeOutcome, outcomes, prediction_check
from nsdiag.analysis.diff.findings import compare_findings
from nsdiag.analysis.diff.gate import DEFAULT_SHARE_PCT, Gate, check
from nsdiag.analysis.diff.kernels import KernelMatch, match_kernels
from nsdiag.analysis.diff.result import SCHEMA, Diff, region_change
from nsdiag.analysis.diff.sameness import program_warnings
from nsdiag.analysis.diff.side import Side, build
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.model.session import Session

Input = tuple[tuple[str, ...], Session, Diagnosis]  # its sources, its session, its diagnosis


def compare(
    before: Input,
    after: Input,
    before_runs: Sequence[Input] = (),
    after_runs: Sequence[Input] = (),
) -> Diff:
    """Each side: the run compared in full (kernels, findings), and further runs of the same
    program whose region and kernel times measure the run-to-run noise."""
    b = _with_runs(build("before", *before), before_runs)
    a = _with_runs(build("after", *after), after_runs)
    matches = match_kernels(b, a)
    findings, made = compare_findings(b, a, matches)
    region = region_change(b, a)
    rows = outcomes(b, findings, made, matches, -region.change_ns)
    return Diff(
        b, a, region, matches, findings, prediction_check(rows, -region.change_ns), changes=made,
        by_change=rows,
        warnings=program_warnings(b, a, matches),
    )  # fmt: skip


def _with_runs(side: Side, runs: Sequence[Input]) -> Side:
    extra = tuple(build(side.label, *run).runs[0] for run in runs)
    return replace(side, extra_runs=extra) if extra else side


def with_gate(
    diff: Diff,
    threshold_pct: float,
    share_pct: float = DEFAULT_SHARE_PCT,
    noise_pct: float | None = None,
) -> Diff:
    """The diff with the CI gate's checks (--fail-if-slower, --gate-share, --run-noise)."""
    runs = (diff.before.runs, diff.after.runs)
    return replace(diff, gate=check(runs, diff.matches, threshold_pct, share_pct, noise_pct))


__all__ = [
    "DEFAULT_SHARE_PCT",
    "SCHEMA",
    "ChangeOutcome",
    "Diff",
    "Gate",
    "Input",
    "KernelMatch",
    "Side",
    "compare",
    "with_gate",
]
