"""Findings of BEFORE and AFTER paired by rule and scope: resolved, persisting, changed, new;
and for each resolved one, its predicted saving next to the measured change.

A finding's scope is the kernel matches its kernels belong to (a kernel finding's kernel; a
program finding's fusion chain, conversion kernels or named kernel) and, for program findings,
its NVTX range. Findings of one rule in one scope pair up most-saving first; what is left of
BEFORE is resolved (or unchecked, where AFTER cannot tell), what is left of AFTER is new. A
pair whose saving moved by more than CHANGED has changed; where it shrank, the drop is what the
change was expected to save (the DataLoader's idle gaps shrink, they do not vanish).

The measured change of a finding with kernels is their matches' time before minus after; of a
finding with none (idle gaps, copies, launch overhead) the region's median iteration before
minus after. Findings whose kernels a larger resolved finding already covers are shown but not
added to the total, so the total compares one prediction per piece of time with the region's
measured change.

A finding that no longer fires counts only where AFTER shows its change made (evidence.py: the
precision changed for a precision change, the shape for a shape change, graphs replayed for a
CUDA graph...): a kernel's findings resolve too when a graph splits it into others.

Where every finding (with an estimate) of one of BEFORE's changes (analysis/changes.py) was
resolved and made, the change was made: the total counts the change's saving (marginal: after
the changes ranked above it, so changes that share kernels do not count them twice; before the
region's cap, since a side's iterations are timed by the GPU where it runs behind the host)
instead of its findings', and the change is checked against the time its findings' kernels (or
the region) lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from nsdiag.analysis.diff import evidence
from nsdiag.analysis.diff.evidence import MADE, Evidence
from nsdiag.analysis.diff.kernels import LABELS, KernelMatch
from nsdiag.analysis.diff.side import Side
from nsdiag.analysis.records.changes import Change
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.records.findings import Finding
from nsdiag.model.names import normalized

STATUSES = ("resolved", "unchecked", "persists", "changed", "new")
CHANGED = 0.2  # a persisting finding whose saving moved by more than this share has changed


@dataclass(frozen=True)
class Scoped:
    """A finding of one side with the kernel matches it is about."""

    finding: Finding
    kernel: KernelDiagnosis | None  # for kernel findings
    matches: frozenset[int]

    @property
    def key(self) -> tuple[object, ...]:
        kind = "kernel" if self.kernel is not None else "program"
        return (kind, self.finding.rule, self.finding.range, self.matches)


@dataclass(frozen=True)
class FindingChange:
    status: str  # one of STATUSES
    before: Scoped | None
    after: Scoped | None
    predicted_ns: float | None  # BEFORE's saving per iteration (None: no estimate)
    after_saved_ns: float | None  # AFTER's saving per iteration, where it still fires
    measured_ns: float | None  # time saved per iteration on its scope (resolved findings)
    measured_on: str  # "its kernels" | "the region" | ""
    how: str  # why resolved or unchecked
    counted: bool = False  # in the prediction check's total (itself, or with its change)
    shared: int = 0  # findings measured on the same region change (ratio only for the total)
    change: str | None = None  # the key of the change it belongs to (BEFORE's; AFTER's if new)
    evidence: Evidence | None = None  # BEFORE's findings: whether AFTER shows its change made

    @property
    def made(self) -> bool:
        """AFTER shows its change made (evidence.py): only these count in the check."""
        return self.evidence is not None and self.evidence.status == MADE

    @property
    def finding(self) -> Finding:
        scoped = self.before or self.after
        assert scoped is not None
        return scoped.finding

    @property
    def scope(self) -> str:
        scoped = self.before or self.after
        return "kernel" if scoped is not None and scoped.kernel is not None else "program"

    @property
    def expected_ns(self) -> float | None:
        """The saving the change should have brought: a resolved finding's whole prediction, a
        changed one's drop (BEFORE's saving minus what AFTER still predicts)."""
        if self.status == "resolved":
            return self.predicted_ns
        if self.status == "changed" and self.predicted_ns and self.after_saved_ns is not None:
            drop = self.predicted_ns - self.after_saved_ns
            return drop if drop > 0 else None
        return None

    @property
    def ratio(self) -> float | None:
        expected = self.expected_ns
        if self.measured_ns is None or not expected or self.shared > 1:
            return None
        return self.measured_ns / expected


@dataclass(frozen=True)
class ChangeCheck:
    """A change of BEFORE whose findings were all resolved: its saving (per iteration,
    marginal) against the time its findings' kernels, or the region, lost."""

    change: Change
    findings: int  # its findings in the comparison
    predicted_ns: float | None  # the change's marginal saving
    summed_ns: float | None  # its findings' own predictions added up
    measured_ns: float | None
    measured_on: str  # "its kernels" | "the region" | ""
    matches: frozenset[int] = frozenset()
    shared: int = 0  # checks measured on the same change (ratio only for the total)

    @property
    def ratio(self) -> float | None:
        if self.measured_ns is None or not self.predicted_ns or self.shared > 1:
            return None
        return self.measured_ns / self.predicted_ns


