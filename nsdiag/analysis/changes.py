"""Findings grouped into changes (what the user does), each with its marginal saving.

The ranked list answers "what do I change first?". A rule hit is evidence about one kernel or
one stretch of time; a change is what the user does about it. One change can fix many hits (TF32
fixes every fp32 GEMM) and several changes can claim the same time (a fusion chain and a rewrite
of one of its kernels), so findings are grouped by the change that fixes them and each change's
saving is marginal (analysis/marginal.py): what is left of the time it touches after the changes
ranked above it took theirs. The total never passes the region's wall time.

Cause -> change: each cause's record (records/causes.py, the table docs/diagnosis.md shows)
names the kind of change that fixes it, and the kind how it groups:
- switches and shapes (TF32 or bf16 autocast, padded dimensions, more rows, one layout, a CUDA
  graph, fused attention): one change across every kernel and range they fire on;
- kernel-local causes (memory, compute, occupancy, stall rules) -> `kernel-rewrite:<signature
  name>`, one change per kernel name, its rule hits combined;
- the other program causes -> one change per finding, `program:<rule>:<range or region>`;
- a cause the table does not know (a rule of the user's) -> one change per finding
  (`program:<rule>:<range>`, or `finding:<rule>:<kernel>` for a kernel finding).

What a change claims (the budgets of analysis/marginal.py):
- a kernel finding: its saving out of its kernel's time in the region, split over the NVTX
  ranges the kernel ran in (in proportion to its time there). One change's claims on one
  kernel do not add up: a kernel's rule hits are alternative explanations of the same lost
  time (a latency-bound kernel fires memory-latency, low-occupancy and a stall rule about the
  same idle cycles), so the change claims the largest, as `nsdiag diff`'s prediction check
  counts one finding per kernel;
- a fusion chain: its saving out of its kernels' time in the chain's ranges, split in
  proportion to it (a member with no profile gets a budget of its own); the layout
  conversions: out of the conversion kernels' time, wherever they ran;
- any other program finding: its own time (its `saved_ns`); in a distributed run the findings
  about time the GPUs wait (their cause's budget is `wait`) share one budget, the step above the
  ranks' mean computation (a late rank's idle gap and the others' wait for it are one sleep;
  evening out the ranks moves work, it does not remove it), and add up inside one change
  (different stretches).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nsdiag.analysis.marginal import EPS_NS, Budget, Budgets, Taken, walk
from nsdiag.analysis.records.applicability import LIBRARY_CHANGES, NO_CONVOLUTION_LAYOUT
from nsdiag.analysis.records.causes import (
    KERNEL,
    KERNELS_TIME,
    KINDS,
    PER_FINDING,
    PER_KERNEL,
    PROGRAM,
    SWITCH,
    WAIT,
    cause_of,
)
from nsdiag.analysis.records.changes import Change, Touch
from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.analysis.records.findings import Finding
from nsdiag.analysis.records.idioms import Idiom, idiom_named, joint_idiom, kernel_idiom
from nsdiag.analysis.records.ranks import RankAnalysis
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.kernel_owner import library_of
from nsdiag.model.names import normalized, short_names

TouchKey = tuple[str, str, int | None]  # (kind, name, kernel id)
REGION = Budget("region")  # the region's wall time, which every change draws on
WAITING = Budget("wait")  # a distributed run's wait, shared by the findings about it


# ------------------------------------------------------------------------------ grouping


@dataclass(frozen=True)
class _Claim:
    """What a finding asks of one budget (ns, as if it came first); None: no estimate."""

    resource: Budget
    want_ns: float | None
    touch: TouchKey
    rule: str


@dataclass
class _Draft:
    key: str
    kind: str
    title: str
    findings: list[Finding] = field(default_factory=list)
    claims: list[_Claim] = field(default_factory=list)
    fix: str = ""  # an idiom's fix (records/idioms.py); "": the leading finding's


@dataclass(frozen=True)
class _Kernels:
    """The profiled signatures' budgets: one per NVTX range each ran in, where the launch
    sequence says, else one."""

    parts: dict[int, dict[Budget, float]]  # kernel id -> {budget: ns}
    by_name: dict[str, list[KernelDiagnosis]]  # under both name forms, normalized()


def group_changes(
    kernels: Sequence[KernelDiagnosis],
    program_findings: Sequence[Finding],
    wall_ns: float,
    ranks: RankAnalysis | None = None,
    range_times: Mapping[int, Mapping[str, float]] | None = None,
    convolutions: bool = True,
) -> tuple[Change, ...]:
    """The diagnosis's findings as changes, ranked by marginal saving, no estimate last.
    `range_times`: each kernel's time per NVTX range (kernel id -> {range: ns}), where known;
    `convolutions`: whether the program runs any (one layout end to end needs them)."""
    sizes: dict[Budget, float] = {REGION: max(float(wall_ns), 0.0)}
    table = _kernel_budgets(kernels, range_times or {})
    for parts in table.parts.values():
        sizes.update(parts)
    wait = _wait_budget(ranks)
    if wait is not None:
        sizes[WAITING] = wait
    names = short_names(k.demangled or k.name for k in kernels)
    drafts: dict[str, _Draft] = {}
    causes = frozenset(f.cause for f in program_findings) | frozenset(
        f.cause for k in kernels for f in k.findings
    )
    for k in kernels:
        label = names.get(k.demangled or k.name, k.name)
        # a kernel an idiom recasts (one of its causes fires on it): its other kernel-local
        # findings explain the same lost time, and go to the idiom's change too
        idiom = next(
            (m for f in k.findings if (m := kernel_idiom(f.cause, k.demangled or k.name))), None
        )
        for f in k.findings:
            local = cause_of(f.cause, KERNEL).change == "kernel-rewrite"
            draft = (_idiom_draft(drafts, idiom) if local else None) or _draft_for(
                drafts, f, k.name, label, k.demangled, convolutions
            )
            draft.findings.append(f)
            draft.claims += _spread(table.parts[k.id], _want(f), ("kernel", k.name, k.id), f.rule)
    for i, f in enumerate(program_findings):
        idiom = joint_idiom(causes, f.cause) or (idiom_named(f.idiom) if f.idiom else None)
        draft = _idiom_draft(drafts, idiom) or _draft_for(
            drafts, f, None, "", convolutions=convolutions
        )
        draft.findings.append(f)
        draft.claims += _program_claims(i, f, table, sizes, wait is not None)
    budgets = Budgets(sizes, REGION)
    estimated = {k for k, d in drafts.items() if any(c.want_ns is not None for c in d.claims)}
    ranked = walk({k: _combined(drafts[k], budgets) for k in sorted(estimated)}, budgets)
    out = [_change(drafts[t.key], t, sizes[REGION]) for t in ranked]
    out += [
        _change(d, None, sizes[REGION]) for k, d in sorted(drafts.items()) if k not in estimated
    ]
    total = sum(c.saved_ns or 0.0 for c in out)
    if total > sizes[REGION] + EPS_NS:  # the walk caps every saving: this cannot happen
        raise AssertionError(f"changes save {total:.0f} ns, past the region's {wall_ns:.0f} ns")
    return tuple(out)


def _finite(value: float | None) -> float:
    return float(value) if value is not None and math.isfinite(value) else 0.0


def _want(f: Finding) -> float | None:
    return None if f.saved_ns is None or not math.isfinite(f.saved_ns) else max(f.saved_ns, 0.0)


def _kernel_budgets(
    kernels: Sequence[KernelDiagnosis], range_times: Mapping[int, Mapping[str, float]]
) -> _Kernels:
    """Each kernel's region time, split over its NVTX ranges in proportion to the launch
    sequence's time there (the parts add up to the kernel's time)."""
    parts: dict[int, dict[Budget, float]] = {}
    by_name: dict[str, list[KernelDiagnosis]] = {}
    for k in kernels:
        total = max(_finite(k.total_duration_ns), 0.0)
        times = {r: t for r, t in (range_times.get(k.id) or {}).items() if t > 0}
        seen = sum(times.values())
        if seen > 0:
            parts[k.id] = {Budget("kernel", k.id, r): total * t / seen for r, t in times.items()}
        else:
            parts[k.id] = {Budget("kernel", k.id): total}
        for name in dict.fromkeys(normalized(n) for n in (k.name, k.demangled) if n):
            by_name.setdefault(name, []).append(k)
    return _Kernels(parts, by_name)


def _spread(
    parts: Mapping[Budget, float], want: float | None, touch: TouchKey, rule: str
) -> list[_Claim]:
    """A saving on a kernel's time, claimed from its budgets in proportion to their size."""
    total = sum(parts.values())
    return [
        _Claim(res, None if want is None else (want * size / total if total > 0 else 0.0),
               touch, rule)
        for res, size in parts.items()
    ]  # fmt: skip


