"""One kernel signature's diagnosis: verdict, roofline position, rule findings, ncu's opinion."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nsdiag.analysis import roofline, verdict
from nsdiag.analysis.diagnosis import Finding, KernelDiagnosis, NcuRuleResult, Skipped
from nsdiag.analysis.rule_context import KernelFacts, kernel_values
from nsdiag.analysis.rule_eval import evaluate_rule
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.model.session import Session
from nsdiag.model.tables import records
from nsdiag.model.values import number


@dataclass(frozen=True)
class KernelInputs:
    """What every signature's diagnosis shares."""

    session: Session
    rules: Sequence[RuleSpec]  # kernel rules
    total_gpu_time_ns: float
    ceiling: roofline.MeasuredCeiling | None


def diagnose_kernel(index: int, row: Mapping[str, Any], inputs: KernelInputs) -> KernelDiagnosis:
    """`row` is the signature's row of the aggregated table (its typical launch)."""
    name = str(row["name"])
    v = verdict.classify(row)
    roof = roofline.position(row, inputs.ceiling, inputs.session.meta.get("device", {}).get("name"))
    total = inputs.total_gpu_time_ns
    share = row["total_duration_ns"] / total if total else math.nan
    values = kernel_values(KernelFacts(row, v, roof, share))
    findings, skipped = _apply(inputs.rules, values, name)
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
        ncu_rules=ncu_rule_results(inputs.session, row["launch_ids"]),
        close_call=v.close_call,
    )


def _apply(
    rules: Sequence[RuleSpec], values: Mapping[str, Any], name: str
) -> tuple[tuple[Finding, ...], tuple[Skipped, ...]]:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for rule in rules:
        result = evaluate_rule(rule, values)
        if isinstance(result, Finding):
            findings.append(result)
        elif isinstance(result, Skipped):
            skipped.append(Skipped(result.rule, result.reason, name))
    findings.sort(key=lambda f: (-f.impact, f.rule))
    return tuple(findings), tuple(skipped)


def _metrics(row: Mapping[str, Any]) -> dict[str, float]:
    return {
        str(k): float(val)
        for k, val in row.items()
        if isinstance(val, (int, float)) and not isinstance(val, bool) and k != "id"
    }


def ncu_rule_results(session: Session, launch_ids: Sequence[int]) -> tuple[NcuRuleResult, ...]:
    """ncu's own optimisation advice (OPT and WRN results) for the signature's first launch,
    largest estimated speedup first."""
    rules = session.rule_results
    if rules is None or rules.empty or not len(launch_ids):
        return ()
    first = rules[rules["id"] == launch_ids[0]]
    first = first[first["type"].isin(["OPT", "WRN"])]
    out = [
        NcuRuleResult(
            rule=r["rule"],
            section=r["section"],
            type=r["type"],
            message=r["message"],
            speedup_type=r["speedup_type"] or None,
            speedup=number(r["speedup"]),
        )
        for r in records(first)
    ]
    return tuple(sorted(out, key=lambda r: -(r.speedup or 0)))


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