@dataclass(frozen=True)
class PredictionCheck:
    """The savings of BEFORE's changes that AFTER shows made (by_change.prediction_check: the
    table's counted rows added up) against the region's measured change (per iteration)."""

    predicted_ns: float
    measured_ns: float
    findings: int  # their findings AFTER shows made
    changes: int = 0  # the changes counted (made, or partly made), one row each

    @property
    def ratio(self) -> float | None:
        return self.measured_ns / self.predicted_ns if self.predicted_ns else None


def compare_findings(
    before: Side, after: Side, matches: Sequence[KernelMatch]
) -> tuple[tuple[FindingChange, ...], tuple[ChangeCheck, ...]]:
    owner_b, owner_a = _owners(matches, "before"), _owners(matches, "after")
    old = _grouped(_scoped(before, owner_b))
    new = _grouped(_scoped(after, owner_a))
    by_id = {m.id: m for m in matches}
    region_change = before.region_time.median - after.region_time.median
    changes: list[FindingChange] = []
    left_old: list[Scoped] = []
    left_new: list[Scoped] = []
    for key in list(old) + [k for k in new if k not in old]:
        olds, news = old.get(key, []), new.get(key, [])
        for b, a in zip(olds, news, strict=False):
            changes.append(_persisting(b, a, before, after, by_id, region_change))
        left_old += olds[len(news) :]
        left_new += news[len(olds) :]
    # A program finding whose kernels were renamed (channels_last picks other batch-norm
    # kernels) is still the same finding in the same NVTX range.
    loose_old = _grouped([b for b in left_old if b.kernel is None], loose=True)
    loose_new = _grouped([a for a in left_new if a.kernel is None], loose=True)
    paired: set[int] = set()
    for key, olds in loose_old.items():
        for b, a in zip(olds, loose_new.get(key, []), strict=False):
            changes.append(_persisting(b, a, before, after, by_id, region_change))
            paired |= {id(b), id(a)}
    for b in left_old:
        if id(b) not in paired:
            changes.append(_gone(b, before, after, by_id, region_change))
    for a in left_new:
        if id(a) not in paired:
            saved = after.per_iteration(a.finding.saved_ns)
            changes.append(FindingChange("new", None, a, None, saved, None, "", ""))
    changes = _with_evidence(
        _keyed(changes, before.diagnosis, after.diagnosis), before, after, by_id
    )
    made = _made(changes, before, by_id, region_change)
    changes = _shared(_counted(changes, {m.change.key: m for m in made}))
    made = _shared_made(made, changes)
    changes.sort(
        key=lambda c: (STATUSES.index(c.status), -(c.predicted_ns or c.after_saved_ns or 0))
    )
    return tuple(changes), tuple(made)


