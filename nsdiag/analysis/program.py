"""Program-level analyses: dispatch rule files with scope = "program" to their analysis."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from nsdiag.analysis.crosskernel import fusion_candidates, layout_conversions
from nsdiag.analysis.diagnosis import Finding, KernelDiagnosis, Skipped
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.analysis.timeline import (
    gpu_idle_gaps,
    launch_overhead,
    no_copy_compute_overlap,
    pageable_memcpy,
    sync_heavy,
)
from nsdiag.model.session import Session

Analysis = Callable[[RuleSpec, Session, pd.DataFrame, list[KernelDiagnosis], float], list[Finding]]

ANALYSES: dict[str, tuple[Analysis, str]] = {
    # name -> (function, what the session must hold)
    "fusion_candidates": (fusion_candidates, "kernels"),
    "layout_conversions": (layout_conversions, "kernels"),
    "pageable_memcpy": (pageable_memcpy, "timeline"),
    "no_copy_compute_overlap": (no_copy_compute_overlap, "timeline"),
    "sync_heavy": (sync_heavy, "timeline"),
    "gpu_idle_gaps": (gpu_idle_gaps, "timeline"),
    "launch_overhead": (launch_overhead, "timeline"),
}


def program_findings(
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    rules: list[RuleSpec],
    total_ns: float,
) -> tuple[list[Finding], list[Skipped]]:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for rule in rules:
        if rule.analysis not in ANALYSES:
            skipped.append(
                Skipped(rule.id, f"analysis {rule.analysis!r} is not available in this nsdiag")
            )
            continue
        function, needs = ANALYSES[rule.analysis]
        if needs == "kernels" and not session.has_kernels():
            skipped.append(Skipped(rule.id, "missing kernel metrics (no ncu data)"))
            continue
        if needs == "timeline" and not session.has_timeline():
            skipped.append(Skipped(rule.id, "missing timeline (no nsys data)"))
            continue
        findings.extend(function(rule, session, derived, kernels, total_ns))
    findings.sort(key=lambda f: (-f.impact, f.rule))
    return findings, skipped
