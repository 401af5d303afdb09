"""Roofline position of a kernel from its own metrics: FLOPs by precision, bytes per level,
arithmetic intensity, and the percent of the roof at that intensity.

Peaks come from the report (`*.peak_sustained` per cycle x the clock during the kernel); a DRAM
ceiling measured in the same session (the best bandwidth a copy kernel reached), when known, is
reported beside the theoretical one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nsdiag.analysis.verdict import SATURATED_PCT
from nsdiag.model.tables import records
from nsdiag.model.values import number_or

_NAN = math.nan
PRECISIONS = ("fp32", "fp64", "fp16", "tensor")
_COPY_NAME = re.compile(r"copy", re.IGNORECASE)


@dataclass(frozen=True)
class Peaks:
    """FLOP/s and bytes/s ceilings of the device (NaN where the report lacks them)."""

    fp32_flops: float
    fp64_flops: float
    fp16_flops: float
    dram_bytes_per_s: float
    tensor_flops: float = _NAN  # no tensor peak in the metrics; kept out of the roof

    def flops(self, precision: str) -> float:
        value: float = getattr(self, f"{precision}_flops")
        return value

    def to_json(self) -> dict[str, float]:
        return {
            "fp32_flops": self.fp32_flops,
            "fp64_flops": self.fp64_flops,
            "fp16_flops": self.fp16_flops,
            "dram_bytes_per_s": self.dram_bytes_per_s,
            "tensor_flops": self.tensor_flops,
        }


@dataclass(frozen=True)
class MeasuredCeiling:
    """The best DRAM bandwidth a copy kernel reached in the session."""

    bytes_per_s: float
    kernel: str

    def to_json(self) -> dict[str, Any]:
        return {"bytes_per_s": self.bytes_per_s, "kernel": self.kernel}


@dataclass(frozen=True)
class RooflinePosition:
    arithmetic_intensity: float  # FLOP per DRAM byte
    pct_of_roof: float  # achieved / roof at this intensity; NaN where the roof is unknown
    side: str  # of the ridge point: "memory" or "compute"
    precision: str  # the precision doing most of the work: fp32, fp64, fp16 or tensor
    achieved_flops_per_s: float
    achieved_dram_bytes_per_s: float
    flops: Mapping[str, float]  # by precision
    dram_bytes: float
    l2_bytes: float
    peaks: Peaks
    ridge_point: float
    pct_of_measured_ceiling: float | None = None  # when the session has a measured ceiling

    def to_json(self, ceiling: MeasuredCeiling | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "arithmetic_intensity": self.arithmetic_intensity,
            "pct_of_roof": self.pct_of_roof,
            "side": self.side,
            "precision": self.precision,
            "achieved_flops_per_s": self.achieved_flops_per_s,
            "achieved_dram_bytes_per_s": self.achieved_dram_bytes_per_s,
            "flops": dict(self.flops),
            "bytes": {"dram": self.dram_bytes, "l2": self.l2_bytes},
            "peaks": self.peaks.to_json(),
            "ridge_point": self.ridge_point,
        }
        if ceiling is not None and self.pct_of_measured_ceiling is not None:
            out["measured_dram_ceiling_bytes_per_s"] = ceiling.bytes_per_s
            out["pct_of_measured_ceiling"] = self.pct_of_measured_ceiling
        return out


def _get(values: Mapping[str, Any], name: str) -> float:
    return number_or(values.get(name), _NAN)


def peaks(values: Mapping[str, Any]) -> Peaks:
    """The device's ceilings, from one kernel's metrics."""
    sm_hz = _get(values, "sm_cycles_per_second")
    if math.isnan(sm_hz):
        sm_hz = _get(values, "sm_frequency_hz")
    dram_bw = _get(values, "dram_bytes_peak_per_second")
    if math.isnan(dram_bw):
        dram_bw = _get(values, "dram_bytes_peak_per_cycle") * _get(values, "dram_frequency_hz")
    return Peaks(
        fp32_flops=2 * _get(values, "ffma_peak_per_cycle") * sm_hz,
        fp64_flops=2 * _get(values, "dfma_peak_per_cycle") * sm_hz,
        fp16_flops=4 * _get(values, "hfma_peak_per_cycle") * sm_hz,
        dram_bytes_per_s=dram_bw,
    )


def measured_dram_ceiling(kernels: pd.DataFrame) -> MeasuredCeiling | None:
    """The best DRAM bandwidth a copy kernel reached in this session (a measured ceiling).

    Copies do no arithmetic, so their bandwidth is what this GPU can actually sustain; a copy
    under SATURATED_PCT of the theoretical peak is not a ceiling (too small, or not streaming).
    """
    if kernels.empty or "dram_bytes_per_second" not in kernels or "name" not in kernels:
        return None
    copies = kernels[
        kernels["name"].astype(str).str.contains(_COPY_NAME)
        & (kernels.get("dram_throughput_pct", 0) >= SATURATED_PCT)
    ]
    if copies.empty:
        return None
    best = records(copies.loc[[copies["dram_bytes_per_second"].idxmax()]])[0]
    bandwidth = float(best["dram_bytes_per_second"])
    return MeasuredCeiling(bandwidth, str(best["name"])) if bandwidth else None


def position(
    values: Mapping[str, Any], measured: MeasuredCeiling | None = None
) -> RooflinePosition:
    """Where one launch (or a signature's typical launch) sits under the device's roofs."""
    duration_s = _get(values, "duration_ns") * 1e-9
    flops = {p: _get(values, f"flop_{p}") for p in PRECISIONS}
    counted = [v for v in flops.values() if not math.isnan(v)]
    total_flops = sum(counted) if counted else _NAN
    dram_bytes = _get(values, "dram_bytes")
    if math.isnan(dram_bytes):
        dram_bytes = _get(values, "dram_read_bytes") + _get(values, "dram_write_bytes")
    ceil = peaks(values)
    # The precision doing most of the work sets the compute roof.
    precision = max(
        (p for p in flops if not math.isnan(flops[p])), key=lambda p: flops[p], default="fp32"
    )
    compute_peak = ceil.flops(precision)  # NaN for tensor work: ncu reports no tensor peak
    intensity = total_flops / dram_bytes if dram_bytes and dram_bytes > 0 else _NAN
    achieved_flops = total_flops / duration_s if duration_s > 0 else _NAN
    achieved_bw = dram_bytes / duration_s if duration_s > 0 else _NAN
    memory_roof = intensity * ceil.dram_bytes_per_s
    roof = memory_roof if math.isnan(compute_peak) else min(compute_peak, memory_roof)
    ridge = compute_peak / ceil.dram_bytes_per_s if ceil.dram_bytes_per_s > 0 else _NAN
    on_memory_side = math.isnan(intensity) or math.isnan(ridge) or intensity < ridge
    of_ceiling = (
        100 * achieved_bw / measured.bytes_per_s
        if measured is not None and measured.bytes_per_s > 0 and not math.isnan(achieved_bw)
        else None
    )
    # At the memory roof, achieved/roof equals achieved bandwidth/peak bandwidth, which also
    # covers kernels that do no floating-point work (copies, transposes).
    if precision == "tensor" and intensity >= 1:
        pct = _NAN  # ncu reports no tensor-core peak: the roof at this intensity is unknown
    elif not math.isnan(roof) and roof > 0 and total_flops > 0:
        pct = 100 * achieved_flops / roof
    else:
        pct = 100 * achieved_bw / ceil.dram_bytes_per_s if ceil.dram_bytes_per_s > 0 else _NAN
    return RooflinePosition(
        arithmetic_intensity=intensity,
        pct_of_roof=pct,
        side="memory" if on_memory_side else "compute",
        precision=precision,
        achieved_flops_per_s=achieved_flops,
        achieved_dram_bytes_per_s=achieved_bw,
        flops=flops,
        dram_bytes=dram_bytes,
        l2_bytes=_get(values, "l2_bytes"),
        peaks=ceil,
        ridge_point=ridge,
        pct_of_measured_ceiling=of_ceiling,
    )
