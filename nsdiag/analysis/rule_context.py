"""The names a rule may use, in one registry, and the values a kernel rule sees.

A rule's condition, impact, evidence and message read names from:
- catalogue metrics (nsdiag/model/catalogue.py): per launch; on a kernel signature, the mean
  over its profiled launches (so `duration_ns` is the signature's mean launch);
- derived metrics (`derived.DERIVED_METRICS`), computed per launch from catalogue metrics;
- signature values (`SIGNATURE_VALUES`), computed when launches are grouped into signatures;
- context values (`CONTEXT_VALUES`), computed per signature from its verdict, roofline and share
  of GPU time: adding one is one entry here;
- named constants (`CONSTANTS`), thresholds that the code and the rules share;
- a rule's own `params`.
The rule loader accepts exactly these names (`rule_names`), so a typo fails when rules load.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nsdiag.analysis.derived import DERIVED_METRICS
from nsdiag.analysis.gemm_reference import GemmReference, is_fallback
from nsdiag.analysis.roofline import RooflinePosition
from nsdiag.analysis.verdict import LAUNCH_NS, SATURATED_PCT, Verdict
from nsdiag.model.catalogue import CATALOGUE
from nsdiag.model.gpu_units import FP_PIPES
from nsdiag.model.values import number, number_or

_GEMM_NAME = re.compile(r"gemm|sm\d+_xmma|cutlass|matmul|mma", re.IGNORECASE)

CONSTANTS: dict[str, float] = {
    "SATURATED_PCT": SATURATED_PCT,  # a unit this busy (% of peak) is saturated
    "LAUNCH_NS": LAUNCH_NS,  # a kernel shorter than this costs about what its launch costs
}
SIGNATURE_VALUES: dict[str, str] = {
    "launches": "Launches of the signature (the timeline's count where it knows more).",
    "mean_duration_ns": "Mean duration of the signature's profiled launches.",
    "total_duration_ns": "Duration of all the signature's launches together.",
}


@dataclass(frozen=True)
class KernelFacts:
    """What a context value is computed from."""

    launch: Mapping[str, Any]  # the signature's typical launch (its row)
    verdict: Verdict
    roofline: RooflinePosition
    time_share: float
    device_cc: str | None = None  # the GPU's compute capability, "9.0"
    reference: GemmReference | None = None  # what aligned matrix kernels reach (its precision)


@dataclass(frozen=True)
class ContextValue:
    description: str
    compute: Callable[[KernelFacts], float]


def _fp_pipe_pct(facts: KernelFacts) -> float:
    pipes = [number(facts.launch.get(p)) for p in FP_PIPES]
    return max((p for p in pipes if p is not None), default=math.nan)


def _fallback_reasons(facts: KernelFacts) -> list[str]:
    return is_fallback(
        str(facts.launch.get("demangled") or facts.launch.get("name", "")), facts.device_cc
    )


def _reference_rate(facts: KernelFacts) -> float:
    return facts.reference.flops_per_s if facts.reference is not None else math.nan


def _of_ceiling(facts: KernelFacts) -> float:
    pct = facts.roofline.pct_of_measured_ceiling
    return math.nan if pct is None else pct


CONTEXT_VALUES: dict[str, ContextValue] = {
    "gemm_fallback": ContextValue(
        "1 when the kernel is a GEMM or convolution running a fallback kernel on this GPU (built "
        "for an older architecture, or aligned below 16 bytes: model/kernel_facts.py), else 0.",
        lambda f: 1.0 if _fallback_reasons(f) else 0.0,
    ),
    "tensor_flops_per_s": ContextValue(
        "Tensor-core FLOP/s the kernel reaches.", lambda f: f.roofline.achieved_tensor_flops_per_s
    ),
    "pct_of_tensor_roof": ContextValue(
        "Tensor-core FLOP/s as % of the dense peak of their precision at the kernel's clock.",
        lambda f: f.roofline.pct_of_tensor_roof,
    ),
    "aligned_tensor_flops_per_s": ContextValue(
        "Tensor-core FLOP/s aligned matrix kernels of the same precision reach on this GPU "
        "(analysis/gemm_reference.py).",
        _reference_rate,
    ),
    "time_share": ContextValue("Share of the program's GPU time (0-1).", lambda f: f.time_share),
    "mem_pct": ContextValue("The busiest memory unit, % of its peak.", lambda f: f.verdict.mem_pct),
    "compute_pct": ContextValue(
        "The busiest compute pipe, % of its peak.", lambda f: f.verdict.compute_pct
    ),
    "arithmetic_intensity": ContextValue(
        "FLOP per DRAM byte.", lambda f: f.roofline.arithmetic_intensity
    ),
    "dram_tb_per_s": ContextValue(
        "DRAM bandwidth reached, TB/s.",
        lambda f: number_or(f.launch.get("dram_bytes_per_second"), math.nan) / 1e12,
    ),
    "is_gemm_like": ContextValue(
        "1 when the kernel is named like a matrix product (gemm, xmma, cutlass, matmul), else 0.",
        lambda f: 1.0 if _GEMM_NAME.search(str(f.launch.get("name", ""))) else 0.0,
    ),
    "fp_pipe_pct": ContextValue(
        "The busiest floating-point pipe (FMA, FP64, FP16), %.", _fp_pipe_pct
    ),
    "dram_pct_of_ceiling": ContextValue(
        "DRAM bandwidth as % of the session's measured ceiling (a copy kernel's).", _of_ceiling
    ),
}


def rule_names(params: Mapping[str, float] | None = None) -> frozenset[str]:
    """Every name a rule may read (besides CONSTANTS), with the rule's own params."""
    return frozenset(
        {*CATALOGUE, *DERIVED_METRICS, *SIGNATURE_VALUES, *CONTEXT_VALUES, *(params or {})}
    )


# Text a rule's message may show (never read by a condition).
TEXT_VALUES: dict[str, Callable[[KernelFacts], str]] = {
    "fallback_reasons": lambda f: "; ".join(_fallback_reasons(f)),
    "reference_source": lambda f: f.reference.source if f.reference else "",
    "tensor_precision": lambda f: f.roofline.tensor_precision or "",
}


def kernel_values(facts: KernelFacts) -> dict[str, Any]:
    """What a kernel rule sees: the signature's row, every context value, and the texts its
    message may show."""
    values = dict(facts.launch)
    values.update({name: value.compute(facts) for name, value in CONTEXT_VALUES.items()})
    values.update({name: text(facts) for name, text in TEXT_VALUES.items()})
    return values