def _with_evidence(
    changes: list[FindingChange], before: Side, after: Side, matches: Mapping[int, KernelMatch]
) -> list[FindingChange]:
    """Each finding of BEFORE with what AFTER shows of its change (evidence.py)."""
    by_key = {c.key: c for c in before.diagnosis.changes}
    out = []
    for c in changes:
        if c.before is None:
            out.append(c)
            continue
        scope = c.before.matches
        rechecked = any(k.diagnosis is not None for i in scope for k in matches[i].after)
        found = evidence.of_finding(
            by_key.get(c.change or ""), c.status, c.finding.cause, _kernel_name(c.before),
            scope, matches, before, after, rechecked, _shrink(c),
        )  # fmt: skip
        out.append(replace(c, evidence=found))
    return out


def _shrink(c: FindingChange) -> float | None:
    """A changed finding's drop as a share of BEFORE's saving (None: no estimate)."""
    if c.status != "changed" or not c.predicted_ns or c.after_saved_ns is None:
        return None
    return (c.predicted_ns - c.after_saved_ns) / c.predicted_ns


def _kernel_name(scoped: Scoped) -> str | None:
    k = scoped.kernel
    return None if k is None else (k.demangled or k.name)


def _owners_of(diagnosis: Diagnosis) -> dict[int, Change]:
    """Finding (by identity) -> the change it belongs to."""
    return {id(f): c for c in diagnosis.changes for f in c.findings}


def _keyed(
    changes: list[FindingChange], before: Diagnosis, after: Diagnosis
) -> list[FindingChange]:
    """Each finding with the key of its change (BEFORE's; AFTER's for a new finding)."""
    owner_b, owner_a = _owners_of(before), _owners_of(after)
    out = []
    for c in changes:
        scoped = c.before or c.after
        assert scoped is not None
        owner = (owner_b if c.before is not None else owner_a).get(id(scoped.finding))
        out.append(replace(c, change=owner.key) if owner is not None else c)
    return out


def _made(
    changes: list[FindingChange],
    before: Side,
    matches: Mapping[int, KernelMatch],
    region_change: float,
) -> list[ChangeCheck]:
    """BEFORE's changes whose findings with an estimate were all resolved, most saving first."""
    by_key = {c.key: c for c in before.diagnosis.changes}
    grouped: dict[str, list[FindingChange]] = {}
    for c in changes:
        if c.before is not None and c.change is not None:
            grouped.setdefault(c.change, []).append(c)
    out = []
    for key, group in grouped.items():
        estimated = [c for c in group if c.predicted_ns is not None]
        change = by_key[key]
        if not estimated or change.uncapped_ns is None:
            continue
        if any(c.status != "resolved" or not c.made for c in estimated):
            continue
        measured, on, scope = measured_change(estimated, matches, region_change)
        # Before the region's cap: the diff times a host loop that runs ahead of the GPU by the
        # GPU (side.py), where the diagnosis's region is the host's shorter window.
        predicted = before.per_iteration(change.uncapped_ns)
        summed = before.per_iteration(sum(c.finding.saved_ns or 0.0 for c in estimated))
        out.append(ChangeCheck(change, len(group), predicted, summed, measured, on, scope))
    return sorted(out, key=lambda m: -(m.predicted_ns or 0.0))


def measured_change(
    estimated: list[FindingChange], matches: Mapping[int, KernelMatch], region_change: float
) -> tuple[float | None, str, frozenset[int]]:
    """Where a change's saving shows: its estimated findings' kernel matches when each has
    some; the region when the others are about no kernel (idle time, copies: a CUDA graph's
    saving is the gaps between its kernels, not their time); else nowhere."""
    scoped = [c.before for c in estimated if c.before is not None]
    scope: frozenset[int] = frozenset().union(*(s.matches for s in scoped))
    if scoped and all(s.matches for s in scoped):
        return sum(-matches[i].change_ns for i in scope), "its kernels", scope
    if all(s.matches or s.kernel is None for s in scoped):
        return region_change, "the region", frozenset()
    return None, "", scope


