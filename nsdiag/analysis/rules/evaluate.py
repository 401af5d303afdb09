"""Evaluate one kernel rule on one kernel's values: skipped, silent, or a finding.

The policy for missing metrics, in the order it applies:
1. a name in the rule's `requires` is missing: skipped ("missing X");
2. a name in the rule's `[defaults]` is missing: it takes its default (for the condition and
   the impact; the evidence still shows it as missing, and the message leaves out the
   sentences that name it);
3. any other name the condition reads is missing and the outcome depends on it: skipped
   ("missing X"), so a missing metric never makes a condition silently true (`not (x < 50)`)
   or false. When the known values decide (`a >= 10 and x < 50` with a = 5) they decide.
A rule without an impact formula, or whose formula reads a missing name or divides by zero,
gives no estimate (`saved_ns` None; a division by zero says so in the finding's impact basis);
the finding stands. The saving is the recoverable fraction of the kernel's
time in the analysed region, and its impact that time as a share of the region's wall time.

No finding stands on nothing: when every metric the condition reads, or every value its evidence
would show, is zero or missing, the rule stays silent (`local_sectors >= 0.05 * lsu_sectors` holds
as 0 >= 0 on a kernel with no local or global traffic through L1, and said nothing true).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nsdiag.analysis.records.findings import Evidence, Finding, Skipped, share_of
from nsdiag.analysis.rules.expr import Comparison
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.analysis.rules.template import render, render_message, template_fields
from nsdiag.model.values import missing, number


def missing_names(values: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    return [name for name in names if missing(values.get(name))]


def evaluate_rule(
    rule: RuleSpec, values: Mapping[str, Any], kernel_ns: float = 0.0, wall_ns: float = 0.0
) -> Finding | Skipped | None:
    """`kernel_ns`: the kernel's time in the analysed region; `wall_ns`: the region's wall time
    (the currency's denominator)."""
    absent = missing_names(values, rule.requires)
    if absent:
        return Skipped(rule.id, f"missing {', '.join(absent)}")
    assert rule.condition is not None
    # a copy of the kernel's hundreds of values only where a default fills one in
    defaults = {n: v for n, v in rule.defaults.items() if missing(values.get(n))}
    filled = {**values, **defaults} if defaults else values
    held = rule.condition.holds(filled)
    if held is None:
        return Skipped(rule.id, f"missing {', '.join(rule.condition.missing(filled))}")
    if not held:
        return None
    evidence = _evidence(rule, values, rule.condition.comparisons())
    if _no_signal([values.get(n) for n in rule.condition.names]) or _no_signal(
        [e.value for e in evidence]
    ):
        return None
    recoverable, note = _recoverable(rule, filled)
    saved = recoverable * kernel_ns if recoverable is not None else None
    return Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=share_of(saved, wall_ns),
        recoverable=recoverable,
        saved_ns=saved,
        estimate="metrics" if saved is not None else "none",
        # a message may state its thresholds: the rule's params are values of its templates
        message=render_message(rule.message, {**rule.params, **values}) or _lacking(rule, values),
        fix=render(rule.fix, {**rule.params, **values}),
        impact_basis=f"{note} {rule.impact_basis}".strip() if note else rule.impact_basis,
        evidence=evidence,
    )


def _lacking(rule: RuleSpec, values: Mapping[str, Any]) -> str:
    """The message of a finding whose every sentence names a value the report lacks: not the
    rule's title (the cause already heads the line: `warp-divergence: Warp divergence`)."""
    absent = sorted({n for n, _, _ in template_fields(rule.message) if missing(values.get(n))})
    return (
        f"The rule's condition holds; its message needs {', '.join(absent)}, which the report "
        "lacks (profile with nsdiag profile or ncu --set full for the full text)."
    )


def _recoverable(rule: RuleSpec, values: Mapping[str, Any]) -> tuple[float | None, str]:
    """The fraction of the kernel's time the fix recovers (clipped to 0..1), and a note when
    the impact formula is undefined for these values (a division by zero gives no estimate,
    never a silent 0)."""
    if rule.impact is None:
        return None, ""
    value = rule.impact.evaluate(values)
    if value is not None and missing(value):
        zero = rule.impact.zero_divisors(values)
        why = f"{', '.join(zero)} is 0 in" if zero else "undefined for this kernel:"
        return None, f"No estimate here: {why} {rule.impact.source}."
    recoverable = number(value)
    return (None if recoverable is None else min(max(recoverable, 0.0), 1.0)), ""


def _no_signal(measured: Sequence[Any]) -> bool:
    """True when every value is zero or missing (an empty list has no signal either)."""
    return all(missing(v) or number(v) == 0 for v in measured)


def _evidence(
    rule: RuleSpec, values: Mapping[str, Any], comparisons: list[Comparison]
) -> tuple[Evidence, ...]:
    """The rule's evidence names, then every other metric its condition compared, each next to
    its threshold."""
    compared = {c.metric: c for c in comparisons}

    def item(metric: str) -> Evidence:
        c = compared.get(metric)
        value = number(values.get(metric))
        return Evidence(metric, value, c.op if c else "", c.threshold if c else None)

    names = [*rule.evidence, *(m for m in compared if m not in rule.evidence)]
    return tuple(item(m) for m in names)