def _wait_budget(ranks: RankAnalysis | None) -> float | None:
    """A distributed run's waiting time: the step above the ranks' mean computation (what each
    would compute were the work even: balancing the ranks moves work, it does not remove it),
    over the iterations (None: one rank, or no rank analysis)."""
    if ranks is None or len(ranks.steps) < 2:
        return None
    step = max(s.wall_ns for s in ranks.steps)
    even = sum(s.compute_ns for s in ranks.steps) / len(ranks.steps)
    return max(step - even, 0.0) * max(ranks.iterations, 1)


def _draft_for(
    drafts: dict[str, _Draft],
    f: Finding,
    kernel: str | None,
    label: str,
    demangled: str = "",
    convolutions: bool = True,
) -> _Draft:
    """The change a finding belongs to, new or already drafted, in what the user controls
    (records/applicability.py: a library's kernel is not rewritten; one layout end to end needs
    convolutions)."""
    fix = ""
    kind_name = cause_of(f.cause, PROGRAM if kernel is None else KERNEL).change
    kind = KINDS.get(kind_name)
    if kind is not None and kind.group == SWITCH:
        key, title = kind.key, kind.title
    elif kind is not None and kind.group == PER_KERNEL and kernel is not None:
        key, title = f"{kind.key}:{kernel}", kind.title.format(kernel=label)
        library = LIBRARY_CHANGES.get(library_of(demangled or kernel) or "")
        if library is not None:  # not the user's kernel: what they control of it
            title, fix = library[0].format(kernel=label), library[1]
    else:  # one change per finding
        own = kind is not None and kind.group == PER_FINDING
        where = f" in NVTX range {f.range}" if f.range else ""
        if kernel is not None:
            key, title = _unique(f"finding:{f.rule}:{kernel}", drafts), f"{f.title} ({label})"
        else:
            key = _unique(f"program:{f.rule}:{f.range or 'region'}", drafts)
            n = len(f.named_kernels)
            title = kind.title.format(n=n, where=where) if own and kind else f"{f.title}{where}"
        kind_name = kind_name if own else PER_FINDING
    if kind_name == "channels-last" and not convolutions:
        title, fix = NO_CONVOLUTION_LAYOUT
    if key not in drafts:
        drafts[key] = _Draft(key, kind_name, title, fix=fix)
    return drafts[key]


