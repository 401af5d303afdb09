"""One kernel signature's diagnosis: verdict, roofline position, rule findings, ncu's opinion."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from nsdiag.analysis.kernel import roofline, verdict
from nsdiag.analysis.kernel.gemm_reference import (
    GemmReference,
    MatrixKernel,
    reference_for,
    references,
)
from nsdiag.analysis.kernel.namespace import KernelFacts, kernel_values
from nsdiag.analysis.kernel.ncu_stand_in import contradiction, ncu_finding, stand_in
from nsdiag.analysis.records.causes import KERNEL, cause_of
from nsdiag.analysis.records.diagnosis import KernelDiagnosis, NcuRuleResult
from nsdiag.analysis.records.findings import Finding, Skipped
from nsdiag.analysis.records.kernel import MeasuredCeiling, RooflinePosition
from nsdiag.analysis.rules.evaluate import evaluate_rule
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model.session import Session
from nsdiag.model.tables import records
from nsdiag.model.values import number


@dataclass(frozen=True)
class KernelInputs:
    """What every signature's diagnosis shares."""

    session: Session
    rules: Sequence[RuleSpec]  # kernel rules
    total_gpu_time_ns: float
    ceiling: MeasuredCeiling | None
    wall_ns: float  # the currency's denominator: the region's wall time, else the GPU time
    references: Mapping[str, GemmReference] = field(default_factory=dict)  # per precision

    @property
    def device(self) -> Mapping[str, Any]:
        return self.session.meta.device or {}

    @cached_property
    def ncu_advice(self) -> Mapping[int, tuple[NcuRuleResult, ...]]:
        """ncu's advice per launch id, the rule results table read once for every signature."""
        return ncu_advice_by_launch(self.session)


def place(row: Mapping[str, Any], inputs: KernelInputs) -> RooflinePosition:
    """The signature's roofline position (its typical launch, under this GPU's roofs)."""
    cc = inputs.device.get("cc")
    return roofline.position(
        row, inputs.ceiling, inputs.device.get("name"), str(cc) if cc else None
    )


def matrix_references(
    rows: Sequence[Mapping[str, Any]], inputs: KernelInputs
) -> dict[str, GemmReference]:
    """What the aligned matrix kernels among `rows` reach, per tensor precision
    (analysis/kernel/gemm_reference.py), for the gemm-misaligned estimate."""
    kernels = [
        MatrixKernel(
            str(r.get("demangled") or r["name"]), float(r["total_duration_ns"]), place(r, inputs)
        )
        for r in rows
    ]
    cc = inputs.device.get("cc")
    return references(kernels, str(cc) if cc else None, str(inputs.device.get("name") or ""))


def diagnose_kernel(index: int, row: Mapping[str, Any], inputs: KernelInputs) -> KernelDiagnosis:
    """`row` is the signature's row of the aggregated table (its typical launch)."""
    name = str(row["name"])
    v = verdict.classify(row)
    roof = place(row, inputs)
    total = inputs.total_gpu_time_ns
    share = row["total_duration_ns"] / total if total else math.nan
    cc = inputs.device.get("cc")
    facts = KernelFacts(
        row, v, roof, share, str(cc) if cc else None, reference_for(inputs.references, roof)
    )
    values = kernel_values(facts)
    time = (float(row["total_duration_ns"]), inputs.wall_ns)
    launch_ids = row["launch_ids"]
    ncu_rules = inputs.ncu_advice.get(int(launch_ids[0]), ()) if len(launch_ids) else ()
    findings, skipped = _apply(inputs.rules, values, name, time, ncu_rules)
    findings = _verdict_first(findings, v.limiter)
    return KernelDiagnosis(
        id=index,
        name=name,
        demangled=str(row.get("demangled") or row["name"]),
        launches=int(row["launches"]),
        total_duration_ns=float(row["total_duration_ns"]),
        time_share=share,
        grid=str(row.get("grid", "")),
        block=str(row.get("block", "")),
        bound=v.bound,
        limiter=v.limiter,
        verdict=verdict.sentence(name, v, roof.pct_of_roof),
        verdict_note=_join_notes(v.note, v.aside, roof.note, _duration_groups_note(row)),
        roofline=roof,
        metrics=_metrics(row),
        findings=findings,
        skipped=skipped,
        ncu_rules=ncu_rules,
        close_call=v.close_call,
    )


