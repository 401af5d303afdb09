"""Program-level analyses: dispatch rule files with scope = "program" to their analysis.

Every analysis is `analysis(rule, ctx)`: the rule (its thresholds in `rule.params`) and the
ProgramContext built once per diagnosis. Each finding's message and fix are the rule file's
templates over the values registered for the analysis in program_values.PROGRAM_VALUES (its keys
are this table's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nsdiag.analysis.diagnosis import Finding, Skipped
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.fusion import fusion_candidates
from nsdiag.analysis.program.layout import layout_conversions
from nsdiag.analysis.program.rank_findings import (
    exposed_communication,
    rank_imbalance,
    unexplained_lateness,
)
from nsdiag.analysis.program.timeline import (
    gpu_idle_gaps,
    launch_overhead,
    no_copy_compute_overlap,
    pageable_memcpy,
    sync_heavy,
)
from nsdiag.analysis.rules.spec import RuleSpec

Analysis = Callable[[RuleSpec, ProgramContext], list[Finding]]

ANALYSES: dict[str, tuple[Analysis, str]] = {
    # name -> (function, what the session must hold: kernels (ncu), a timeline (nsys),
    # launches (either: the analysis works on names and durations alone, better with ncu data),
    # or ranks (a timeline of two ranks or more: analysis/program/ranks.py))
    "fusion_candidates": (fusion_candidates, "launches"),
    "layout_conversions": (layout_conversions, "launches"),
    "pageable_memcpy": (pageable_memcpy, "timeline"),
    "no_copy_compute_overlap": (no_copy_compute_overlap, "timeline"),
    "sync_heavy": (sync_heavy, "timeline"),
    "gpu_idle_gaps": (gpu_idle_gaps, "timeline"),
    "launch_overhead": (launch_overhead, "timeline"),
    "rank_imbalance": (rank_imbalance, "ranks"),
    "exposed_communication": (exposed_communication, "ranks"),
}

# Analyses that hold back a finding whose size qualifies when its evidence does not, and say why
# (listed with the skipped rules: never dropped silently).
HELD_BACK: dict[str, Callable[[RuleSpec, ProgramContext], str | None]] = {
    "rank_imbalance": unexplained_lateness,
}


# The nsys tables each timeline analysis reads besides the GPU activities: an export without one
# (readers/nsys_sqlite.py lists it in meta["missing_tables"]) cannot tell absent from unknown.
TABLES_NEEDED: dict[str, tuple[str, ...]] = {
    "gpu_idle_gaps": ("kernels",),
    "no_copy_compute_overlap": ("kernels",),
    "launch_overhead": ("kernels",),  # gaps between tiny kernels; launch calls only add detail
    "sync_heavy": ("kernels", "api_calls"),
    "fusion_candidates": ("kernels",),
    "layout_conversions": ("kernels",),
}
_TABLE_WORDS = {"kernels": "kernel table", "api_calls": "CUDA API table"}


def needs_timeline(rules: Sequence[RuleSpec]) -> bool:
    return any(ANALYSES.get(r.analysis, (None, ""))[1] in ("timeline", "ranks") for r in rules)


def _skip_reason(rule: RuleSpec, ctx: ProgramContext) -> str | None:
    if rule.analysis not in ANALYSES:
        return f"analysis {rule.analysis!r} is not available in this nsdiag"
    needs = ANALYSES[rule.analysis][1]
    if needs == "kernels" and not ctx.session.has_kernels():
        return "missing kernel metrics (no ncu data)"
    if needs == "launches" and not (ctx.session.has_kernels() or ctx.session.has_timeline()):
        return "no kernel launches (neither ncu data nor a timeline)"
    if needs == "timeline" and not ctx.session.has_timeline():
        return "missing timeline (no nsys data)"
    if needs == "ranks" and ctx.ranks is None:
        return "one process (no distributed run in the timeline)"
    missing = [
        t
        for t in TABLES_NEEDED.get(rule.analysis, ())
        if t in ctx.session.meta.get("missing_tables", ())
    ]
    if missing and not (needs == "launches" and ctx.session.has_kernels()):
        return "the nsys export has no " + " and no ".join(_TABLE_WORDS[t] for t in missing)
    held_back = HELD_BACK.get(rule.analysis)
    return held_back(rule, ctx) if held_back is not None else None


def program_findings(
    ctx: ProgramContext, rules: Sequence[RuleSpec]
) -> tuple[list[Finding], list[Skipped]]:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for rule in rules:
        reason = _skip_reason(rule, ctx)
        if reason is not None:
            skipped.append(Skipped(rule.id, reason))
            continue
        findings.extend(ANALYSES[rule.analysis][0](rule, ctx))
    findings.sort(key=lambda f: f.rank_key)
    return findings, skipped
