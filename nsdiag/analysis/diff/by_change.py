"""The prediction check as one row per change of BEFORE, in the order BEFORE's diagnosis ranks
them (analysis/changes.py): what the user did is a change (turn on bf16 autocast), not one
finding per kernel it touched. A change whose findings were all resolved and made (evidence.py)
is checked with its marginal saving (findings.ChangeCheck); one only partly made adds up its
made findings (resolved or shrunk), one per kernel; one not made, or that AFTER cannot tell,
shows its prediction and counts for nothing. The prediction check's total is these rows' sum
(`check`): the table and the summary line are one computation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from nsdiag.analysis.diff import evidence
from nsdiag.analysis.diff.findings import (
    ChangeCheck,
    FindingChange,
    PredictionCheck,
    measured_change,
)
from nsdiag.analysis.diff.kernels import KernelMatch
from nsdiag.analysis.diff.side import Side
from nsdiag.analysis.records.changes import Change


@dataclass(frozen=True)
class ChangeOutcome:
    """One change of BEFORE with a finding resolved or shrunk: predicted against measured."""

    rank: int  # 1: BEFORE's first change
    key: str
    title: str
    rules: tuple[str, ...]
    findings: int  # its findings in the comparison (BEFORE's)
    resolved: int  # of them resolved or shrunk
    status: str  # made | partly | not made | unclear (evidence.py)
    evidence: str  # what AFTER shows of it, in a few words
    predicted_ns: float | None  # per iteration: the change's marginal saving where made
    measured_ns: float | None
    measured_on: str  # "its kernels" | "the region" | ""
    matches: frozenset[int] = frozenset()
    shared: int = 0  # rows measured on the same time (>1: no ratio of its own)
    made_findings: int = 0  # of its resolved or shrunk findings, those AFTER shows made

    @property
    def made(self) -> bool:
        return self.status == evidence.MADE

    @property
    def counted(self) -> bool:
        """In the prediction check's total: made, or partly made."""
        return self.status in (evidence.MADE, "partly") and bool(self.predicted_ns)

    @property
    def ratio(self) -> float | None:
        if not self.counted or self.measured_ns is None or self.shared > 1:
            return None
        return self.measured_ns / self.predicted_ns if self.predicted_ns else None

    def to_json(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "key": self.key,
            "title": self.title,
            "rules": list(self.rules),
            "findings": self.findings,
            "resolved": self.resolved,
            "made": self.made,
            "status": self.status,
            "evidence": self.evidence,
            "counted": self.counted,
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
        # over all its findings: one still firing on an unchanged kernel is a part not made
        status, why = evidence.combined([c.evidence for c in group if c.evidence is not None])
        head = (rank, change.key, change.title, change.rules, len(group), len(gone), status, why)
        whole = checked.get(change.key)
        shown = [c for c in gone if c.made] if status in (evidence.MADE, "partly") else gone
        if whole is not None:
            row = ChangeOutcome(
                *head, whole.predicted_ns, whole.measured_ns, whole.measured_on, whole.matches,
                made_findings=len(shown),
            )  # fmt: skip
        else:
            counts = status in (evidence.MADE, "partly")
            estimated = _one_per_kernel(shown, lambda c: c.expected_ns)
            predicted = _made_part(before, change, group, estimated) if counts else None
            if not counts and estimated:
                predicted = sum(c.expected_ns or 0.0 for c in estimated)
            measured, on, scope = measured_change(estimated, by_id, region_change_ns)
            row = ChangeOutcome(
                *head, predicted, measured if estimated else None, on if estimated else "", scope,
                made_findings=len([c for c in gone if c.made]),
            )  # fmt: skip
        out.append(row)
    return tuple(_shared(out))


def _one_per_kernel(
    group: Sequence[FindingChange], saving: Callable[[FindingChange], float | None]
) -> list[FindingChange]:
    """A kernel's findings are alternatives (as _counted and analysis/changes.py count them):
    the one with the largest `saving` per kernel; every program finding."""
    best: dict[object, FindingChange] = {}
    for c in group:
        if not saving(c) or c.before is None:
            continue
        key = c.before.kernel.id if c.before.kernel is not None else id(c)
        if key not in best or (saving(c) or 0.0) > (saving(best[key]) or 0.0):
            best[key] = c
    return list(best.values())


def _made_part(
    before: Side, change: Change, group: Sequence[FindingChange], made: Sequence[FindingChange]
) -> float | None:
    """What the made part of a change predicted: its marginal saving times the share of its
    findings' savings that AFTER shows made (TF32 turned on: the GEMMs' part of the precision
    change, not the fp32 attention kernel's, which TF32 leaves as it was)."""
    part = sum(c.expected_ns or 0.0 for c in made)
    if not made or part <= 0:
        return None
    whole = before.per_iteration(change.uncapped_ns)
    every = sum(c.predicted_ns or 0.0 for c in _one_per_kernel(group, lambda c: c.predicted_ns))
    if whole is None or every <= 0:
        return part
    return whole * min(part / every, 1.0)


def prediction_check(
    rows: Sequence[ChangeOutcome], region_change_ns: float
) -> PredictionCheck | None:
    """The prediction check: the counted rows' predictions added up against the region's
    measured change (None: no row counted)."""
    counted = [r for r in rows if r.counted]
    if not counted:
        return None
    predicted = sum(r.predicted_ns or 0.0 for r in counted)
    findings = sum(r.made_findings for r in counted)
    return PredictionCheck(predicted, region_change_ns, findings, len(counted))


def _shared(rows: list[ChangeOutcome]) -> list[ChangeOutcome]:
    """Rows measured on the same time show no ratio of their own: every row measured on the
    region's change where several are; a row whose kernel matches a row ranked above it
    measured already (the kernels' time goes to the first change that claims it, as marginal
    savings do: bf16 autocast, ranked first, then the rewrite of one of its GEMMs)."""
    on_region = sum(r.measured_on == "the region" and r.counted for r in rows)
    out = []
    for i, r in enumerate(rows):
        if r.measured_on == "the region":
            count = on_region
        else:
            count = 1 + sum(
                bool(r.matches & o.matches) for o in rows[:i] if o.measured_on and o.counted
            )
        out.append(replace(r, shared=count) if r.measured_on and count > 1 else r)
    return out
