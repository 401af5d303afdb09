"""A kernel signature's place under the device's roofs: its roofline position, the device's
ceilings, and the DRAM bandwidth it is judged against (kernel/roofline.py and
kernel/memory_ceiling.py compute them)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_NAN = math.nan


@dataclass(frozen=True)
class DramCeiling:
    """The bandwidth a kernel is judged against."""

    bytes_per_s: float  # NaN where the report gives no DRAM peak (a default is then a share)
    fraction_of_peak: float  # of the report's DRAM peak; NaN where that peak is unknown
    measured: bool  # the session's copy (True) or the architecture's default (False)
    source: str  # for messages: which copy, or which default and why

    def pct(self, achieved_bytes_per_s: float, dram_pct_of_peak: float) -> float:
        """Achieved bandwidth as % of the ceiling: from bytes per second where both are known,
        else from ncu's % of peak (a `--set basic` export has no DRAM bytes)."""
        if self.bytes_per_s > 0 and not math.isnan(achieved_bytes_per_s):
            return 100 * achieved_bytes_per_s / self.bytes_per_s
        if self.fraction_of_peak > 0 and not math.isnan(dram_pct_of_peak):
            return dram_pct_of_peak / self.fraction_of_peak
        return math.nan

    def to_json(self) -> dict[str, object]:
        return {
            "bytes_per_s": self.bytes_per_s,
            "fraction_of_peak": self.fraction_of_peak,
            "measured": self.measured,
            "source": self.source,
        }


@dataclass(frozen=True)
class Peaks:
    """FLOP/s and bytes/s ceilings of the device (NaN where the report lacks them)."""

    fp32_flops: float
    fp64_flops: float
    fp16_flops: float
    dram_bytes_per_s: float
    tensor_flops: float = _NAN  # dense tensor peak of the kernel's tensor precision, its clock

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
    # Tensor-core work (precision "tensor"): its dominant input precision (None: unknown), the
    # operations per precision, their rate, the dense peak of that precision at the kernel's SM
    # clock, and the tensor work's % of that roof whichever side of the ridge the kernel is on.
    tensor_precision: str | None = None
    tensor_flops: Mapping[str, float] = field(default_factory=dict)
    achieved_tensor_flops_per_s: float = _NAN
    tensor_peak_flops_per_s: float = _NAN
    pct_of_tensor_roof: float = _NAN
    note: str = ""  # why a roof is unknown, or what caps the kernel below it
    # The DRAM bandwidth the kernel is judged against (measured, else the architecture's
    # default) and the achieved bandwidth as % of it; NaN where neither can be told.
    dram_ceiling: DramCeiling | None = None
    pct_of_dram_ceiling: float = _NAN

    @property
    def roof(self) -> str:
        """The compute roof the kernel is placed under: "fp32", "bf16 tensor", ..."""
        if self.precision != "tensor":
            return self.precision
        return f"{self.tensor_precision} tensor" if self.tensor_precision else "tensor"

    def to_json(self, ceiling: MeasuredCeiling | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "arithmetic_intensity": self.arithmetic_intensity,
            "pct_of_roof": self.pct_of_roof,
            "side": self.side or None,
            "precision": self.precision,
            "achieved_flops_per_s": self.achieved_flops_per_s,
            "achieved_dram_bytes_per_s": self.achieved_dram_bytes_per_s,
            "flops": dict(self.flops),
            "bytes": {"dram": self.dram_bytes, "l2": self.l2_bytes},
            "peaks": self.peaks.to_json(),
            "ridge_point": self.ridge_point,
            "roof": self.roof,
            "tensor_precision": self.tensor_precision,
            "tensor_flops": dict(self.tensor_flops),
            "achieved_tensor_flops_per_s": self.achieved_tensor_flops_per_s,
            "tensor_peak_flops_per_s": self.tensor_peak_flops_per_s,
            "pct_of_tensor_roof": self.pct_of_tensor_roof,
            "note": self.note,
            "pct_of_dram_ceiling": self.pct_of_dram_ceiling,
            "dram_ceiling": self.dram_ceiling.to_json() if self.dram_ceiling else None,
        }
        if ceiling is not None and self.pct_of_measured_ceiling is not None:
            out["measured_dram_ceiling_bytes_per_s"] = ceiling.bytes_per_s
            out["pct_of_measured_ceiling"] = self.pct_of_measured_ceiling
        return out
