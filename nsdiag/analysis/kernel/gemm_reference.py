"""What a well-aligned matrix kernel reaches on this GPU, per tensor precision: the yardstick
of the gemm-misaligned estimate.

In order of preference:
1. this program's own aligned tensor-core GEMMs and convolutions of that precision (no fallback
   reason, kernel_facts): their tensor FLOP/s weighted by time;
2. a reference GEMM measured on this GPU model (REFERENCE_GEMMS: shape, rate and where it was
   measured), for programs whose aligned GEMMs were not profiled;
3. none: the finding then has no estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nsdiag.analysis.records.kernel import RooflinePosition
from nsdiag.model.kernel_facts import fallback_reasons, parse_kernel_name
from nsdiag.model.tensor_peaks import parse_cc

MATRIX_KINDS = frozenset({"gemm", "conv-fprop", "conv-dgrad", "conv-wgrad"})


@dataclass(frozen=True)
class GemmReference:
    precision: str
    flops_per_s: float
    source: str  # where the rate comes from, for the finding's message


# Measured with benchmarks/programs/gemm_shapes.py on the project's H200 (2026-11-30, no profiler
# attached, tests/data/programs/logs/gemm_timing.log): an LM head's forward + backward GEMMs,
# 8192 tokens x 768 x 50,304 (padded vocabulary), cuBLAS nvjet wgmma kernels.
REFERENCE_GEMMS: dict[tuple[str, str], GemmReference] = {
    ("H200", "fp16"): GemmReference(
        "fp16", 705.1e12, "an aligned fp16 GEMM measured on an H200 (8192x768x50304)"
    ),
    ("H200", "bf16"): GemmReference(
        "bf16", 720.8e12, "an aligned bf16 GEMM measured on an H200 (8192x768x50304)"
    ),
}


@dataclass(frozen=True)
class MatrixKernel:
    """What the reference needs of one kernel signature."""

    name: str
    time_ns: float
    roofline: RooflinePosition


def is_fallback(name: str, cc: str | None) -> list[str]:
    """Why a GEMM or convolution kernel is a fallback on this device (empty: it is not)."""
    facts = parse_kernel_name(name)
    if facts.kind not in MATRIX_KINDS:
        return []
    parsed = parse_cc(cc) if cc else None
    if parsed is None:
        return []
    return fallback_reasons(facts, parsed[0] * 10 + parsed[1])


def references(
    kernels: Iterable[MatrixKernel], cc: str | None, device_name: str
) -> dict[str, GemmReference]:
    """The yardstick per tensor precision (module docstring)."""
    weighted: dict[str, list[tuple[float, float]]] = {}
    count: dict[str, int] = {}
    for k in kernels:
        r = k.roofline
        rate = r.achieved_tensor_flops_per_s
        if r.tensor_precision is None or not math.isfinite(rate) or rate <= 0:
            continue
        facts = parse_kernel_name(k.name)
        if facts.kind not in MATRIX_KINDS or is_fallback(k.name, cc):
            continue
        weighted.setdefault(r.tensor_precision, []).append((rate, k.time_ns))
        count[r.tensor_precision] = count.get(r.tensor_precision, 0) + 1
    out: dict[str, GemmReference] = {}
    for precision, pairs in weighted.items():
        total = sum(t for _, t in pairs)
        if total > 0:
            rate = sum(rate * t for rate, t in pairs) / total
            source = f"this program's {count[precision]} aligned {precision} matrix kernel(s)"
            out[precision] = GemmReference(precision, rate, source)
    for (model, precision), measured in REFERENCE_GEMMS.items():
        if model in device_name and precision not in out:
            out[precision] = measured
    return out


def reference_for(
    refs: Mapping[str, GemmReference], roofline: RooflinePosition
) -> GemmReference | None:
    return refs.get(roofline.tensor_precision) if roofline.tensor_precision else None
