"""The GPU units whose throughput nsdiag reads: memory units and compute pipes.

One table for the verdict (which unit limits a kernel), the fusion analysis (the columns a step
needs) and the charts (a bar per unit, the limiter outlined).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class GpuUnit:
    slug: str  # the verdict's limiter name: dram, l2, fma, ...
    metric: str  # its throughput column, % of the unit's peak
    label: str  # display name
    kind: Literal["memory", "compute"]


UNITS: tuple[GpuUnit, ...] = (
    GpuUnit("dram", "dram_throughput_pct", "DRAM", "memory"),
    GpuUnit("l2", "l2_throughput_pct", "L2", "memory"),
    GpuUnit("l1", "l1_throughput_pct", "L1/TEX", "memory"),
    GpuUnit("shared", "shared_throughput_pct", "Shared", "memory"),
    # Compute pipes are measured over the kernel's elapsed cycles.
    GpuUnit("fma", "pipe_fma_pct", "FMA pipe", "compute"),
    GpuUnit("alu", "pipe_alu_pct", "ALU pipe", "compute"),
    GpuUnit("fp64", "pipe_fp64_pct", "FP64 pipe", "compute"),
    GpuUnit("fp16", "pipe_fp16_pct", "FP16 pipe", "compute"),
    GpuUnit("tensor", "pipe_tensor_pct", "Tensor pipe", "compute"),
    GpuUnit("xu", "pipe_xu_pct", "XU (SFU) pipe", "compute"),
    GpuUnit("lsu", "pipe_lsu_pct", "LSU pipe", "compute"),
)
MEMORY_UNITS: dict[str, str] = {u.slug: u.metric for u in UNITS if u.kind == "memory"}
COMPUTE_UNITS: dict[str, str] = {u.slug: u.metric for u in UNITS if u.kind == "compute"}
# Furthest from the SM first: traffic to a far unit also passes the near ones, so of the
# saturated memory units the furthest is the limiter.
MEMORY_PRECEDENCE: tuple[str, ...] = ("dram", "l2", "shared", "l1")
# The pipes that do floating-point math (the tensor pipe aside).
FP_PIPES: tuple[str, ...] = ("pipe_fma_pct", "pipe_fp64_pct", "pipe_fp16_pct")
