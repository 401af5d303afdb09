"""Roofline position of a kernel from its own metrics: FLOPs by precision, bytes per level,
arithmetic intensity, and the percent of the roof at that intensity.

Every kernel is placed under the roof of the precision it uses: CUDA-core work under the FP32,
FP64 or FP16 peak the report gives (`*.peak_sustained` per cycle x the SM clock during the
kernel); tensor-core work under the dense tensor peak of its precision at that clock
(`analysis/kernel/tensor.py`). A DRAM ceiling measured in the same session (the best bandwidth a
copy kernel reached), when known, is reported beside the theoretical one; every kernel is also
placed against the DRAM ceiling it is judged by (`memory_ceiling.py`: that measured ceiling, else
the architecture's default share of the peak).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nsdiag.analysis.kernel.memory_ceiling import cc_major_of, dram_ceiling
from nsdiag.analysis.kernel.tensor import TensorRoof, tensor_roof
from nsdiag.analysis.kernel.verdict import SATURATED_PCT
from nsdiag.analysis.records.kernel import MeasuredCeiling, Peaks, RooflinePosition
from nsdiag.model.values import number_or

if TYPE_CHECKING:  # annotations only: the rule loader runs without pandas
    import pandas as pd

_NAN = math.nan
PRECISIONS = ("fp32", "fp64", "fp16", "tensor")
_COPY_NAME = re.compile(r"copy", re.IGNORECASE)


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
    # the two cells read, not the row's hundreds (records() of one row cost 10-20 ms)
    best = copies.loc[[copies["dram_bytes_per_second"].idxmax()], ["dram_bytes_per_second", "name"]]
    bandwidth = float(best["dram_bytes_per_second"].iloc[0])
    return MeasuredCeiling(bandwidth, str(best["name"].iloc[0])) if bandwidth else None


def position(
    values: Mapping[str, Any],
    measured: MeasuredCeiling | None = None,
    device_name: str | None = None,
    device_cc: str | None = None,
) -> RooflinePosition:
    """Where one launch (or a signature's typical launch) sits under the device's roofs.
    `device_name` (ncu's display name) selects the lower tensor rates of some parts; `device_cc`
    the default DRAM ceiling where the launch's metrics do not say its compute capability."""
    duration_s = _get(values, "duration_ns") * 1e-9
    flops = {p: _get(values, f"flop_{p}") for p in PRECISIONS}
    counted = [v for v in flops.values() if not math.isnan(v)]
    total_flops = sum(counted) if counted else _NAN
    dram_bytes = _get(values, "dram_bytes")
    if math.isnan(dram_bytes):
        dram_bytes = _get(values, "dram_read_bytes") + _get(values, "dram_write_bytes")
    tensor = tensor_roof(values, device_name)
    ceil = peaks(values)
    # The precision doing most of the work sets the compute roof; a tensor-core kernel whose
    # report counts no tensor operations is still tensor work, of unknown precision.
    precision = max(
        (p for p in flops if not math.isnan(flops[p])), key=lambda p: flops[p], default="fp32"
    )
    if tensor is not None and tensor.precision is None:
        precision = "tensor"
    if precision == "tensor":
        ceil = replace(ceil, tensor_flops=tensor.peak_flops_per_s if tensor else _NAN)
    compute_peak = ceil.flops(precision)  # NaN where the roof is unknown
    intensity = total_flops / dram_bytes if dram_bytes and dram_bytes > 0 else _NAN
    achieved_flops = total_flops / duration_s if duration_s > 0 else _NAN
    achieved_bw = dram_bytes / duration_s if duration_s > 0 else _NAN
    ridge = compute_peak / ceil.dram_bytes_per_s if ceil.dram_bytes_per_s > 0 else _NAN
    on_memory_side = math.isnan(intensity) or math.isnan(ridge) or intensity < ridge
    of_ceiling = (
        100 * achieved_bw / measured.bytes_per_s
        if measured is not None and measured.bytes_per_s > 0 and not math.isnan(achieved_bw)
        else None
    )
    bandwidth_pct = 100 * achieved_bw / ceil.dram_bytes_per_s if ceil.dram_bytes_per_s > 0 else _NAN
    judged = dram_ceiling(
        ceil.dram_bytes_per_s,
        measured.bytes_per_s if measured is not None else None,
        measured.kernel if measured is not None else "",
        cc_major_of(values, device_cc),
    )
    side = "memory" if on_memory_side else "compute"
    if precision == "tensor":
        pct, side = _tensor_pct(tensor, intensity, ridge, bandwidth_pct)
    else:
        pct = _cuda_core_pct(achieved_flops, total_flops, compute_peak, intensity, ceil)
        pct = bandwidth_pct if math.isnan(pct) else pct
    return RooflinePosition(
        arithmetic_intensity=intensity,
        pct_of_roof=pct,
        side=side,
        precision=precision,
        achieved_flops_per_s=achieved_flops,
        achieved_dram_bytes_per_s=achieved_bw,
        flops=flops,
        dram_bytes=dram_bytes,
        l2_bytes=_get(values, "l2_bytes"),
        peaks=ceil,
        ridge_point=ridge,
        pct_of_measured_ceiling=of_ceiling,
        dram_ceiling=judged,
        pct_of_dram_ceiling=judged.pct(achieved_bw, _get(values, "dram_throughput_pct")),
        **_tensor_fields(tensor),
    )


def _cuda_core_pct(
    achieved: float, total: float, compute_peak: float, intensity: float, ceil: Peaks
) -> float:
    """Achieved / the roof at this intensity; NaN when the kernel does no FLOPs (the caller
    then uses the bandwidth: at the memory roof achieved/roof equals achieved bandwidth/peak
    bandwidth, which also places copies and transposes)."""
    memory_roof = intensity * ceil.dram_bytes_per_s
    roof = memory_roof if math.isnan(compute_peak) else min(compute_peak, memory_roof)
    if not math.isnan(roof) and roof > 0 and total > 0:
        return 100 * achieved / roof
    return _NAN


def _tensor_pct(
    tensor: TensorRoof | None, intensity: float, ridge: float, bandwidth_pct: float
) -> tuple[float, str]:
    """Percent of the roof and side for tensor work: under the memory slope (left of the tensor
    ridge) the bandwidth's share of the DRAM peak, under the flat tensor roof the tensor work's
    share of it. An unknown tensor roof gives no number and no side."""
    if tensor is None or math.isnan(tensor.pct_of_roof) or math.isnan(ridge):
        return _NAN, ""
    if not math.isnan(intensity) and intensity < ridge:
        return bandwidth_pct, "memory"
    return tensor.pct_of_roof, "compute"


def _tensor_fields(tensor: TensorRoof | None) -> dict[str, Any]:
    if tensor is None:
        return {}
    return {
        "tensor_precision": tensor.precision,
        "tensor_flops": dict(tensor.flops),
        "achieved_tensor_flops_per_s": tensor.achieved_flops_per_s,
        "tensor_peak_flops_per_s": tensor.peak_flops_per_s,
        "pct_of_tensor_roof": tensor.pct_of_roof,
        "note": tensor.note,
    }
