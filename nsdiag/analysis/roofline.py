"""Roofline position of a kernel from its own metrics: FLOPs by precision, bytes per level,
arithmetic intensity, and the percent of the roof at that intensity.

Peaks come from the report (`*.peak_sustained` per cycle x the clock during the kernel); a DRAM
ceiling measured in the same session, when known, is reported beside the theoretical one.
"""

from __future__ import annotations

import math
from typing import Any

_NAN = math.nan


def _get(values: dict[str, Any], name: str) -> float:
    value = values.get(name)
    try:
        return float(value) if value is not None else _NAN
    except (TypeError, ValueError):
        return _NAN


def peaks(values: dict[str, Any]) -> dict[str, float]:
    """FLOP/s and bytes/s ceilings of the device, from one kernel's metrics."""
    sm_hz = _get(values, "sm_cycles_per_second")
    if math.isnan(sm_hz):
        sm_hz = _get(values, "sm_frequency_hz")
    dram_bw = _get(values, "dram_bytes_peak_per_second")
    if math.isnan(dram_bw):
        dram_bw = _get(values, "dram_bytes_peak_per_cycle") * _get(values, "dram_frequency_hz")
    return {
        "fp32_flops": 2 * _get(values, "ffma_peak_per_cycle") * sm_hz,
        "fp64_flops": 2 * _get(values, "dfma_peak_per_cycle") * sm_hz,
        "fp16_flops": 4 * _get(values, "hfma_peak_per_cycle") * sm_hz,
        "dram_bytes_per_s": dram_bw,
        "tensor_flops": _NAN,  # no tensor peak in the metrics; kept out of the roof
    }


def position(
    values: dict[str, Any], measured_dram_bytes_per_s: float | None = None
) -> dict[str, Any]:
    duration_s = _get(values, "duration_ns") * 1e-9
    flops = {p: _get(values, f"flop_{p}") for p in ("fp32", "fp64", "fp16", "tensor")}
    total_flops = (
        sum(v for v in flops.values() if not math.isnan(v))
        if any(not math.isnan(v) for v in flops.values())
        else _NAN
    )
    dram_bytes = _get(values, "dram_bytes")
    if math.isnan(dram_bytes):
        dram_bytes = _get(values, "dram_read_bytes") + _get(values, "dram_write_bytes")
    ceil = peaks(values)
    # The precision doing most of the work sets the compute roof.
    precision = max(
        (p for p in flops if not math.isnan(flops[p])), key=lambda p: flops[p], default="fp32"
    )
    compute_peak = ceil[f"{precision}_flops"]  # NaN for tensor work: ncu reports no tensor peak
    intensity = total_flops / dram_bytes if dram_bytes and dram_bytes > 0 else _NAN
    achieved_flops = total_flops / duration_s if duration_s > 0 else _NAN
    achieved_bw = dram_bytes / duration_s if duration_s > 0 else _NAN
    memory_roof = intensity * ceil["dram_bytes_per_s"]
    roof = memory_roof if math.isnan(compute_peak) else min(compute_peak, memory_roof)
    # At the memory roof, achieved/roof equals achieved bandwidth/peak bandwidth, which also
    # covers kernels that do no floating-point work (copies, transposes).
    if precision == "tensor" and intensity >= 1:
        pct = _NAN  # ncu reports no tensor-core peak: the roof at this intensity is unknown
    elif not math.isnan(roof) and roof > 0 and total_flops > 0:
        pct = 100 * achieved_flops / roof
    else:
        pct = 100 * achieved_bw / ceil["dram_bytes_per_s"] if ceil["dram_bytes_per_s"] > 0 else _NAN
    ridge = compute_peak / ceil["dram_bytes_per_s"] if ceil["dram_bytes_per_s"] > 0 else _NAN
    out: dict[str, Any] = {
        "arithmetic_intensity": intensity,
        "pct_of_roof": pct,
        "side": ("memory" if intensity < ridge else "compute")
        if not (math.isnan(intensity) or math.isnan(ridge))
        else "memory",
        "precision": precision,
        "achieved_flops_per_s": achieved_flops,
        "achieved_dram_bytes_per_s": achieved_bw,
        "flops": {p: v for p, v in flops.items()},
        "bytes": {"dram": dram_bytes, "l2": _get(values, "l2_bytes")},
        "peaks": ceil,
        "ridge_point": ridge,
    }
    if measured_dram_bytes_per_s and measured_dram_bytes_per_s > 0 and not math.isnan(achieved_bw):
        out["measured_dram_ceiling_bytes_per_s"] = measured_dram_bytes_per_s
        out["pct_of_measured_ceiling"] = 100 * achieved_bw / measured_dram_bytes_per_s
    return out