def _shared_made(made: list[ChangeCheck], changes: list[FindingChange]) -> list[ChangeCheck]:
    """As `_shared`, for the changes: one whose measured change overlaps another counted
    one's (the region's, or a kernel match) shows no ratio of its own."""
    keys = {m.change.key for m in made}
    others: list[tuple[str, frozenset[int]]] = [(m.measured_on, m.matches) for m in made]
    others += [
        (c.measured_on, c.before.matches)
        for c in changes
        if c.counted and c.change not in keys and c.before is not None
    ]

    def count(m: ChangeCheck) -> int:
        return sum(
            (on == m.measured_on == "the region") or bool(scope & m.matches) for on, scope in others
        )

    return [replace(m, shared=count(m)) if count(m) > 1 else m for m in made]


def _owners(matches: Sequence[KernelMatch], side: str) -> dict[int, int]:
    """Kernel index (on one side) -> the match it belongs to."""
    return {k.index: m.id for m in matches for k in (m.before if side == "before" else m.after)}


def _scoped(side: Side, owner: Mapping[int, int]) -> list[Scoped]:
    by_diagnosis: dict[int, set[int]] = {}
    by_name: dict[str, set[int]] = {}
    for k in side.kernels:
        if k.diagnosis is not None:
            by_diagnosis.setdefault(k.diagnosis.id, set()).add(owner[k.index])
        by_name.setdefault(normalized(k.name), set()).add(owner[k.index])
    d = side.diagnosis
    out = [
        Scoped(f, k, frozenset(by_diagnosis.get(k.id, set())))
        for k in d.kernels
        for f in k.findings
    ]
    for f in d.program_findings:
        named: set[int] = set()
        for name in f.named_kernels:
            named |= by_name.get(normalized(name), set())
        out.append(Scoped(f, None, frozenset(named)))
    return out


def _grouped(scoped: list[Scoped], loose: bool = False) -> dict[tuple[object, ...], list[Scoped]]:
    """By scope (rule, range, kernel matches); `loose`: by rule and range only. Most saving
    first."""
    out: dict[tuple[object, ...], list[Scoped]] = {}
    for s in sorted(scoped, key=lambda s: s.finding.rank_key):
        out.setdefault(s.key[:3] if loose else s.key, []).append(s)
    return out


def _persisting(
    b: Scoped,
    a: Scoped,
    before: Side,
    after: Side,
    matches: Mapping[int, KernelMatch],
    region_change: float,
) -> FindingChange:
    was = before.per_iteration(b.finding.saved_ns)
    now = after.per_iteration(a.finding.saved_ns)
    moved = was is not None and now is not None and abs(now - was) > CHANGED * max(abs(was), 1.0)
    measured, on = _measured(b, matches, region_change)
    status = "changed" if moved else "persists"
    return FindingChange(status, b, a, was, now, measured, on, "")


def _measured(
    b: Scoped, matches: Mapping[int, KernelMatch], region_change: float
) -> tuple[float | None, str]:
    """Time saved per iteration on the finding's scope: its kernels' matches, or the region
    for a finding about no kernel in particular."""
    if b.matches:
        return sum(-matches[i].change_ns for i in b.matches), "its kernels"
    if b.kernel is not None:
        return None, ""
    return region_change, "the region"


def _gone(
    b: Scoped,
    before: Side,
    after: Side,
    matches: Mapping[int, KernelMatch],
    region_change: float,
) -> FindingChange:
    predicted = before.per_iteration(b.finding.saved_ns)
    status, how = _why_gone(b, after, matches)
    measured, on = _measured(b, matches, region_change)
    return FindingChange(status, b, None, predicted, None, measured, on, how)