def _idiom_draft(drafts: dict[str, _Draft], idiom: Idiom | None) -> _Draft | None:
    """The change of a PyTorch idiom (records/idioms.py): one across the findings it recasts,
    with the idiom's title and fix."""
    if idiom is None:
        return None
    if idiom.key not in drafts:
        drafts[idiom.key] = _Draft(idiom.key, idiom.key, idiom.title, fix=idiom.fix)
    return drafts[idiom.key]


def _unique(base: str, taken: Mapping[str, object]) -> str:
    if base not in taken:
        return base
    n = 2
    while f"{base}#{n}" in taken:
        n += 1
    return f"{base}#{n}"


def _program_claims(
    index: int, f: Finding, table: _Kernels, sizes: dict[Budget, float], pooled: bool
) -> list[_Claim]:
    """Where a program finding's saving comes from, as its cause's record says: its kernels'
    time (a chain, the conversions), the shared wait of a distributed run, or its own time."""
    want = _want(f)
    where: TouchKey = ("range", f.range, None) if f.range else ("program", "", None)
    budget = cause_of(f.cause, PROGRAM).budget
    if budget == KERNELS_TIME and f.named_kernels:
        return _split_over_kernels(index, f, want, table, sizes)
    if pooled and budget == WAIT:
        return [_Claim(WAITING, want, where, f.rule)]
    own = Budget("own", finding=index)
    sizes[own] = want or 0.0
    return [_Claim(own, want, where, f.rule)]


def _chain_ranges(f: Finding) -> frozenset[str] | None:
    """The NVTX ranges a fusion chain ran in ("": outside any); None: the whole region (the
    layout conversions are counted wherever they ran)."""
    if not f.chain:
        return None
    return frozenset(f.ranges) if f.ranges else frozenset({""})


