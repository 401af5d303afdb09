"""Nsight Compute's own rule standing in for a kernel rule whose metrics are missing.

A kernel rule may name, in its file, the ncu rules that detect the same cause
(`ncu_rules = ["UncoalescedGlobalAccess", "MemoryCacheAccessPattern"]`, in order of
preference). Where the rule is skipped for a missing metric and the export holds ncu's rule
results for the kernel, the first named ncu rule with an OPT result (its largest estimate, if
it gave several) becomes the finding, said as such: `source` "ncu-rule", the ncu rule's id and
message, and its estimate in nsdiag's currency:

- a GLOBAL speedup is ncu's estimate of the share of the kernel's run time the fix saves, so
  the saving is that share of the kernel's time in the analysed region (recoverable =
  speedup / 100, saved_ns = recoverable x the kernel's time; per iteration where the region
  has iterations, like every finding);
- a LOCAL speedup is a gain in the efficiency of the unit concerned, not a share of the run
  time: no time saving is claimed (estimate "none"), the finding stands;
- an OPT result with no speedup: no estimate either.

ncu's rules have false positives nsdiag's own rules guard against (UncoalescedGlobalAccess
counts sectors per instruction, so 3-float pixels that L1 serves across neighbouring
instructions look uncoalesced). So ncu's result stands in only where what nsdiag does know does
not contradict it: the rule's own condition, evaluated on the metrics that are there, is not
false (three-valued: unknown lets it stand), nor is the rule file's `ncu_condition` (which may
also read `ncu_speedup`, ncu's estimate in %).

The skipped-rule note stays and says what happened ("missing X; ncu's Y stands in", or "...;
ncu's Y left out: Z does not hold"). When the rule's metrics are present, nsdiag's rule decides
(fires or stays silent) and ncu's result is not used, so nothing is said twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nsdiag.analysis.records.diagnosis import NcuRuleResult
from nsdiag.analysis.records.findings import Finding, Skipped, share_of
from nsdiag.analysis.rules.spec import NCU_SPEEDUP, RuleSpec
from nsdiag.analysis.rules.template import render_message
from nsdiag.model.values import missing


def stand_in(rule: RuleSpec, results: Sequence[NcuRuleResult]) -> NcuRuleResult | None:
    """The ncu rule result that stands in for `rule`: the first of its `ncu_rules` that gave an
    OPT result for the kernel, its largest estimate first; None when none did."""
    for ncu_id in rule.ncu_rules:
        hits = [r for r in results if r.rule == ncu_id and r.type == "OPT"]
        if hits:
            return max(hits, key=lambda r: r.speedup or 0.0)
    return None


def contradiction(rule: RuleSpec, result: NcuRuleResult, values: Mapping[str, Any]) -> str | None:
    """Why nsdiag's known values contradict ncu's result (the rule's own condition is false on
    them, or its `ncu_condition` is); None when nothing does."""
    filled = {**values, **{n: v for n, v in rule.defaults.items() if missing(values.get(n))}}
    if rule.condition is not None and rule.condition.holds(filled) is False:
        return "the rule's condition is false on the metrics there"
    gate = rule.ncu_condition
    if gate is not None and gate.holds({**filled, NCU_SPEEDUP: result.speedup}) is False:
        return f"{gate.source} does not hold"
    return None


def speedup_words(result: NcuRuleResult) -> str:
    """ "est. 77% speedup", "est. local speedup 87%", or "" (no estimate)."""
    if result.speedup is None:
        return ""
    if result.speedup_type == "global":
        return f"est. {result.speedup:.0f}% speedup"
    return f"est. {result.speedup_type or 'unspecified'} speedup {result.speedup:.0f}%"


def ncu_finding(
    rule: RuleSpec,
    skipped: Skipped,
    result: NcuRuleResult,
    values: Mapping[str, Any],
    kernel_ns: float,
    wall_ns: float,
) -> tuple[Finding, Skipped]:
    """The finding ncu's `result` gives for `rule`, and the rule's skipped note saying so."""
    recoverable = None
    if result.speedup_type == "global" and result.speedup is not None:
        recoverable = min(max(result.speedup / 100.0, 0.0), 1.0)
    saved = recoverable * kernel_ns if recoverable is not None else None
    words = speedup_words(result)
    said = f"from ncu's rule {result.rule}" + (f" ({words})" if words else "")
    missing = skipped.reason.removeprefix("missing ")
    if recoverable is not None:
        basis = (
            f"Nsight Compute's rule {result.rule} stands in: nsdiag lacks {missing}. Its "
            f"estimated global speedup, {result.speedup:.4g}% of the kernel's run time, times "
            "the kernel's time in the analysed region is the saving (ncu's estimate, not "
            "nsdiag's formula)."
        )
    elif result.speedup is not None:
        basis = (
            f"Nsight Compute's rule {result.rule} stands in: nsdiag lacks {missing}. Its "
            f"{result.speedup_type or 'unspecified'} speedup of {result.speedup:.4g}% is a gain "
            "in the efficiency of the unit concerned, not a share of the kernel's run time, so "
            "no time saving is claimed."
        )
    else:
        basis = (
            f"Nsight Compute's rule {result.rule} stands in: nsdiag lacks {missing}; ncu gave "
            "no estimate."
        )
    finding = Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=share_of(saved, wall_ns),
        recoverable=recoverable,
        saved_ns=saved,
        estimate="ncu-rule" if saved is not None else "none",
        message=f"{said}: {result.message}",
        fix=render_message(rule.fix, values) or str(rule.doc.get("fix", "")) or rule.title,
        impact_basis=basis,
        ncu_rule=result.to_json(),
    )
    note = Skipped(skipped.rule, f"{skipped.reason}; ncu's {result.rule} stands in", skipped.kernel)
    return finding, note
