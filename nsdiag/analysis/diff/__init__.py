"""`nsdiag diff`: two diagnosed input sets compared, BEFORE and AFTER a change.

side.py      each side as time per iteration (region and kernel signatures)
stats.py     spread over iterations; the Mann-Whitney test the gate uses
kernels.py   kernels matched across the sides, renames and fusions included
findings.py  findings resolved, persisting, changed and new; predicted against measured, per
             finding and per change of BEFORE made in full
gate.py      the CI gate (--fail-if-slower)
result.py    the record and its JSON (docs/diff.schema.json)
"""

from __future__ import annotations

from nsdiag.analysis.diagnosis import Diagnosis
from nsdiag.analysis.diff.findings import compare_findings
from nsdiag.analysis.diff.gate import DEFAULT_SHARE_PCT, Gate, check
from nsdiag.analysis.diff.kernels import KernelMatch, match_kernels
from nsdiag.analysis.diff.result import SCHEMA, Diff, region_change
from nsdiag.analysis.diff.side import Side, build
from nsdiag.model.session import Session


def compare(
    before: tuple[tuple[str, ...], Session, Diagnosis],
    after: tuple[tuple[str, ...], Session, Diagnosis],
) -> Diff:
    """Each side: (its sources, its session, its diagnosis)."""
    b = build("before", *before)
    a = build("after", *after)
    matches = match_kernels(b, a)
    findings, prediction, made = compare_findings(b, a, matches)
    return Diff(b, a, region_change(b, a), matches, findings, prediction, changes=made)


def with_gate(diff: Diff, threshold_pct: float, share_pct: float = DEFAULT_SHARE_PCT) -> Diff:
    """The diff with the CI gate's checks (--fail-if-slower, --gate-share)."""
    from dataclasses import replace

    gate = check((diff.region.before, diff.region.after), diff.matches, threshold_pct, share_pct)
    return replace(diff, gate=gate)


__all__ = [
    "DEFAULT_SHARE_PCT",
    "SCHEMA",
    "Diff",
    "Gate",
    "KernelMatch",
    "Side",
    "compare",
    "with_gate",
]
