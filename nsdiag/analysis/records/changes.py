"""A change the user makes, the findings it fixes and what it saves on each kernel or stretch of
time it touches (analysis/changes.py groups the findings and ranks the changes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nsdiag.analysis.records.code import CodeAttribution
from nsdiag.analysis.records.findings import Finding


@dataclass(frozen=True)
class Touch:
    """A kernel or stretch of time a change touches, and what the change saves there."""

    kind: str  # "kernel" | "range" | "program"
    name: str  # the kernel's signature name, the NVTX range, or "" for the program
    saved_ns: float | None  # marginal; None: no estimate
    kernel_id: int | None = None  # the kernel's id in the diagnosis, where it was profiled
    kernel_kind: str | None = None  # what its name says it does (gemm, conv-fprop, ...)
    rules: tuple[str, ...] = ()

    def to_json(self, iterations: int = 0) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "kernel_id": self.kernel_id,
            "kernel_kind": self.kernel_kind,
            "rules": list(self.rules),
            "saved_ns": self.saved_ns,
            "saved_per_iteration_ns": _per(self.saved_ns, iterations),
        }


@dataclass(frozen=True)
class Change:
    """One change the user makes: the findings it fixes and its marginal saving."""

    key: str  # stable slug: precision:tf32-or-bf16, kernel-rewrite:<name>, program:<rule>:<range>
    kind: str  # a key of KINDS, or "finding" for a cause with no kind
    title: str
    fix: str  # the fix text of its leading finding's rule (the cause's own)
    findings: tuple[Finding, ...]  # leading (most saving) first
    touches: tuple[Touch, ...]  # most saving first
    summed_ns: float | None  # over what it touches, before the changes above took theirs
    saved_ns: float | None  # marginal: after the changes ranked above it; None: no estimate
    share: float | None  # saved_ns / the region's wall time
    estimate: str = "none"  # the leading finding's basis (findings.ESTIMATES)
    after: tuple[str, ...] = ()  # changes ranked above that took some of the same time
    # Marginal before the region's wall time capped the total: above saved_ns only where the
    # region is shorter than the GPU work in it (a host loop running ahead of the GPU). `nsdiag
    # diff`, which times such iterations by the GPU, checks this one.
    uncapped_ns: float | None = None
    # Whose code it is about: the Python functions holding its work (records/code.py); None
    # where nothing is known (the JSON leaves the key out)
    code: CodeAttribution | None = None

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.rule for f in self.findings))

    @property
    def causes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.cause for f in self.findings))

    @property
    def kernels(self) -> tuple[Touch, ...]:
        return tuple(t for t in self.touches if t.kind == "kernel")

    def to_json(self, iterations: int = 0) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "title": self.title,
            "fix": self.fix,
            "rules": list(self.rules),
            "causes": list(self.causes),
            "saved_ns": self.saved_ns,
            "saved_per_iteration_ns": _per(self.saved_ns, iterations),
            "share": self.share,
            "summed_ns": self.summed_ns,
            "uncapped_ns": self.uncapped_ns,
            "estimate": self.estimate,
            "touches": [t.to_json(iterations) for t in self.touches],
            "findings": [_finding_ref(f) for f in self.findings],
            "after": list(self.after),
            **({"code": self.code.to_json()} if self.code is not None else {}),
        }


def _finding_ref(f: Finding) -> dict[str, Any]:
    """A finding the change groups, by name (its evidence is on its kernel's or program entry)."""
    return {
        "rule": f.rule,
        "cause": f.cause,
        "kernel": f.kernel,
        "range": f.range,
        "saved_ns": f.saved_ns,
    }


def _per(ns: float | None, iterations: int) -> float | None:
    return ns / iterations if iterations and ns is not None else None