def _split_over_kernels(
    index: int, f: Finding, want: float | None, table: _Kernels, sizes: dict[Budget, float]
) -> list[_Claim]:
    """A chain's (or the conversions') saving split over its kernels in proportion to their
    time in the chain's ranges; a kernel with no profile weighs as the mean profiled one and
    has a budget of its own (nothing else can claim it)."""
    ranges = _chain_ranges(f)
    members: list[tuple[TouchKey, dict[Budget, float]]] = []
    missing: list[str] = []
    seen: set[int] = set()
    for name in f.named_kernels:
        found = table.by_name.get(normalized(name), [])
        for k in (k for k in found if k.id not in seen):
            seen.add(k.id)
            parts = table.parts[k.id]
            inside = {b: s for b, s in parts.items() if b.range in (ranges or ())}
            scoped = dict(parts) if ranges is None else inside
            members.append((("kernel", k.name, k.id), scoped or dict(parts)))
        if not found and name not in missing:
            missing.append(name)
    weights = [sum(parts.values()) for _, parts in members]
    mean = sum(weights) / len(weights) if weights and sum(weights) > 0 else 1.0
    members += [
        (("kernel", n, None), {Budget("own", finding=index, member=j): mean})
        for j, n in enumerate(missing)
    ]
    total = sum(sum(parts.values()) for _, parts in members) or 1.0
    claims = []
    for touch, parts in members:
        for res, size in parts.items():
            part = None if want is None else want * size / total
            if res.kind == "own":
                sizes[res] = part or 0.0
            claims.append(_Claim(res, part, touch, f.rule))
    return claims


# ------------------------------------------------------------------------------ the records


def _combined(draft: _Draft, budgets: Budgets) -> dict[Budget, float]:
    """The change's claim on each budget: on kernel time the largest (its rule hits there are
    alternatives), on other time the sum (different stretches), each at most the budget."""
    out: dict[Budget, float] = {}
    for c in draft.claims:
        if c.want_ns is None:
            continue
        if c.resource.shrinks:
            out[c.resource] = max(out.get(c.resource, 0.0), c.want_ns)
        else:
            out[c.resource] = out.get(c.resource, 0.0) + c.want_ns
    return {r: min(w, budgets.size.get(r, 0.0)) for r, w in out.items()}


def _change(draft: _Draft, taken: Taken | None, region_ns: float) -> Change:
    findings = sorted(draft.findings, key=lambda f: f.rank_key)
    lead = findings[0]
    saved = taken.saved_ns if taken is not None else None
    return Change(
        key=draft.key,
        kind=draft.kind,
        title=draft.title,
        fix=draft.fix or lead.fix,
        findings=tuple(findings),
        touches=_touches(draft, taken.takes if taken is not None else {}),
        summed_ns=taken.summed_ns if taken is not None else None,
        saved_ns=saved,
        share=None if saved is None else (min(saved / region_ns, 1.0) if region_ns > 0 else 0.0),
        estimate=lead.estimate if saved is not None else "none",
        after=taken.after if taken is not None else (),
        uncapped_ns=taken.uncapped_ns if taken is not None else None,
    )


def _touches(draft: _Draft, takes: Mapping[Budget, float]) -> tuple[Touch, ...]:
    """One entry per kernel or range with what the change saves there; a budget several of its
    touches claim (a shared wait) is divided in proportion to their claims."""
    wants: dict[Budget, dict[TouchKey, float]] = {}
    rules: dict[TouchKey, list[str]] = {}
    estimated: set[TouchKey] = set()
    for c in draft.claims:
        rules.setdefault(c.touch, []).append(c.rule)
        by_touch = wants.setdefault(c.resource, {})
        by_touch[c.touch] = max(by_touch.get(c.touch, 0.0), c.want_ns or 0.0)
        if c.want_ns is not None:
            estimated.add(c.touch)
    saved: dict[TouchKey, float] = {}
    for res, by_touch in wants.items():
        every = sum(by_touch.values())
        for touch, want in by_touch.items():
            share = want / every if every > 0 else 1.0 / len(by_touch)
            saved[touch] = saved.get(touch, 0.0) + takes.get(res, 0.0) * share
    touches = [
        Touch(
            kind=kind,
            name=name,
            saved_ns=saved.get((kind, name, kid)) if (kind, name, kid) in estimated else None,
            kernel_id=kid,
            kernel_kind=parse_kernel_name(name).kind if kind == "kernel" else None,
            rules=tuple(dict.fromkeys(rules[(kind, name, kid)])),
        )
        for kind, name, kid in rules
    ]
    return tuple(sorted(touches, key=lambda t: (-(t.saved_ns or -1.0), t.name)))