def _why_gone(b: Scoped, after: Side, matches: Mapping[int, KernelMatch]) -> tuple[str, str]:
    """Resolved, or unchecked where AFTER cannot tell: its kernels still run and AFTER has no
    Nsight Compute metrics for them (kernel rules, and program rules such as the layout
    conversions' sector check, read those metrics)."""
    skipped = [s.reason for s in after.diagnosis.skipped_rules if s.rule == b.finding.rule]
    if skipped and b.kernel is None:
        return "unchecked", f"AFTER could not apply the rule ({skipped[0]})"
    if not b.matches:
        if b.kernel is not None:
            return "unchecked", "its kernel was not found in BEFORE's timeline"
        return "resolved", "the rule no longer fires"
    scope = [matches[i] for i in sorted(b.matches)]
    changed = [m for m in scope if not m.same_kernel]
    one = b.kernel is not None or len(scope) == 1
    what, runs, them = ("its kernel", "runs", "it") if one else ("its kernels", "run", "them")
    if changed:
        hows = ", ".join(dict.fromkeys(LABELS[m.method] for m in changed))
        return "resolved", f"{what} no longer {runs} as before: {hows}"
    if all(k.diagnosis is None for m in scope for k in m.after):
        return (
            "unchecked",
            f"{what} still {runs}, and AFTER has no Nsight Compute metrics for {them}",
        )
    return "resolved", f"the rule no longer fires on {what}"


def _shared(changes: list[FindingChange]) -> list[FindingChange]:
    """Where several findings' measured changes overlap (the region's, or one kernel match's:
    torch.compile regroups a whole layer's kernels), only their total says whether the
    estimates hold: such findings show no ratio of their own."""
    checked = [c for c in changes if c.expected_ns and c.before is not None]

    def overlaps(x: FindingChange, y: FindingChange) -> bool:
        assert x.before is not None and y.before is not None
        if x.measured_on == y.measured_on == "the region":
            return True
        return bool(x.before.matches & y.before.matches)

    counts = {id(c): sum(overlaps(c, o) for o in checked) for c in checked}
    return [replace(c, shared=counts[id(c)]) if counts.get(id(c), 0) > 1 else c for c in changes]


def _counted(
    changes: list[FindingChange], made: Mapping[str, ChangeCheck] | None = None
) -> list[FindingChange]:
    """The findings the prediction check adds up: those of BEFORE's changes made in full (each
    change counted once, for its marginal saving; they cover their kernels first), every other
    program finding that was resolved or shrank (the engine's program analyses estimate
    separate pieces of time), then, largest first, one kernel finding per kernel (a kernel's
    findings are alternative explanations of the same time) whose kernel matches no counted
    change or program finding already covers."""
    made = made or {}
    covered: set[int] = set()
    kernels_done: set[int] = set()
    out: dict[int, FindingChange] = {}
    for i, c in enumerate(changes):
        if c.change in made and c.before is not None:
            covered |= c.before.matches
            if c.before.kernel is not None:
                kernels_done.add(c.before.kernel.id)
            if c.expected_ns:
                out[i] = replace(c, counted=True)
    candidates = [
        i for i, c in enumerate(changes) if c.expected_ns and c.made and c.change not in made
    ]
    programs = [i for i in candidates if changes[i].scope == "program"]
    kernels = sorted(
        (i for i in candidates if changes[i].scope == "kernel"),
        key=lambda i: -(changes[i].expected_ns or 0.0),
    )
    for i in programs:
        scoped = changes[i].before
        assert scoped is not None
        covered |= scoped.matches
        out[i] = replace(changes[i], counted=True)
    for i in kernels:
        scoped = changes[i].before
        assert scoped is not None and scoped.kernel is not None
        if scoped.kernel.id in kernels_done or (scoped.matches and scoped.matches <= covered):
            continue
        kernels_done.add(scoped.kernel.id)
        out[i] = replace(changes[i], counted=True)
    return [out.get(i, c) for i, c in enumerate(changes)]
