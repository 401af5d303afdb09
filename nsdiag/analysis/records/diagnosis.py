"""The diagnosis: what the analysis returns and every renderer reads, per kernel signature and
for the program (analysis/engine.py builds it).

Records serialise themselves (`to_json`) into the schema of docs/diagnosis.schema.json; the
names inside the code may differ from the JSON's (a kernel's `total_duration_ns` is the JSON's
`duration_ns`). The ranked list is of changes (analysis/changes.py): findings grouped by the
change that fixes them, each change's saving marginal after the changes ranked above it, never
past the region.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nsdiag.analysis.records.changes import Change
from nsdiag.analysis.records.findings import Finding, Skipped
from nsdiag.analysis.records.jsonsafe import clean, json_number
from nsdiag.analysis.records.kernel import MeasuredCeiling, RooflinePosition
from nsdiag.analysis.records.ranks import RankAnalysis
from nsdiag.analysis.records.region import Region, Startup

SCHEMA = "nsdiag.diagnosis/4"


@dataclass(frozen=True)
class NcuRuleResult:
    """One of Nsight Compute's own rule results for a kernel (a second opinion)."""

    rule: str
    section: str
    type: str  # OPT or WRN
    message: str
    speedup_type: str | None
    speedup: float | None  # ncu's estimated speedup, %

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "section": self.section,
            "type": self.type,
            "message": self.message,
            "speedup_type": self.speedup_type,
            "speedup": self.speedup,
        }


@dataclass(frozen=True)
class TimelineSummary:
    """What the nsys timeline holds: activity counts by kind, and its wall span."""

    activities: Mapping[str, int]
    span_ns: float

    def to_json(self) -> dict[str, Any]:
        return {"activities": dict(self.activities), "span_ns": self.span_ns}


@dataclass(frozen=True)
class KernelDiagnosis:
    id: int
    name: str
    demangled: str
    launches: int
    total_duration_ns: float  # over all launches (the JSON's duration_ns)
    time_share: float
    grid: str
    block: str
    bound: str
    limiter: str | None
    verdict: str  # one sentence
    verdict_note: str
    roofline: RooflinePosition
    # The signature's typical launch: per-launch metrics as means over its profiled launches,
    # under their catalogue names, then the signature's own values (total_duration_ns,
    # profiled_mean_ns, launches, duration groups, region_mean_ns).
    metrics: Mapping[str, float]
    findings: tuple[Finding, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    ncu_rules: tuple[NcuRuleResult, ...] = ()
    close_call: bool = False  # a unit within 5 points of a threshold decided bound or limiter

    @property
    def region_mean_ns(self) -> float:
        """The mean launch in the analysed region: its total over its launches (the timeline's,
        where there is one)."""
        return self.total_duration_ns / max(self.launches, 1)

    @property
    def profiled_mean_ns(self) -> float:
        """The mean of the profiled launches (the typical launch's `duration_ns`)."""
        value = self.metrics.get("profiled_mean_ns", math.nan)
        return float(value) if isinstance(value, (int, float)) else math.nan

    def to_json(
        self, ceiling: MeasuredCeiling | None = None, iterations: int = 0
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "demangled": self.demangled,
            "launches": self.launches,
            "duration_ns": json_number(self.total_duration_ns),
            "region_mean_ns": json_number(self.region_mean_ns),
            "profiled_mean_ns": json_number(self.profiled_mean_ns),
            "time_share": json_number(self.time_share),
            "grid": self.grid,
            "block": self.block,
            "bound": self.bound,
            "limiter": self.limiter,
            "verdict": self.verdict,
            "verdict_note": self.verdict_note,
            "close_call": self.close_call,
            "roofline": clean(self.roofline.to_json(ceiling)),
            "metrics": clean(self.metrics),
            "findings": [f.to_json(iterations) for f in self.findings],
            "ncu_rules": [r.to_json() for r in self.ncu_rules],
        }


@dataclass(frozen=True)
class Diagnosis:
    device: Mapping[str, Any]
    total_gpu_time_ns: float  # profiled kernels' GPU time (in the region, where there is one)
    kernels: Sequence[KernelDiagnosis]
    program_findings: Sequence[Finding]
    skipped_rules: Sequence[Skipped]
    meta: Mapping[str, Any] = field(default_factory=dict)  # sources, launches, provenance
    measured_dram_ceiling: MeasuredCeiling | None = None
    timeline: TimelineSummary | None = None
    region: Region | None = None  # the analysed part of the timeline (None: no timeline)
    startup: Startup | None = None  # what ran before the region, never ranked
    wall_ns: float = 0.0  # the currency's denominator: the region's wall time, else GPU time
    kernels_outside_region: int = 0  # profiled signatures that ran only outside the region
    ranks: RankAnalysis | None = None  # per-rank step breakdown (distributed runs)
    # What is wrong with the inputs (a value left out, a table missing, an incomplete profile):
    # shown before the findings, which rest on what is left.
    warnings: tuple[str, ...] = ()
    # The findings as changes the user makes, ranked by marginal saving (analysis/changes.py).
    changes: tuple[Change, ...] = ()

    @property
    def iterations(self) -> int:
        return len(self.region.iterations) if self.region is not None else 0

    def top_findings(self, n: int = 5) -> list[tuple[KernelDiagnosis | None, Finding]]:
        """Findings of every kind, most time saved in the region first (each on its own: what to
        do first is `top_changes`)."""
        pairs: list[tuple[KernelDiagnosis | None, Finding]] = [
            (k, f) for k in self.kernels for f in k.findings
        ]
        pairs += [(None, f) for f in self.program_findings]
        return sorted(pairs, key=lambda p: p[1].rank_key)[:n]

    def top_changes(self, n: int = 5) -> list[Change]:
        """What to change first: changes by marginal saving, no estimate last."""
        return list(self.changes[:n])

    def to_json(self) -> dict[str, Any]:
        meta = dict(self.meta)
        if self.measured_dram_ceiling is not None:
            meta["measured_dram_ceiling"] = self.measured_dram_ceiling.to_json()
        if self.timeline is not None:
            meta["timeline"] = self.timeline.to_json()
        n = self.iterations
        return {
            "schema": SCHEMA,
            "warnings": list(self.warnings),
            "device": dict(self.device),
            "total_gpu_time_ns": json_number(self.total_gpu_time_ns),
            "wall_ns": json_number(self.wall_ns),
            "region": clean(self.region.to_json()) if self.region is not None else None,
            "startup": clean(self.startup.to_json()) if self.startup is not None else None,
            "kernels_outside_region": self.kernels_outside_region,
            "kernels": [k.to_json(self.measured_dram_ceiling, n) for k in self.kernels],
            # Program findings always carry "range" (null when outside every NVTX range).
            "program_findings": [{**f.to_json(n), "range": f.range} for f in self.program_findings],
            "changes": [clean(c.to_json(n)) for c in self.changes],
            "skipped_rules": [s.to_json() for s in self.skipped_rules],
            "meta": clean(meta),
            **({"ranks": clean(self.ranks.to_json())} if self.ranks is not None else {}),
        }
