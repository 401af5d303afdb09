"""The program rules run: each rule's analysis (analysis/program/registry.py) on the
ProgramContext built once per diagnosis, or the reason it is skipped (what the session lacks, or
the analysis's hold-back check)."""

from __future__ import annotations

from collections.abc import Sequence

from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.record import TABLE_WORDS
from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
from nsdiag.analysis.records.findings import Finding, Skipped
from nsdiag.analysis.rules.spec import RuleSpec


def needs_timeline(rules: Sequence[RuleSpec]) -> bool:
    """Whether a rule's analysis reads the prepared timeline (engine.diagnose prepares it)."""
    needs = {name: analysis.needs for name, analysis in PROGRAM_ANALYSES.items()}
    return any(needs.get(r.analysis) in ("timeline", "ranks") for r in rules)


def _skip_reason(rule: RuleSpec, ctx: ProgramContext) -> str | None:
    analysis = PROGRAM_ANALYSES.get(rule.analysis)
    if analysis is None:
        return f"analysis {rule.analysis!r} is not available in this nsdiag"
    needs = analysis.needs
    if needs == "kernels" and not ctx.session.has_kernels():
        return "missing kernel metrics (no ncu data)"
    if needs == "launches" and not (ctx.session.has_kernels() or ctx.session.has_timeline()):
        return "no kernel launches (neither ncu data nor a timeline)"
    if needs == "timeline" and not ctx.session.has_timeline():
        return "missing timeline (no nsys data)"
    if needs == "ranks" and ctx.ranks is None:
        return "one process (no distributed run in the timeline)"
    missing = [t for t in analysis.tables if t in (ctx.session.meta.missing_tables or ())]
    if missing and not (needs == "launches" and ctx.session.has_kernels()):
        return "the nsys export has no " + " and no ".join(TABLE_WORDS[t] for t in missing)
    return analysis.held_back(rule, ctx) if analysis.held_back is not None else None


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
        findings.extend(PROGRAM_ANALYSES[rule.analysis].function(rule, ctx))
    findings.sort(key=lambda f: f.rank_key)
    return findings, skipped
