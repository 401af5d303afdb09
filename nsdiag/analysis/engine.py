"""Run the diagnosis: per-signature verdicts, roofline, rule findings, program findings."""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable
from typing import Any

import pandas as pd

from nsdiag.analysis import roofline, verdict
from nsdiag.analysis.derived import add_derived
from nsdiag.analysis.diagnosis import Diagnosis, Evidence, Finding, KernelDiagnosis, Skipped
from nsdiag.analysis.rulespec import RuleSpec, default_rules
from nsdiag.analysis.signatures import aggregate
from nsdiag.model.session import Session

_COPY_NAME = re.compile(r"copy", re.IGNORECASE)
_GEMM_NAME = re.compile(r"gemm|sm\d+_xmma|cutlass|matmul|mma", re.IGNORECASE)


def measured_dram_ceiling(kernels: pd.DataFrame) -> tuple[float | None, str | None]:
    """The best DRAM bandwidth a copy kernel reached in this session (a measured ceiling).

    Copies do no arithmetic, so their bandwidth is what this GPU can actually sustain; a copy
    under 60 % of the theoretical peak is not a ceiling (too small, or not streaming).
    """
    if kernels.empty or "dram_bytes_per_second" not in kernels or "name" not in kernels:
        return None, None
    copies = kernels[
        kernels["name"].astype(str).str.contains(_COPY_NAME)
        & (kernels.get("dram_throughput_pct", 0) >= 60)
    ]
    if copies.empty:
        return None, None
    best = copies.loc[copies["dram_bytes_per_second"].idxmax()]
    return float(best["dram_bytes_per_second"]), str(best["name"])


def _context(
    row: dict[str, Any], total_ns: float, v: verdict.Verdict, roof: dict[str, Any]
) -> dict[str, Any]:
    values = dict(row)
    values["time_share"] = row["total_duration_ns"] / total_ns if total_ns else math.nan
    values["mem_pct"] = v.mem_pct
    values["compute_pct"] = v.compute_pct
    values["arithmetic_intensity"] = roof.get("arithmetic_intensity", math.nan)
    values["dram_tb_per_s"] = row.get("dram_bytes_per_second", math.nan) / 1e12
    values["is_gemm_like"] = 1.0 if _GEMM_NAME.search(str(row.get("name", ""))) else 0.0
    pipes = [row.get(p) for p in ("pipe_fma_pct", "pipe_fp64_pct", "pipe_fp16_pct")]
    values["fp_pipe_pct"] = max(
        (p for p in pipes if p is not None and not math.isnan(p)), default=math.nan
    )
    if "pct_of_measured_ceiling" in roof:
        values["dram_pct_of_ceiling"] = roof["pct_of_measured_ceiling"]
    return values


