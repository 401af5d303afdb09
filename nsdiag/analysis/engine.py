"""Run the diagnosis: the analysed region, per-signature verdicts, roofline, rule findings,
program findings, all in one currency (the time a fix saves in the region), and the changes
they group into, ranked by marginal saving."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from nsdiag.analysis.changes import group_changes
from nsdiag.analysis.kernel.derived import add_derived
from nsdiag.analysis.kernel.diagnose import KernelInputs, diagnose_kernel, matrix_references
from nsdiag.analysis.kernel.roofline import measured_dram_ceiling
from nsdiag.analysis.kernel.signatures import aggregate
from nsdiag.analysis.program.code import attribute
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.dispatch import needs_timeline, program_findings
from nsdiag.analysis.program.ranks import analyse_ranks, detailed_ranks, only_ranks
from nsdiag.analysis.program.timeline.view import TimelineView, prepare
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis, TimelineSummary
from nsdiag.analysis.records.findings import Finding, Skipped
from nsdiag.analysis.records.region import Region
from nsdiag.analysis.region.choose import choose_region
from nsdiag.analysis.region.scope import RegionKernels, restrict, weigh_by_region
from nsdiag.analysis.region.startup import summarise
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.analysis.ruleset import default_rules
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.meta import SessionMeta
from nsdiag.model.ranks import is_communication
from nsdiag.model.session import Session
from nsdiag.model.tables import records
from nsdiag.model.text_codes import factorize_text


def diagnose(
    session: Session, rules: Iterable[RuleSpec] | None = None, region: str = "auto"
) -> Diagnosis:
    """`region`: how to choose the analysed part of the timeline (analysis/region.py): `auto`,
    `all`, `nvtx:NAME` or `START:END` in ms."""
    rules = list(rules) if rules is not None else list(default_rules())
    kernel_rules = [r for r in rules if r.scope == "kernel"]
    program_rules = [r for r in rules if r.scope == "program"]
    chosen = (
        choose_region(session.timeline, session.api_calls, session.nvtx_ranges, region)
        if session.has_timeline()
        else None
    )
    scoped = restrict(session, chosen) if chosen is not None else session
    # one block per dtype: read from CSV, the kernels table has a block per column (150), and
    # each of the frame operations below pays per block
    measured = session.kernels.copy()
    profiled = (
        weigh_by_region(measured, scoped.timeline)
        if chosen is not None and session.has_kernels()
        else RegionKernels(measured, 0, False)
    )
    derived = (
        add_derived(_computation(profiled.kernels)) if session.has_kernels() else session.kernels
    )
    signatures = aggregate(derived) if session.has_kernels() else pd.DataFrame()
    total_ns = float(signatures["total_duration_ns"].sum()) if len(signatures) else 0.0
    wall_ns = float(chosen.wall_ns) if chosen is not None else total_ns
    ceiling = measured_dram_ceiling(derived) if session.has_kernels() else None
    inputs = KernelInputs(session, kernel_rules, total_ns, ceiling, wall_ns)
    rows = records(signatures)
    inputs = replace(inputs, references=matrix_references(rows, inputs))
    kernels = [diagnose_kernel(index, row, inputs) for index, row in enumerate(rows)]
    ranks = analyse_ranks(session, chosen) if session.has_timeline() else None
    scoped = only_ranks(scoped, detailed_ranks(ranks))  # many ranks: a few stand for all
    ctx = ProgramContext(
        session=scoped,
        derived=derived,
        kernels=tuple(kernels),
        total_gpu_time_ns=total_ns,
        timeline=_view(scoped, chosen) if needs_timeline(program_rules) else None,
        measured_dram_ceiling=ceiling,
        region=chosen,
        wall_ns=wall_ns,
        ranks=ranks,
        rules=tuple(rules),
    )
    program, program_skips = program_findings(ctx, program_rules)
    skipped = [s for k in kernels for s in k.skipped] + program_skips
    return Diagnosis(
        device=dict(session.meta.device or {}),
        total_gpu_time_ns=total_ns,
        kernels=tuple(kernels),
        program_findings=tuple(program),
        skipped_rules=tuple(_dedupe(skipped)),
        meta={
            "sources": [s.to_json() for s in session.meta.sources],
            "kernel_launches": len(session.kernels),
            **_provenance(session.meta),
        },
        measured_dram_ceiling=ceiling,
        timeline=_timeline_summary(session.timeline) if session.has_timeline() else None,
        region=chosen,
        startup=summarise(chosen, session.api_calls) if chosen is not None else None,
        wall_ns=wall_ns,
        kernels_outside_region=profiled.outside,
        ranks=ranks,
        warnings=session.meta.warnings,
        changes=attribute(
            group_changes(
                kernels,
                program,
                wall_ns,
                ranks,
                _range_times(ctx, program),
                _convolutions(ctx, kernels),
            ),
            ctx,
        ),
    )


def _range_times(ctx: ProgramContext, program: Sequence[Finding]) -> dict[int, dict[str, float]]:
    """Each profiled signature's time per NVTX range, from the launch sequence the fusion
    analysis read (only where a fusion chain needs it: a chain takes from its ranges' launches)."""
    if not any(f.chain for f in program):
        return {}
    launches = ctx.launches
    if not len(launches):
        return {}
    frame = pd.DataFrame(
        {
            "id": launches["kernel_id"].to_numpy("float64"),  # the launch sequence keyed them
            "range": launches["range"].astype(str),
            "duration_ns": pd.to_numeric(launches["duration_ns"], errors="coerce").fillna(0.0),
        }
    ).dropna(subset=["id"])
    sums = frame.groupby(["id", "range"])["duration_ns"].sum()
    out: dict[int, dict[str, float]] = {}
    for (kid, rng), ns in zip(sums.index.tolist(), sums.tolist(), strict=True):
        out.setdefault(int(kid), {})[str(rng)] = float(ns)
    return out


def _convolutions(ctx: ProgramContext, kernels: Sequence[KernelDiagnosis]) -> bool:
    """Whether the program runs convolutions (its launches' names say so; the profiled kernels
    where there is no timeline)."""
    names = (
        ctx.session.timeline.loc[ctx.session.timeline["kind"] == "kernel", "name"]
        if ctx.session.has_timeline() and "kind" in ctx.session.timeline
        else pd.Series([k.demangled or k.name for k in kernels], dtype=object)
    )
    _, distinct = factorize_text(names)  # long template names: hashed once, not by pandas
    return any((parse_kernel_name(str(n)).kind or "").startswith("conv") for n in distinct)


def _computation(kernels: pd.DataFrame) -> pd.DataFrame:
    """The profiled kernels without communication kernels (NCCL): how long one runs depends on
    its peers, not on its own code, so it gets no verdict, roofline or kernel finding."""
    if "name" not in kernels or not len(kernels):
        return kernels
    return kernels[~is_communication(kernels["name"].astype(str))]


def _view(scoped: Session, region: Region | None) -> TimelineView | None:
    """The region's timeline prepared for the program analyses, its idle gaps clipped to the
    region's windows."""
    if not scoped.has_timeline():
        return None
    return prepare(scoped, region.windows if region is not None else None)


def _provenance(meta: SessionMeta) -> dict[str, Any]:
    """Tool versions and the profiled command, where the session knows them."""
    tools = {
        name: info.get("version")
        for name, info in (meta.tools or {}).items()
        if isinstance(info, Mapping) and info.get("version")
    }
    if meta.nsys_version and "nsys" not in tools:
        tools["nsys"] = meta.nsys_version
    out: dict[str, Any] = {"tools": tools} if tools else {}
    if meta.command:
        out["command"] = (
            " ".join(map(str, meta.command))
            if isinstance(meta.command, tuple)
            else str(meta.command)
        )
    if meta.profiled_at:
        out["profiled_at"] = meta.profiled_at
    return out


def _timeline_summary(timeline: pd.DataFrame) -> TimelineSummary:
    """What the nsys timeline holds, for the summary line (counts and wall span per device)."""
    kinds = timeline["kind"].value_counts().to_dict()
    starts, ends = pd.to_numeric(timeline["start_ns"]), pd.to_numeric(timeline["end_ns"])
    span = float(ends.max() - starts.min()) if len(timeline) else 0.0
    return TimelineSummary({str(k): int(v) for k, v in kinds.items()}, span)


def _dedupe(skipped: Sequence[Skipped]) -> list[Skipped]:
    """One entry per (rule, reason); the kernels it applied to are counted in the reason."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for s in skipped:
        grouped.setdefault((s.rule, s.reason), []).append(s.kernel or "")
    return [
        Skipped(
            rule,
            reason if len(names) == 1 else f"{reason} ({len(names)} kernels)",
            names[0] or None,
        )
        for (rule, reason), names in grouped.items()
    ]
