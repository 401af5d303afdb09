"""The comparison's record and its JSON document (schema nsdiag.diff/1, docs/diff.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from nsdiag.analysis.diff.by_change import ChangeOutcome
from nsdiag.analysis.diff.findings import ChangeCheck, FindingChange, PredictionCheck, Scoped
from nsdiag.analysis.diff.gate import Gate, GateCheck
from nsdiag.analysis.diff.kernels import KernelMatch
from nsdiag.analysis.diff.noise import RunNoise, run_noise
from nsdiag.analysis.diff.side import KernelTimes, Side
from nsdiag.analysis.diff.stats import Spread, p_greater, p_less
from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.analysis.records.jsonsafe import clean

SCHEMA = "nsdiag.diff/1"


@dataclass(frozen=True)
class RegionChange:
    """The region's time, per iteration where a side has iterations, and how it changed."""

    before: Spread
    after: Spread
    unit: str  # iteration | region | mixed
    note: str  # what is compared with what, where the two sides differ
    before_runs: tuple[float, ...] = ()  # each run's median (the first: `before`'s)
    after_runs: tuple[float, ...] = ()

    @property
    def noise(self) -> RunNoise:
        """The run-to-run noise of the region's time (measured with several runs a side)."""
        return run_noise(
            self.before_runs or (self.before.median,), self.after_runs or (self.after.median,)
        )

    @property
    def change_ns(self) -> float:
        return self.after.median - self.before.median

    @property
    def change_pct(self) -> float | None:
        b = self.before.median
        return self.change_ns / b * 100 if b > 0 else None

    @property
    def p_slower(self) -> float | None:
        return p_greater(self.before.samples, self.after.samples)

    @property
    def p_faster(self) -> float | None:
        return p_less(self.before.samples, self.after.samples)


def region_change(before: Side, after: Side) -> RegionChange:
    change = _region_change(before, after)
    runs = tuple(r.median_ns for r in before.runs), tuple(r.median_ns for r in after.runs)
    return replace(change, before_runs=runs[0], after_runs=runs[1])


def _region_change(before: Side, after: Side) -> RegionChange:
    b, a = before.iterations, after.iterations
    if b and a:
        return RegionChange(before.region_time, after.region_time, "iteration", "")
    if not b and not a:
        what = {"gpu-time": "the profiled GPU time", "region": "the analysed region"}
        note = (
            f"neither side has iterations: {what[before.basis]} of BEFORE against "
            f"{what[after.basis]} of AFTER"
        )
        if "region" in (before.basis, after.basis):  # a timeline: its NVTX loops can be named
            note += (
                "; to compare per iteration with its noise, name the repeating NVTX range of "
                "each side: --before-region nvtx:NAME --after-region nvtx:NAME"
            )
        return RegionChange(before.region_time, after.region_time, "region", note)
    has, lacks = ("BEFORE", "AFTER") if b else ("AFTER", "BEFORE")
    note = (
        f"only {has} has iterations: one iteration of {has} is compared with the whole region "
        f"of {lacks} (right when {lacks}'s region is one iteration, as a profiler range around "
        "one step is)"
    )
    return RegionChange(before.region_time, after.region_time, "mixed", note)


@dataclass(frozen=True)
class Diff:
    before: Side
    after: Side
    region: RegionChange
    matches: tuple[KernelMatch, ...]  # most time (either side) first
    findings: tuple[FindingChange, ...]
    check: PredictionCheck | None  # None: no resolved finding with an estimate
    gate: Gate | None = None
    changes: tuple[ChangeCheck, ...] = ()  # BEFORE's changes made in full, most saving first
    by_change: tuple[ChangeOutcome, ...] = ()  # the prediction check per change, as ranked
    warnings: tuple[str, ...] = ()  # the two sides look like different programs (sameness.py)

    def match(self, match_id: int) -> KernelMatch:
        return self.matches[match_id]

    def to_json(self) -> dict[str, Any]:
        out = {
            "schema": SCHEMA,
            "warnings": list(self.warnings),
            "before": _side(self.before),
            "after": _side(self.after),
            "region": _region(self.region),
            "kernels": [_match(m, self) for m in self.matches],
            "findings": [_finding(c) for c in self.findings],
            "changes": [_change(m) for m in self.changes],
            "prediction_by_change": [r.to_json() for r in self.by_change],
            "prediction_check": None
            if self.check is None
            else {
                "predicted_ns": self.check.predicted_ns,
                "measured_ns": self.check.measured_ns,
                "ratio": self.check.ratio,
                "findings": self.check.findings,
                "changes": self.check.changes,
            },
            "gate": None if self.gate is None else _gate(self.gate),
        }
        return dict(clean(out))


