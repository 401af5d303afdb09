"""The prediction check as one row per change of BEFORE, in the order BEFORE's diagnosis ranks
them (analysis/changes.py): what the user did is a change (turn on bf16 autocast), not one
finding per kernel it touched. A change whose findings were all resolved is checked with its
marginal saving (findings.ChangeCheck); one only partly made adds up its resolved and shrunk
findings, one per kernel, as the prediction check does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from nsdiag.analysis.diff.findings import ChangeCheck, FindingChange, measured_change
from nsdiag.analysis.diff.kernels import KernelMatch
from nsdiag.analysis.diff.side import Side


@dataclass(frozen=True)
class ChangeOutcome:
    """One change of BEFORE with a finding resolved or shrunk: predicted against measured."""

    rank: int  # 1: BEFORE's first change
    key: str
    title: str
    rules: tuple[str, ...]
    findings: int  # its findings in the comparison (BEFORE's)
    resolved: int  # of them resolved or shrunk
    made: bool  # every finding with an estimate resolved (every one, for a change with none)
    predicted_ns: float | None  # per iteration: the change's marginal saving where made
    measured_ns: float | None
    measured_on: str  # "its kernels" | "the region" | ""
    matches: frozenset[int] = frozenset()
    shared: int = 0  # rows measured on the same time (>1: no ratio of its own)

    @property
    def ratio(self) -> float | None:
        if self.measured_ns is None or not self.predicted_ns or self.shared > 1:
            return None
        return self.measured_ns / self.predicted_ns

    def to_json(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "key": self.key,
            "title": self.title,
            "rules": list(self.rules),
            "findings": self.findings,
            "resolved": self.resolved,
            "made": self.made,
            "predicted_ns": self.predicted_ns,
            "measured_ns": self.measured_ns,
            "measured_on": self.measured_on or None,
            "ratio": self.ratio,
            "measured_shared_by": self.shared,
            "kernel_matches": sorted(self.matches),
        }


def outcomes(
    before: Side,
    findings: Sequence[FindingChange],
    made: Sequence[ChangeCheck],
    matches: Sequence[KernelMatch],
    region_change_ns: float,
) -> tuple[ChangeOutcome, ...]:
    by_id = {m.id: m for m in matches}
    checked = {m.change.key: m for m in made}
    out = []
    for rank, change in enumerate(before.diagnosis.changes, 1):
        group = [c for c in findings if c.change == change.key and c.before is not None]
        gone = [c for c in group if c.status == "resolved" or c.expected_ns]
        if not gone:
            continue
        whole = checked.get(change.key)
        if whole is not None:
            row = ChangeOutcome(
                rank, change.key, change.title, change.rules, len(group), len(gone), True,
                whole.predicted_ns, whole.measured_ns, whole.measured_on, whole.matches,
            )  # fmt: skip
        else:
            made_all = all(c.status == "resolved" for c in group)
            estimated = [c for c in gone if c.counted and c.expected_ns]
            predicted = sum(c.expected_ns or 0.0 for c in estimated) if estimated else None
            measured, on, scope = measured_change(estimated, by_id, region_change_ns)
            row = ChangeOutcome(
                rank, change.key, change.title, change.rules, len(group), len(gone), made_all,
                predicted, measured if estimated else None, on if estimated else "", scope,
            )  # fmt: skip
        out.append(row)
    return tuple(_shared(out))


def _shared(rows: list[ChangeOutcome]) -> list[ChangeOutcome]:
    """Rows measured on the same time show no ratio of their own: every row measured on the
    region's change where several are; a row whose kernel matches a row ranked above it
    measured already (the kernels' time goes to the first change that claims it, as marginal
    savings do: bf16 autocast, ranked first, then the rewrite of one of its GEMMs)."""
    on_region = sum(r.measured_on == "the region" for r in rows)
    out = []
    for i, r in enumerate(rows):
        if r.measured_on == "the region":
            count = on_region
        else:
            count = 1 + sum(bool(r.matches & o.matches) for o in rows[:i] if o.measured_on)
        out.append(replace(r, shared=count) if r.measured_on and count > 1 else r)
    return out
