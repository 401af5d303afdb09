"""Diagnosis records: what the analysis returns and every renderer reads."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "nsdiag.diagnosis/1"


@dataclass(frozen=True)
class Evidence:
    """A metric value next to the threshold it was compared with."""

    metric: str
    value: float | None
    op: str = ""
    threshold: float | None = None

    def as_text(self) -> str:
        value = "n/a" if self.value is None else f"{self.value:.3g}"
        return f"{self.metric} = {value}" + (f" {self.op} {self.threshold:g}" if self.op else "")


@dataclass(frozen=True)
class Finding:
    rule: str
    cause: str
    title: str
    impact: float  # fraction of the program's GPU time a fix could save
    recoverable: float  # fraction of this kernel's (or range's) time a fix could save
    message: str
    fix: str
    impact_basis: str = ""
    evidence: tuple[Evidence, ...] = ()
    kernel: str | None = None  # signature name, for program findings that point at kernels
    range: str | None = None  # NVTX range, for program findings
    saved_ns: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "cause": self.cause,
            "title": self.title,
            "impact": _num(self.impact),
            "recoverable": _num(self.recoverable),
            "evidence": {e.metric: _num(e.value) for e in self.evidence},
            "thresholds": {
                e.metric: {"op": e.op, "threshold": e.threshold} for e in self.evidence if e.op
            },
            "message": self.message,
            "fix": self.fix,
            "impact_basis": self.impact_basis,
        }
        if self.kernel is not None:
            out["kernel"] = self.kernel
        if self.saved_ns is not None:
            out["saved_ns"] = _num(self.saved_ns)
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True)
class Skipped:
    rule: str
    reason: str
    kernel: str | None = None


@dataclass
class KernelDiagnosis:
    id: int
    name: str
    demangled: str
    launches: int
    duration_ns: float  # total over launches
    time_share: float
    grid: str
    block: str
    bound: str
    limiter: str | None
    verdict: str  # one sentence
    verdict_note: str
    roofline: dict[str, Any]
    metrics: dict[str, float]
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    ncu_rules: list[dict[str, Any]] = field(default_factory=list)
    close_call: bool = False  # a unit within 5 points of a threshold decided bound or limiter

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "demangled": self.demangled,
            "launches": self.launches,
            "duration_ns": _num(self.duration_ns),
            "mean_duration_ns": _num(self.duration_ns / max(self.launches, 1)),
            "time_share": _num(self.time_share),
            "grid": self.grid,
            "block": self.block,
            "bound": self.bound,
            "limiter": self.limiter,
            "verdict": self.verdict,
            "verdict_note": self.verdict_note,
            "close_call": self.close_call,
            "roofline": clean(self.roofline),
            "metrics": clean(self.metrics),
            "findings": [f.to_json() for f in self.findings],
            "ncu_rules": self.ncu_rules,
        }


@dataclass
class Diagnosis:
    device: dict[str, Any]
    total_gpu_time_ns: float
    kernels: list[KernelDiagnosis]
    program_findings: list[Finding]
    skipped_rules: list[Skipped]
    meta: dict[str, Any] = field(default_factory=dict)

    def top_findings(self, n: int = 5) -> list[tuple[KernelDiagnosis | None, Finding]]:
        pairs: list[tuple[KernelDiagnosis | None, Finding]] = [
            (k, f) for k in self.kernels for f in k.findings
        ]
        pairs += [(None, f) for f in self.program_findings]
        return sorted(pairs, key=lambda p: -p[1].impact)[:n]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "device": self.device,
            "total_gpu_time_ns": _num(self.total_gpu_time_ns),
            "kernels": [k.to_json() for k in self.kernels],
            # Program findings always carry "range" (null when outside every NVTX range).
            "program_findings": [{**f.to_json(), "range": f.range} for f in self.program_findings],
            "skipped_rules": [
                {"rule": s.rule, "reason": s.reason, **({"kernel": s.kernel} if s.kernel else {})}
                for s in self.skipped_rules
            ],
            "meta": clean(self.meta),
        }


def _num(value: Any) -> Any:
    """JSON has no NaN: missing numbers become null."""
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return value
    if math.isnan(f) or math.isinf(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 and isinstance(value, int) else round(f, 6)


def clean(value: Any) -> Any:
    """Recursively make a structure JSON-safe (NaN -> null, numpy scalars -> Python)."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (str, bool)) or value is None:
        return value
    return _num(value)
