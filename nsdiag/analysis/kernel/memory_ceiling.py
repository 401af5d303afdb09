"""The DRAM bandwidth a memory-bound kernel is judged against: what this GPU sustains, not the
datasheet peak.

No kernel streams at 100% of the theoretical DRAM peak; HBM loses cycles to refresh, to
read-write turnarounds and to row switches, and what is left is what a copy reaches. So a
kernel's distance to the memory roof is measured against:

1. the session's measured ceiling (`roofline.measured_dram_ceiling`): the best bandwidth a copy
   kernel of the same session streamed: same GPU, clocks, profiler and timing;
2. else the architecture's default (`DEFAULT_DRAM_CEILING`): the share of the report's DRAM
   peak a copy reached on that architecture, measured the way the kernels are (one launch
   under ncu), with its source.

The measured ceiling is known to a few percent (the float4 kernel and Triton's fused kernel of
tests/data/reference sit at 98.4% and 98.9% of the copy beside them); the default carries the
spread between copies and sessions (a one-wave grid-stride float4 copy reached 80.0% of peak, a
full-grid one 85.0%, on the same H200). The rules that decide "at the roof" (NSD101) and "below
it" (NSD108) read `dram_ceiling_measured` to take a tighter band for a measured ceiling than for
the default; the bands are their [params].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from nsdiag.analysis.records.kernel import DramCeiling
from nsdiag.model.names import short_name
from nsdiag.model.values import number


@dataclass(frozen=True)
class DefaultCeiling:
    """The share of the theoretical DRAM peak a copy reaches on an architecture, and where that
    figure was measured."""

    fraction: float
    architecture: str
    source: str


# Per compute-capability major version. Hopper's figure is ncu's, not a wall-clock one: the
# kernels it is compared with are timed by ncu, one launch each, ramp-up and tail included
# (CUDA events over back-to-back launches hide those: the same copy timed so reached 87.8%,
# which would promise ~3% that no kernel reaches under ncu). Copies that write less than they
# read (fp32 -> fp16 conversions in the GPT sessions: 90.6-91.1%) or only write (fills: 94%)
# pass it; a kernel at the 1:1 copy's bandwidth is at the roof for a read-and-write stream.
DEFAULT_DRAM_CEILING: Mapping[int, DefaultCeiling] = {
    9: DefaultCeiling(
        0.85,
        "Hopper",
        "a float4 copy of 256 MiB on the H200 moved 4.09 TB/s under ncu 2025.3.1, 85.0% of the "
        "4.81 TB/s peak (tests/data/reference); PyTorch's device-to-device copy, timed with CUDA "
        "events over 20 launches: 4.21 TB/s (87.5%, reference/bench.json.gz)",
    ),
}
# An architecture with no figure of its own takes this one's, and its source says so.
FALLBACK_MAJOR = 9


def default_ceiling(cc_major: int | None) -> tuple[DefaultCeiling, bool]:
    """The architecture's default and whether it was measured on that architecture."""
    if cc_major is not None and cc_major in DEFAULT_DRAM_CEILING:
        return DEFAULT_DRAM_CEILING[cc_major], True
    return DEFAULT_DRAM_CEILING[FALLBACK_MAJOR], False


def dram_ceiling(
    peak_bytes_per_s: float,
    measured_bytes_per_s: float | None = None,
    measured_kernel: str = "",
    cc_major: int | None = None,
) -> DramCeiling:
    """The session's measured ceiling where there is one, else the architecture's default share
    of the report's peak (a share alone where the report gives no peak)."""
    peak = peak_bytes_per_s if peak_bytes_per_s > 0 else math.nan
    if measured_bytes_per_s is not None and measured_bytes_per_s > 0:
        return DramCeiling(
            measured_bytes_per_s,
            measured_bytes_per_s / peak,
            True,
            f"measured in this session by {short_name(measured_kernel) or 'a copy kernel'}",
        )
    default, own = default_ceiling(cc_major)
    share = f"{default.fraction:.0%} of peak"
    if own:
        source = f"the {default.architecture} default, {share}: no copy kernel ran in the session"
    else:
        which = f"cc {cc_major}.x" if cc_major is not None else "an unknown compute capability"
        source = (
            f"{share}, the {default.architecture} default: none is measured for {which} and no "
            "copy kernel ran in the session"
        )
    return DramCeiling(default.fraction * peak, default.fraction, False, source)


def cc_major_of(values: Mapping[str, object], device_cc: str | None = None) -> int | None:
    """The compute capability's major version: the launch's own metric, else the device's."""
    major = number(values.get("device_compute_capability_major"))
    if major is not None and math.isfinite(major):  # a corrupt cell can hold 1e308
        return int(major)
    head = str(device_cc or "").split(".", 1)[0]
    return int(head) if head.isdigit() else None