def _side(side: Side) -> dict[str, Any]:
    d = side.diagnosis
    return {
        "sources": list(side.sources),
        "device": dict(d.device),
        "basis": side.basis,
        "description": side.describe(),
        "region": d.region.to_json() if d.region is not None else None,
        "iterations": side.iterations,
        "kernel_metrics": bool(d.kernels),
        "kernel_signatures": len(side.kernels),
        "kernel_time_ns": side.kernel_time_ns,
        "runs": [
            {"sources": list(r.sources), "region": r.region_time.to_json()} for r in side.runs
        ],
    }


def _region(r: RegionChange) -> dict[str, Any]:
    return {
        "unit": r.unit,
        "note": r.note,
        "before": r.before.to_json(),
        "after": r.after.to_json(),
        "change_ns": r.change_ns,
        "change_pct": r.change_pct,
        "p_slower": r.p_slower,
        "p_faster": r.p_faster,
        "runs_before_ns": list(r.before_runs),
        "runs_after_ns": list(r.after_runs),
        "run_noise": r.noise.to_json(),
    }


def _verdict(k: KernelDiagnosis | None) -> dict[str, Any] | None:
    if k is None:
        return None
    return {
        "bound": k.bound,
        "limiter": k.limiter,
        "pct_of_roof": k.roofline.pct_of_roof,
        "arithmetic_intensity": k.roofline.arithmetic_intensity,
    }


def _kernel(k: KernelTimes) -> dict[str, Any]:
    return {
        "name": k.name,
        "grid": k.grid,
        "block": k.block,
        "duration_group": k.variant,
        "launches_per_iteration": k.launches_per_iteration,
        "time_ns": k.time_ns,
        "verdict": _verdict(k.diagnosis),
    }


def _match(m: KernelMatch, diff: Diff) -> dict[str, Any]:
    return {
        "id": m.id,
        "method": m.method,
        "how": m.how(),
        "role": m.role,
        "before": [_kernel(k) for k in m.before],
        "after": [_kernel(k) for k in m.after],
        "before_ns": m.before_ns,
        "after_ns": m.after_ns,
        "change_ns": m.change_ns,
        "launches_before": m.launches("before"),
        "launches_after": m.launches("after"),
        "before_per_launch_ns": m.per_launch_ns("before"),
        "after_per_launch_ns": m.per_launch_ns("after"),
        "per_launch_change_pct": m.per_launch_change_pct,
        "share_before": m.before_ns / diff.region.before.mean if diff.region.before.mean else None,
        "share_after": m.after_ns / diff.region.after.mean if diff.region.after.mean else None,
    }


def _scoped(s: Scoped | None) -> dict[str, Any] | None:
    if s is None:
        return None
    f = s.finding
    return {
        "kernel": s.kernel.name if s.kernel is not None else f.kernel,
        "range": f.range,
        "saved_ns": f.saved_ns,
        "message": f.message,
        "kernel_matches": sorted(s.matches),
    }


def _finding(c: FindingChange) -> dict[str, Any]:
    f = c.finding
    return {
        "status": c.status,
        "rule": f.rule,
        "cause": f.cause,
        "title": f.title,
        "scope": c.scope,
        "before": _scoped(c.before),
        "after": _scoped(c.after),
        "predicted_ns": c.predicted_ns,
        "after_saved_ns": c.after_saved_ns,
        "expected_ns": c.expected_ns,
        "measured_ns": c.measured_ns,
        "measured_on": c.measured_on or None,
        "ratio": c.ratio,
        "measured_shared_by": c.shared,
        "how": c.how,
        "counted": c.counted,
        "change": c.change,
        "evidence": None
        if c.evidence is None
        else {"status": c.evidence.status, "why": c.evidence.why},
    }


def _change(m: ChangeCheck) -> dict[str, Any]:
    c = m.change
    return {
        "key": c.key,
        "title": c.title,
        "rules": list(c.rules),
        "findings": m.findings,
        "predicted_ns": m.predicted_ns,
        "summed_ns": m.summed_ns,
        "measured_ns": m.measured_ns,
        "measured_on": m.measured_on or None,
        "ratio": m.ratio,
        "measured_shared_by": m.shared,
        "kernel_matches": sorted(m.matches),
    }


def _check(c: GateCheck) -> dict[str, Any]:
    return {
        "what": c.what,
        "kernel_match": c.match,
        "before": c.before.to_json(),
        "after": c.after.to_json(),
        "change_pct": c.change_pct,
        "p_value": c.p_value,
        "over_threshold": c.over_threshold,
        "beyond_noise": c.beyond_noise,
        "clear_of_spread": c.clear_of_spread,
        "runs_before_ns": list(c.before_runs),
        "runs_after_ns": list(c.after_runs),
        "beyond_run_noise": c.beyond_run_noise,
        "run_noise": c.noise.to_json(),
        "slower": c.slower,
    }


def _gate(g: Gate) -> dict[str, Any]:
    return {
        "threshold_pct": g.threshold_pct,
        "share_pct": g.share_pct,
        "passed": g.passed,
        "run_noise": g.noise.to_json(),
        "checks": [_check(c) for c in g.checks],
    }