def _apply(
    rules: Sequence[RuleSpec],
    values: Mapping[str, Any],
    name: str,
    time: tuple[float, float],
    ncu_rules: Sequence[NcuRuleResult] = (),
) -> tuple[tuple[Finding, ...], tuple[Skipped, ...]]:
    """`time`: the kernel's time in the region and the region's wall time. A rule skipped for a
    missing metric takes the finding of the ncu rule that stands in for it, if the kernel has
    one (analysis/kernel/ncu_stand_in.py)."""
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for rule in rules:
        result = evaluate_rule(rule, values, *time)
        if isinstance(result, Finding):
            findings.append(result)
        elif isinstance(result, Skipped):
            note = Skipped(result.rule, result.reason, name)
            standing = stand_in(rule, ncu_rules)
            against = contradiction(rule, standing, values) if standing else None
            if standing is not None and against is not None:
                reason = f"{note.reason}; ncu's {standing.rule} left out: {against}"
                note = Skipped(note.rule, reason, name)
            elif standing is not None:
                found, note = ncu_finding(rule, note, standing, values, *time)
                findings.append(found)
            skipped.append(note)
    kept = _unsuperseded(findings)
    skipped += [
        Skipped(f.rule, f"superseded on this kernel by {by.rule} {by.cause}", name)
        for f, by in ((f, _superseder(f, findings)) for f in findings if f not in kept)
        if by is not None
    ]
    kept.sort(key=lambda f: f.rank_key)
    return tuple(kept), tuple(skipped)


def _superseder(f: Finding, findings: Sequence[Finding]) -> Finding | None:
    """The finding on the same kernel whose cause replaces this one's (records/causes.py)."""
    return next((g for g in findings if f.cause in cause_of(g.cause, KERNEL).supersedes), None)


def _unsuperseded(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if _superseder(f, findings) is None]


# The causes that explain a saturated limiter: at a roof its finding has no estimate (only fewer
# bytes or instructions help), yet it says more than a minor finding with a small estimate. DRAM
# has two: at the reachable ceiling (saturated) or short of it (underused, with the distance).
LIMITER_CAUSES: dict[str, tuple[str, ...]] = {
    "dram": ("dram-bandwidth-saturated", "dram-bandwidth-underused"),
    "l2": ("l2-bound",),
    "xu": ("special-function-heavy",),
    "fp64": ("fp64-heavy",),
    "fma": ("compute-pipe-saturated",),
    "alu": ("compute-pipe-saturated",),
    "fp16": ("compute-pipe-saturated",),
    "lsu": ("compute-pipe-saturated",),
}


SUBSTANTIAL = 0.1  # a finding that would recover this share of the kernel's time


def _verdict_first(findings: tuple[Finding, ...], limiter: str | None) -> tuple[Finding, ...]:
    """A kernel's findings in the order its card shows them: those that would recover a
    substantial share of its time (a deeper cause: uncoalesced access, spills, a tail), by the
    time they save; then the finding that explains the saturated limiter (no estimate at a
    roof); then the rest by the time they save, findings with no estimate last."""
    causes = LIMITER_CAUSES.get(limiter or "", ())

    def group(f: Finding) -> int:
        if f.recoverable is not None and f.recoverable >= SUBSTANTIAL:
            return 0
        return 1 if f.cause in causes else 2

    return tuple(sorted(findings, key=lambda f: (group(f), f.rank_key)))


def _metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's numbers (bools and the id aside). Most values are exactly float, int, str or
    None (records() gives native scalars): those are decided by their type alone, the rare
    others by isinstance (a row has hundreds of values, a diagnosis hundreds of rows)."""
    out: dict[str, float] = {}
    for k, val in row.items():
        kind = type(val)
        if kind is float or kind is int:
            number = True
        elif kind is str or val is None or kind is bool:
            number = False
        else:
            number = isinstance(val, (int, float)) and not isinstance(val, bool)
        if number and k != "id":
            out[str(k)] = float(val)
    return out


def ncu_advice_by_launch(session: Session) -> dict[int, tuple[NcuRuleResult, ...]]:
    """ncu's own optimisation advice (OPT and WRN results) per profiled launch, largest
    estimated speedup first: a signature shows its first launch's."""
    rules = session.rule_results
    if rules is None or rules.empty:
        return {}
    advice: dict[int, list[NcuRuleResult]] = {}
    for r in records(rules[rules["type"].isin(["OPT", "WRN"])]):
        launch = number(r["id"])
        if launch is None:
            continue
        advice.setdefault(int(launch), []).append(
            NcuRuleResult(
                rule=r["rule"],
                section=r["section"],
                type=r["type"],
                message=r["message"],
                speedup_type=r["speedup_type"] or None,
                speedup=number(r["speedup"]),
            )
        )
    return {i: tuple(sorted(out, key=lambda r: -(r.speedup or 0))) for i, out in advice.items()}


def _duration_groups_note(row: Mapping[str, Any]) -> str:
    """Say so when one signature's launches did different amounts of work (a GEMM reused for
    several K): its metrics mix the groups, or describe only the ones profiled."""
    groups = number(row.get("duration_groups"))
    profiled = number(row.get("duration_groups_profiled"))
    if groups is None or profiled is None or groups < 2:
        return ""
    if profiled < groups:
        return (
            f"its launches fall in {groups:.0f} duration groups (different work under one grid);"
            f" only {profiled:.0f} profiled, so this describes those launches alone"
        )
    return (
        f"its launches fall in {groups:.0f} duration groups (different work under one grid), "
        "weighted by GPU time"
    )


def _join_notes(*notes: str | None) -> str:
    return "; ".join(n for n in notes if n)
