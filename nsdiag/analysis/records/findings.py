"""A rule hit and a rule skipped: the evidence every analysis reports (diagnosis.py holds them
per kernel and for the program, changes.py groups them into changes).

One currency: every finding, kernel or program, carries `saved_ns`, the time its fix would save
in the analysed region (None when nothing defensible can be said), and `impact`, that saving as
a share of the region's wall time (of the profiled GPU time when there is no timeline).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nsdiag.analysis.records.jsonsafe import json_number
from nsdiag.model import evidence_labels

# What a finding's saving is computed from ("ncu-rule": Nsight Compute's own estimated speedup,
# where its rule stands in for a kernel rule whose metrics are missing).
ESTIMATES = ("metrics", "timeline", "names", "ncu-rule", "none")
# Who found it: nsdiag's rule on its metrics, or Nsight Compute's rule standing in for it.
SOURCES = ("nsdiag", "ncu-rule")


@dataclass(frozen=True)
class Evidence:
    """A metric value next to the threshold it was compared with."""

    metric: str
    value: float | None
    op: str = ""
    threshold: float | None = None


@dataclass(frozen=True)
class FusionChain:
    """The details of a fusion chain, operations in a row that pass intermediates through DRAM:
    how many times it ran (its kernels, in order, are the finding's `kernels`)."""

    occurrences: int


def share_of(saved_ns: float | None, wall_ns: float) -> float | None:
    """A saving as a share of the region's wall time (None: no estimate)."""
    if saved_ns is None:
        return None
    return min(saved_ns / wall_ns, 1.0) if wall_ns > 0 else 0.0


@dataclass(frozen=True)
class Finding:
    rule: str
    cause: str
    title: str
    impact: float | None  # saved_ns as a share of the region's wall time; None: no estimate
    recoverable: float | None  # fraction of this kernel's (or range's) time a fix could save
    message: str
    fix: str
    impact_basis: str = ""
    evidence: tuple[Evidence, ...] = ()
    kernel: str | None = None  # signature name, for program findings that point at kernels
    # The NVTX ranges a program finding is about (several for a fusion chain, sorted; "" never:
    # work outside every range is no range); `range` is them as one label.
    ranges: tuple[str, ...] = ()
    saved_ns: float | None = None  # time the fix would save in the analysed region
    details: Mapping[str, Any] | FusionChain = field(default_factory=dict)
    estimate: str = "metrics"  # one of ESTIMATES
    # The kernels a program finding is about (a fusion chain's in order, the layout conversions,
    # the attention score kernels); empty: the one `kernel` names, if any.
    kernels: tuple[str, ...] = ()
    # A program idiom the finding is (records/idioms.py): its change has the idiom's title and
    # fix; "": none.
    idiom: str = ""
    # Where ncu's own rule stands in for this finding's kernel rule (analysis/kernel/
    # ncu_stand_in.py): that rule result as NcuRuleResult.to_json gives it; empty otherwise.
    ncu_rule: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """One of SOURCES: "ncu-rule" where ncu's rule stands in, else "nsdiag"."""
        return "ncu-rule" if self.ncu_rule else "nsdiag"

    @property
    def rank_key(self) -> tuple[float, str]:
        """Most time saved first; findings with no estimate last."""
        return (-(self.saved_ns if self.saved_ns is not None else -1.0), self.rule)

    @property
    def range(self) -> str | None:
        """The NVTX range as the JSON and the renderers name it (None: outside every range)."""
        return ", ".join(self.ranges) or None

    @property
    def named_kernels(self) -> tuple[str, ...]:
        """The kernels the finding is about: the ones it lists, else the one it names."""
        if self.kernels:
            return self.kernels
        return (self.kernel,) if self.kernel else ()

    @property
    def chain(self) -> tuple[str, ...]:
        """The kernels of a fusion chain, in order; empty for other findings."""
        return self.kernels if isinstance(self.details, FusionChain) else ()

    def to_json(self, iterations: int = 0) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "cause": self.cause,
            "title": self.title,
            "source": self.source,
            "saved_ns": json_number(self.saved_ns),
            "saved_per_iteration_ns": json_number(self.saved_ns / iterations)
            if iterations and self.saved_ns is not None
            else None,
            "impact": json_number(self.impact),
            "estimate": self.estimate,
            "recoverable": json_number(self.recoverable),
            "evidence": {e.metric: json_number(e.value) for e in self.evidence},
            "thresholds": {
                e.metric: {"op": e.op, "threshold": e.threshold} for e in self.evidence if e.op
            },
            "evidence_labels": {
                e.metric: {
                    "label": evidence_labels.label(e.metric),
                    "unit": evidence_labels.unit(e.metric),
                }
                for e in self.evidence
            },
            "message": self.message,
            "fix": self.fix,
            "impact_basis": self.impact_basis,
        }
        if self.kernel is not None:
            out["kernel"] = self.kernel
        if self.ncu_rule:
            out["ncu_rule"] = dict(self.ncu_rule)
        details = (
            {"chain": list(self.kernels), "occurrences": self.details.occurrences}
            if isinstance(self.details, FusionChain)
            else self.details
        )
        if details:
            out["details"] = dict(details)
        return out


@dataclass(frozen=True)
class Skipped:
    rule: str
    reason: str
    kernel: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "reason": self.reason,
            **({"kernel": self.kernel} if self.kernel else {}),
        }
