"""A rule's documentation as plain text: the same source feeds the CLI, HTML and docs; and the
table of causes docs/diagnosis.md shows."""

from __future__ import annotations

from collections.abc import Mapping

from nsdiag.analysis.records.causes import CAUSES, KINDS, PER_FINDING, PER_KERNEL, SWITCH
from nsdiag.analysis.records.idioms import IDIOMS
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.analysis.rules.template import template_fields

_HEADINGS = {
    "detects": "What it detects",
    "why": "Why it is slow",
    "fix": "How to fix it",
    "false_positives": "False positives",
    "references": "References",
}


def rule_row(rule: RuleSpec, path: str | None = None) -> str:
    """One line of `nsdiag rules list`: id, scope, cause, title (and the file of a user's rule)."""
    source = f"  ({path})" if path else ""
    return f"{rule.id}  {rule.scope:7s}  {rule.cause:28s}  {rule.title}{source}"


def rule_text(rule: RuleSpec, values: Mapping[str, str] | None = None) -> str:
    """`nsdiag rules show`: a rule's documentation; `values`: the values a program rule's
    analysis gives its templates, with their meanings (analysis/ruleset.py template_values)."""
    lines = [f"{rule.id} {rule.cause}: {rule.title}", f"scope: {rule.scope}"]
    if rule.condition is not None:
        lines.append(f"fires when: {rule.condition.source}")
        if rule.condition.constants:
            named = ", ".join(f"{k} = {v:g}" for k, v in rule.condition.constants.items())
            lines.append(f"  where {named}")
    if rule.requires:
        lines.append(f"needs: {', '.join(rule.requires)}")
    if rule.defaults:
        lines.append("when missing: " + ", ".join(f"{k} = {v:g}" for k, v in rule.defaults.items()))
    others = (
        sorted(rule.condition.names - {*rule.requires, *rule.defaults}) if rule.condition else []
    )
    if others:
        lines.append(f"also reads: {', '.join(others)} (skipped where a missing one would decide)")
    if rule.params:
        lines.append("thresholds: " + ", ".join(f"{k} = {v:g}" for k, v in rule.params.items()))
    if rule.impact is not None:
        lines.append(f"estimated saving (fraction of the kernel's time): {rule.impact.source}")
    elif rule.scope == "kernel":
        lines.append("estimated saving: none (the finding says so instead of printing a number)")
    if rule.impact_basis:
        lines.append(f"  because: {rule.impact_basis}")
    lines.extend(_template_lines(rule, values or {}))
    for key, heading in _HEADINGS.items():
        value = rule.doc.get(key)
        lines.append("")
        lines.append(heading)
        if isinstance(value, list):
            lines.extend(f"  - {item}" for item in value)
        else:
            lines.append(f"  {value}")
    return "\n".join(lines)


def idiom_table() -> str:
    """docs/diagnosis.md's table of PyTorch idioms: one line per record of
    analysis/records/idioms.py (tests/test_causes.py checks the page against it)."""
    lines = [
        "| idiom | what marks it | the change | the one-line fix | its saving |",
        "| --- | --- | --- | --- | --- |",
    ]
    for idiom in IDIOMS:
        lines.append(
            f"| `{idiom.slug}` | {idiom.evidence} | {idiom.title} | {idiom.fix} | {idiom.saving} |"
        )
    return "\n".join(lines)


def _template_lines(rule: RuleSpec, values: Mapping[str, str]) -> list[str]:
    """What a rule's message and fix show: a kernel rule's names, or every value a program rule's
    analysis gives its templates."""
    if rule.scope != "program":
        shown = dict.fromkeys(f for t in (rule.message, rule.fix) for f, _, _ in template_fields(t))
        return [f"message shows: {', '.join(shown)}"] if shown else []
    width = max((len(name) for name in values), default=0)
    return [
        f"analysis: {rule.analysis}; its message and fix may use these values:",
        *(f"  {{{name}}}{' ' * (width - len(name))}  {text}" for name, text in values.items()),
    ]


# What a change's key is, by how its kind groups findings.
_KEYS = {
    SWITCH: "`{key}`",
    PER_KERNEL: "`{key}:<signature name>`",
    PER_FINDING: "`program:<rule>:<range or region>`",
}


def cause_table() -> str:
    """docs/diagnosis.md's table of causes: one line per record of analysis/records/causes.py
    (tests/test_causes.py checks the page against it)."""
    lines = [
        "| cause | scope | what it is | the change that fixes it | key | saving out of |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for cause in CAUSES.values():
        kind = KINDS[cause.change]
        title = kind.title.format(kernel="the kernel", where="", n="N")
        key = _KEYS[kind.group].format(key=kind.key)
        lines.append(
            f"| `{cause.slug}` | {cause.scope} | {cause.doc} | {title} | {key} | {cause.budget} |"
        )
    return "\n".join(lines)
