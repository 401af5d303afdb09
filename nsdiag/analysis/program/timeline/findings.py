"""A timeline analysis's finding: its saving as a share of the analysed region's wall time (the
currency every finding shares), and of the wall time of its NVTX range, with the details every
timeline finding carries."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.record import ProgramAnalysis
from nsdiag.analysis.program.timeline.nvtx import UNNAMED, label, without_label
from nsdiag.analysis.program.timeline.view import TimelineView
from nsdiag.analysis.records.findings import Evidence, Finding, share_of
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model.session import Session


@dataclass(frozen=True)
class Draft:
    """What an analysis found on one device and NVTX range ("" outside ranges)."""

    device: int
    range: str
    saved_ns: float
    values: Mapping[str, Any]  # for the rule's templates, besides the range's (range_values)
    evidence: tuple[Evidence, ...]
    details: Mapping[str, Any]
    kernels: tuple[str, ...] = ()  # the kernels it is about (Finding.kernels)
    idiom: str = ""  # the program idiom it is (Finding.idiom)


def by_range(frame: pd.DataFrame) -> Iterator[tuple[int, str, pd.DataFrame]]:
    """The frame's rows per device and NVTX range, in order of appearance."""
    for key, group in frame.groupby(["device", "range"], sort=False):
        device, name = cast(tuple[int, str], key)
        yield int(device), str(name), group


Drafter = Callable[[int, str, pd.DataFrame, float], Draft | None]


def per_range(
    analysis: ProgramAnalysis,
    rule: RuleSpec,
    ctx: ProgramContext,
    frame: pd.DataFrame,
    saved_ns: Callable[[pd.DataFrame], float],
    draft: Drafter,
) -> list[Finding]:
    """A finding per device and NVTX range of `frame` whose saving reaches the rule's
    min_impact and that `draft` describes (it returns None for a range that is not a
    finding)."""
    min_impact = analysis.params_of(rule)["min_impact"]
    findings = []
    for device, name, group in by_range(frame):
        saved = saved_ns(group)
        if worth_reporting(ctx, saved, min_impact):
            found = draft(device, name, group, saved)
            if found is not None:
                findings.append(make_finding(analysis, rule, ctx, found))
    return findings


def peer_params(analysis: ProgramAnalysis, rules: Sequence[RuleSpec] = ()) -> dict[str, float]:
    """The thresholds of another analysis's rule among the rules applied, else that analysis's
    defaults (the overlap analysis reuses the pinned-copy model of pageable_memcpy)."""
    return next(
        (
            analysis.params_of(r)
            for r in rules
            if r.scope == "program" and r.analysis == analysis.name
        ),
        analysis.defaults,
    )


def share(ctx: ProgramContext, saved_ns: float, min_impact: float) -> Evidence:
    """The saving as a share of the region's wall time, next to the rule's min_impact."""
    return Evidence("impact", saved_ns / ctx.wall_ns, ">=", min_impact)


def worth_reporting(ctx: ProgramContext, saved_ns: float, min_impact: float) -> bool:
    """Whether the saving reaches the rule's min_impact share of the region's wall time."""
    return ctx.wall_ns > 0 and not saved_ns / ctx.wall_ns < min_impact


def range_wall_ns(session: Session, v: TimelineView, name: str, device: int) -> float:
    """Wall time of a range: its NVTX instances' total, or the device span for unnamed work."""
    nvtx = session.nvtx_ranges
    if name != UNNAMED and len(nvtx):
        total = float(nvtx.loc[nvtx["name"] == name, "duration_ns"].sum())
        if total > 0:
            return total
    start, end = v.spans.get(device, (0, 0))
    return float(end - start)


def range_values(draft: Draft, v: TimelineView | None = None) -> dict[str, Any]:
    """The template values every timeline finding has (record.RANGE_VALUES). Where the
    view's lanes are ranks, the device is the rank's and the label names the rank."""
    rank = v.rank_of(draft.device) if v is not None else None
    named = label(draft.range, v is None or _any_ranges(v))
    return {
        "range_label": named
        if rank is None
        else ", ".join(t for t in (f"rank {rank}", named) if t),
        "range": draft.range,
        "device": int(v.device_of(draft.device) if v is not None else draft.device),
        "saved_ms": draft.saved_ns / 1e6,
    }


def _any_ranges(v: TimelineView) -> bool:
    """Whether the program's own NVTX ranges hold any of the timeline's work."""
    if "range" not in v.acts:
        return False
    return any(r != UNNAMED for r in pd.unique(v.acts["range"].astype(object)))


def make_finding(
    analysis: ProgramAnalysis, rule: RuleSpec, ctx: ProgramContext, draft: Draft
) -> Finding:
    v = ctx.view
    message, fix = analysis.text(rule, {**range_values(draft, v), **draft.values})
    message = without_label(message)
    start, end = v.spans.get(draft.device, (0, 0))
    wall = range_wall_ns(ctx.session, v, draft.range, draft.device)
    rank = v.rank_of(draft.device)
    details = {
        "device": int(v.device_of(draft.device)),
        **({"rank": rank} if rank is not None else {}),
        "span_ns": v.total_span_ns,
        "device_span_ns": float(end - start),
        "range_wall_ns": wall,
        **draft.details,
    }
    return Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=share_of(draft.saved_ns, ctx.wall_ns),
        recoverable=min(draft.saved_ns / wall, 1.0) if wall else 0.0,
        message=message,
        fix=fix,
        impact_basis=rule.impact_basis,
        evidence=draft.evidence,
        ranges=(draft.range,) if draft.range else (),
        saved_ns=float(draft.saved_ns),
        details=details,
        estimate="timeline",
        kernels=draft.kernels,
        idiom=draft.idiom,
    )