class _SafeFormatter(string.Formatter):
    """str.format over evidence values: plain field names only; missing or NaN prints n/a."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if not field_name.isidentifier():
            raise ValueError(f"bad field {field_name!r}")
        return kwargs.get(field_name), field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "n/a"
        try:
            return format(value, format_spec)
        except (TypeError, ValueError):
            return str(value)


_FORMATTER = _SafeFormatter()


def _missing(values: dict[str, Any], names: Iterable[str]) -> list[str]:
    out = []
    for name in names:
        value = values.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append(name)
    return out


def evaluate_rule(rule: RuleSpec, values: dict[str, Any]) -> Finding | Skipped | None:
    missing = _missing(values, rule.requires)
    if missing:
        return Skipped(rule.id, f"missing {', '.join(missing)}")
    assert rule.condition is not None
    if not rule.condition.evaluate(values):
        return None
    recoverable = rule.impact.evaluate(values) if rule.impact is not None else math.nan
    recoverable = (
        0.0
        if isinstance(recoverable, float) and math.isnan(recoverable)
        else min(max(float(recoverable), 0.0), 1.0)
    )
    share = values.get("time_share") or 0.0
    compared = {c.metric: c for c in rule.condition.comparisons()}
    evidence = [
        Evidence(
            m,
            _float(values.get(m)),
            compared[m].op if m in compared else "",
            compared[m].threshold if m in compared else None,
        )
        for m in rule.evidence
    ]
    evidence += [
        Evidence(c.metric, _float(values.get(c.metric)), c.op, c.threshold)
        for c in compared.values()
        if c.metric not in rule.evidence
    ]
    return Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=share * recoverable,
        recoverable=recoverable,
        message=_FORMATTER.format(rule.message, **values),
        fix=_FORMATTER.format(rule.fix, **values),
        impact_basis=rule.impact_basis,
        evidence=tuple(evidence),
    )


def _float(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _ncu_rules(session: Session, launch_ids: list[int]) -> list[dict[str, Any]]:
    rules = session.rule_results
    if rules is None or rules.empty or not launch_ids:
        return []
    first = rules[rules["id"] == launch_ids[0]]
    first = first[first["type"].isin(["OPT", "WRN"])]
    out = [
        {
            "rule": r["rule"],
            "section": r["section"],
            "type": r["type"],
            "message": r["message"],
            "speedup_type": r["speedup_type"] or None,
            "speedup": _float(r["speedup"]),
        }
        for _, r in first.iterrows()
    ]
    return sorted(out, key=lambda r: -(r["speedup"] or 0))


def _duration_groups_note(row: dict[str, Any]) -> str:
    """Say so when one signature's launches did different amounts of work (a GEMM reused for
    several K): its metrics mix the groups, or describe only the ones profiled."""
    groups, profiled = (
        _float(row.get("duration_groups")),
        _float(row.get("duration_groups_profiled")),
    )
    if groups is None or profiled is None or groups < 2:
        return ""
    if profiled < groups:
        return (
            f"its launches fall in {groups:.0f} duration groups (different work under one grid); only "
            f"{profiled:.0f} profiled, so this describes those launches alone"
        )
    return f"its launches fall in {groups:.0f} duration groups (different work under one grid), weighted by GPU time"


def _join_notes(*notes: str | None) -> str:
    return "; ".join(n for n in notes if n)


def diagnose(session: Session, rules: Iterable[RuleSpec] | None = None) -> Diagnosis:
    rules = list(rules) if rules is not None else list(default_rules())
    kernel_rules = [r for r in rules if r.scope == "kernel"]
    program_rules = [r for r in rules if r.scope == "program"]
    derived = add_derived(session.kernels) if session.has_kernels() else session.kernels
    signatures = aggregate(derived) if session.has_kernels() else pd.DataFrame()
    total_ns = float(signatures["total_duration_ns"].sum()) if len(signatures) else 0.0
    ceiling, ceiling_kernel = (
        measured_dram_ceiling(derived) if session.has_kernels() else (None, None)
    )
    kernels: list[KernelDiagnosis] = []
    skipped: list[Skipped] = []
    for index, row in enumerate(signatures.to_dict("records")):
        v = verdict.classify(row)
        roof = roofline.position(row, ceiling)
        values = _context(row, total_ns, v, roof)
        findings, rule_skips = [], []
        for rule in kernel_rules:
            result = evaluate_rule(rule, values)
            if isinstance(result, Finding):
                findings.append(result)
            elif isinstance(result, Skipped):
                rule_skips.append(Skipped(result.rule, result.reason, row["name"]))
        findings.sort(key=lambda f: (-f.impact, f.rule))
        skipped.extend(rule_skips)
        metrics = {
            k: float(val)
            for k, val in row.items()
            if isinstance(val, (int, float)) and not isinstance(val, bool) and k not in ("id",)
        }
        kernels.append(
            KernelDiagnosis(
                id=index,
                name=str(row["name"]),
                demangled=str(row.get("demangled") or row["name"]),
                launches=int(row["launches"]),
                duration_ns=float(row["total_duration_ns"]),
                time_share=values["time_share"],
                grid=str(row.get("grid", "")),
                block=str(row.get("block", "")),
                bound=v.bound,
                limiter=v.limiter,
                verdict=verdict.sentence(str(row["name"]), v, roof),
                verdict_note=_join_notes(v.note, _duration_groups_note(row)),
                roofline=roof,
                metrics=metrics,
                findings=findings,
                skipped=rule_skips,
                ncu_rules=_ncu_rules(session, row["launch_ids"]),
                close_call=v.close_call,
            )
        )
    from nsdiag.analysis.program import program_findings

    program, program_skips = program_findings(session, derived, kernels, program_rules, total_ns)
    skipped.extend(program_skips)
    meta = {
        "sources": session.meta.get("sources", []),
        "kernel_launches": len(session.kernels),
        **_provenance(session.meta),
    }
    if ceiling:
        meta["measured_dram_ceiling"] = {"bytes_per_s": ceiling, "kernel": ceiling_kernel}
    if session.has_timeline():
        meta["timeline"] = _timeline_summary(session.timeline)
    return Diagnosis(
        device=dict(session.meta.get("device", {})),
        total_gpu_time_ns=total_ns,
        kernels=kernels,
        program_findings=program,
        skipped_rules=_dedupe(skipped),
        meta=meta,
    )


def _provenance(meta: dict[str, Any]) -> dict[str, Any]:
    """Tool versions and the profiled command, where the session knows them."""
    tools = {
        name: info.get("version")
        for name, info in (meta.get("tools") or {}).items()
        if isinstance(info, dict) and info.get("version")
    }
    if meta.get("nsys_version") and "nsys" not in tools:
        tools["nsys"] = meta["nsys_version"]
    out: dict[str, Any] = {"tools": tools} if tools else {}
    if meta.get("command"):
        out["command"] = (
            " ".join(map(str, meta["command"]))
            if isinstance(meta["command"], list)
            else str(meta["command"])
        )
    if meta.get("profiled_at"):
        out["profiled_at"] = meta["profiled_at"]
    return out


def _timeline_summary(timeline: pd.DataFrame) -> dict[str, Any]:
    """What the nsys timeline holds, for the summary line (counts and wall span per device)."""
    kinds = timeline["kind"].value_counts().to_dict()
    starts, ends = pd.to_numeric(timeline["start_ns"]), pd.to_numeric(timeline["end_ns"])
    span = float(ends.max() - starts.min()) if len(timeline) else 0.0
    return {"activities": {str(k): int(v) for k, v in kinds.items()}, "span_ns": span}


def _dedupe(skipped: list[Skipped]) -> list[Skipped]:
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
