"""The names a rule may use, in one registry, and the values a kernel rule sees.

A rule's condition, impact, evidence and message read names from:
- catalogue metrics (nsdiag/model/catalogue.py): per launch; on a kernel signature, the mean
  over its profiled launches (so `duration_ns` is the signature's mean launch);
- derived metrics (`derived_names.DERIVED_METRICS`), computed per launch from catalogue metrics
  (kernel/derived.py);
- signature values (`SIGNATURE_VALUES`), computed when launches are grouped into signatures;
- context values (`CONTEXT_VALUES`), computed per signature from its verdict, roofline and share
  of GPU time: adding one is one entry here;
- named constants (`CONSTANTS`), thresholds that the code and the rules share;
- a rule's own `params`.
The rule loader accepts exactly these names (`rule_names`), so a typo fails when rules load.
A rule's message and fix may name the values of the condition's registry but not CONSTANTS or
params (kernel_values does not give them), and also text values: words computed per signature
for the message (which side of the memory traffic, which kind of kernel, what limits occupancy),
never read by a condition (`TEXT_VALUES`, `FACT_TEXT_VALUES`, derived_names.DERIVED_TEXTS). The
loader checks both templates against `template_names`. This module imports no pandas or numpy
(nor do the modules it imports at load time): `nsdiag rules` loads and lists the rules without.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nsdiag.analysis.kernel.derived_names import DERIVED_METRICS, DERIVED_TEXTS
from nsdiag.analysis.kernel.gemm_reference import GemmReference, is_fallback
from nsdiag.analysis.kernel.verdict import LAUNCH_NS, SATURATED_PCT, Verdict
from nsdiag.analysis.records.kernel import RooflinePosition
from nsdiag.model.catalogue import CATALOGUE
from nsdiag.model.gpu_units import FP_PIPES
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.values import number, number_or

# A name the kernel-name schemes do not know (a user's own kernel) is a matrix product when it
# says so. Not "mma" alone: it is in "GammaBeta" and in cuDNN's flash-attention "wgmma" names.
_GEMM_NAME = re.compile(r"gemm|matmul", re.IGNORECASE)

# Uncoalesced global access (NSD103), per side (loads, stores): the message names the sides
# that meet the rule's condition, so both read these.
COALESCED_BYTES = 16.0  # fewer useful bytes per 32-byte sector than this: uncoalesced
UNCOALESCED_WASTE = 0.25  # share of a side's sectors fetched but unused, past L1, that matters
SIDE_TRAFFIC_SHARE = 0.1  # a side with fewer sectors than this share of L2's is no memory problem
# The widest global access one thread makes in one instruction (LDG.128 / STG.128: a float4):
# narrower accesses are what a vectorised rewrite widens (NSD108's message). The measured width
# is an average, a little under the instruction's where some warps are partial (15.0 bytes for
# PyTorch's float4 softmax rows), so under 3/4 of it counts as narrow (8-byte accesses do).
VECTOR_ACCESS_BYTES = 16.0
NARROW_ACCESS_SHARE = 0.75

CONSTANTS: dict[str, float] = {
    "SATURATED_PCT": SATURATED_PCT,  # a unit this busy (% of peak) is saturated
    "LAUNCH_NS": LAUNCH_NS,  # a kernel shorter than this costs about what its launch costs
    "COALESCED_BYTES": COALESCED_BYTES,
    "UNCOALESCED_WASTE": UNCOALESCED_WASTE,
    "SIDE_TRAFFIC_SHARE": SIDE_TRAFFIC_SHARE,
    "VECTOR_ACCESS_BYTES": VECTOR_ACCESS_BYTES,
}
SIGNATURE_VALUES: dict[str, str] = {
    "launches": "Launches of the signature (the timeline's count where it knows more).",
    "profiled_mean_ns": "Mean duration of the signature's profiled launches (= duration_ns).",
    "region_mean_ns": (
        "total_duration_ns / launches: the mean launch as the program ran it in the analysed "
        "region (the timeline's, where there is one; the profiled mean without one)."
    ),
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


def matrix_kernel(name: str) -> bool:
    """A GEMM or convolution: by its name's facts (model/kernel_facts.py) where a library naming
    scheme knows the name, else by the words gemm/matmul in it."""
    kind = parse_kernel_name(name).kind
    if kind is not None:
        return kind == "gemm" or kind.startswith("conv")
    return bool(_GEMM_NAME.search(name))


def _kernel_name(launch: Mapping[str, Any]) -> str:
    return str(launch.get("demangled") or launch.get("name") or "")


def _tile_min(facts: KernelFacts) -> float:
    tile = parse_kernel_name(_kernel_name(facts.launch)).tile
    return float(min(tile[:2])) if tile and len(tile) >= 2 else math.nan


def _fp_pipe_pct(facts: KernelFacts) -> float:
    pipes = [number(facts.launch.get(p)) for p in FP_PIPES]
    return max((p for p in pipes if p is not None), default=math.nan)


def _fallback_reasons(facts: KernelFacts) -> list[str]:
    return is_fallback(
        str(facts.launch.get("demangled") or facts.launch.get("name", "")), facts.device_cc
    )


def _reference_rate(facts: KernelFacts) -> float:
    return facts.reference.flops_per_s if facts.reference is not None else math.nan


def _ceiling_tb_per_s(facts: KernelFacts) -> float:
    ceiling = facts.roofline.dram_ceiling
    return ceiling.bytes_per_s / 1e12 if ceiling is not None else math.nan


def _ceiling_measured(facts: KernelFacts) -> float:
    ceiling = facts.roofline.dram_ceiling
    return math.nan if ceiling is None else float(ceiling.measured)


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
        "(analysis/kernel/gemm_reference.py).",
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
        "1 for a GEMM or convolution (its kernel-name facts: cuBLAS, CUTLASS, cuDNN, Triton mm;"
        " else gemm/matmul in the name), else 0.",
        lambda f: 1.0 if matrix_kernel(_kernel_name(f.launch)) else 0.0,
    ),
    "gemm_tile_min": ContextValue(
        "The smaller of the CTA tile's M and N, from the kernel's name (NaN when it states none).",
        _tile_min,
    ),
    "fp_pipe_pct": ContextValue(
        "The busiest floating-point pipe (FMA, FP64, FP16), %.", _fp_pipe_pct
    ),
    "dram_pct_of_ceiling": ContextValue(
        "DRAM bandwidth as % of the ceiling the kernel is judged against: the session's "
        "measured copy ceiling, else the architecture's default share of the peak "
        "(analysis/kernel/memory_ceiling.py).",
        lambda f: f.roofline.pct_of_dram_ceiling,
    ),
    "dram_ceiling_measured": ContextValue(
        "1 when that ceiling was measured in the session (a copy kernel), 0 for the default.",
        _ceiling_measured,
    ),
    "dram_ceiling_tb_per_s": ContextValue(
        "That ceiling, TB/s (NaN where the report gives no DRAM peak).", _ceiling_tb_per_s
    ),
    "uncoalesced_access": ContextValue(
        "1 when NSD103's per-side test holds for the loads or the stores, 0 when it holds for "
        "neither, NaN when the report lacks the sector counters to tell.",
        lambda f: _uncoalesced_access(f.launch),
    ),
}


@dataclass(frozen=True)
class TextValue:
    description: str
    compute: Callable[[Mapping[str, Any]], str]  # from the values a rule sees


def _uncoalesced(values: Mapping[str, Any], side: str) -> bool:
    """NSD103's condition for one side ("load", "store"), with the same constants."""
    useful = number(values.get(f"global_{side}_bytes_per_sector"))
    waste = number(values.get(f"global_{side}_waste"))
    sectors = number(values.get(f"global_{side}_sectors"))
    l2 = number(values.get("l2_sectors"))
    if useful is None or waste is None or sectors is None or l2 is None:
        return False
    return (
        0 < useful < COALESCED_BYTES
        and waste >= UNCOALESCED_WASTE
        and sectors >= SIDE_TRAFFIC_SHARE * l2
    )


def _uncoalesced_access(values: Mapping[str, Any]) -> float:
    """1 when either side is uncoalesced, 0 when neither is, NaN when neither side's counters
    are there to tell."""
    if any(_uncoalesced(values, side) for side in ("load", "store")):
        return 1.0
    known = any(
        number(values.get(f"global_{side}_bytes_per_sector")) is not None
        and number(values.get(f"global_{side}_waste")) is not None
        for side in ("load", "store")
    )
    return 0.0 if known else math.nan


def _access_advice(values: Mapping[str, Any]) -> str:
    """What NSD108's message says closes the gap, from the access width and sector use."""
    if math.isnan(_uncoalesced_access(values)):
        return (
            "The report lacks the sector counters (useful bytes per sector, sectors per "
            "request), so whether the accesses are narrow or uncoalesced is not known: "
            "profile with nsdiag profile or ncu's MemoryWorkloadAnalysis_Tables and "
            "SourceCounters sections to tell."
        )
    width = number(values.get("global_access_bytes"))
    if width is None:
        return (
            "The sectors that leave L1 are used; the access width is not in the report (no "
            "request counts), so whether wider accesses would help is not known."
        )
    if width < NARROW_ACCESS_SHARE * VECTOR_ACCESS_BYTES:
        return (
            "The sectors that leave L1 are used, but each thread moves at most "
            f"{width:.0f} bytes per load or store instruction: {VECTOR_ACCESS_BYTES:.0f}-byte "
            f"(float4) accesses move {VECTOR_ACCESS_BYTES / max(width, 1):.0f}x the bytes per "
            "instruction, with fewer instructions to issue and more bytes in flight."
        )
    return (
        f"Its accesses are already about {VECTOR_ACCESS_BYTES:.0f} bytes wide ({width:.1f} on "
        "average) and use their sectors: what is left "
        "is bytes in flight (more independent loads per thread before their use) or a short "
        "launch's ramp-up and tail."
    )


def _uncoalesced_side(values: Mapping[str, Any]) -> str:
    sides = tuple(side for side in ("load", "store") if _uncoalesced(values, side))
    names = {("load",): "loads", ("store",): "stores", ("load", "store"): "loads and stores"}
    return names.get(sides, "accesses")


def _tail_label(values: Mapping[str, Any]) -> str:
    """The message's subject: the grid, or for a matrix kernel its tiles (the finding's cause,
    tail-effect, already heads the line: the message does not say it again)."""
    if number(values.get("is_gemm_like")) == 1:
        return "Wave quantisation: the matrix kernel's tiles, its grid,"
    return "The grid"


def _ceiling_share(values: Mapping[str, Any]) -> str:
    """How a kernel's DRAM bandwidth stands to the ceiling, before `the 4.09 TB/s this GPU
    sustains`: `97% of`, or `at` where it reads above it (the ceiling is a sustained figure
    measured on a copy, not a hard limit: saying 107% of what the GPU sustains contradicts
    itself)."""
    pct = number(values.get("dram_pct_of_ceiling"))
    if pct is None:
        return "n/a"
    return "at" if _above_ceiling(pct) else f"{pct:.0f}% of"


def _above_ceiling(pct: float) -> bool:
    """Whether a share of the ceiling prints above 100% (a corrupt cell's infinity too)."""
    return pct > 100 if not math.isfinite(pct) else round(pct) > 100


def _ceiling_note(values: Mapping[str, Any]) -> str:
    """After the ceiling's source: how far above it a kernel reads, and why that can be."""
    pct = number(values.get("dram_pct_of_ceiling"))
    if pct is None or not _above_ceiling(pct):
        return ""
    return (
        f"; this kernel reads {pct:.0f}% of it: the ceiling is a sustained figure measured on a"
        " copy, not a hard limit"
    )


def _gemm_tile(values: Mapping[str, Any]) -> str:
    tile = parse_kernel_name(_kernel_name(values)).tile
    return "x".join(str(d) for d in tile[:2]) if tile else "(size not in its name)"


TEXT_VALUES: dict[str, TextValue] = {
    "uncoalesced_side": TextValue(
        "Which global accesses are uncoalesced: 'loads', 'stores' or 'loads and stores'.",
        _uncoalesced_side,
    ),
    "tail_label": TextValue(
        "The subject of a partial last wave's sentence: 'The grid', or for a GEMM or convolution"
        " its tiles, called wave quantisation.",
        _tail_label,
    ),
    "gemm_tile": TextValue("The CTA tile M x N its name states, e.g. '64x8'.", _gemm_tile),
    "ceiling_share": TextValue(
        "How the kernel's DRAM bandwidth stands to the ceiling it is judged against: '97% of',"
        " or 'at' where it reads above it.",
        _ceiling_share,
    ),
    "ceiling_note": TextValue(
        "Where the kernel reads above the ceiling: by how much, and that the ceiling is a"
        " measured sustained figure, not a hard limit (else empty).",
        _ceiling_note,
    ),
    "access_advice": TextValue(
        "What closes a DRAM-bound kernel's distance to the ceiling, from its access width and "
        "sector use: wider (vectorised) accesses, more bytes in flight, or what the report "
        "lacks to tell.",
        _access_advice,
    ),
}


def rule_names(params: Mapping[str, float] | None = None) -> frozenset[str]:
    """Every name a rule may read (besides CONSTANTS), with the rule's own params."""
    return frozenset(
        {*CATALOGUE, *DERIVED_METRICS, *SIGNATURE_VALUES, *CONTEXT_VALUES, *(params or {})}
    )


# Text values computed from what the context knows beyond the row (the device, the matrix
# reference, the roofline); message-only, like TEXT_VALUES.
FACT_TEXT_VALUES: dict[str, Callable[[KernelFacts], str]] = {
    "fallback_reasons": lambda f: "; ".join(_fallback_reasons(f)),
    "reference_source": lambda f: f.reference.source if f.reference else "",
    "tensor_precision": lambda f: f.roofline.tensor_precision or "",
    "dram_ceiling_source": lambda f: (
        f.roofline.dram_ceiling.source if f.roofline.dram_ceiling else "no DRAM ceiling known"
    ),
}


def template_names() -> frozenset[str]:
    """Every name a kernel rule's message and fix may use: what kernel_values gives (the
    signature's metrics, every context value and the text values)."""
    return frozenset(
        {
            *CATALOGUE,
            *DERIVED_METRICS,
            *DERIVED_TEXTS,
            *SIGNATURE_VALUES,
            *CONTEXT_VALUES,
            *FACT_TEXT_VALUES,
            *TEXT_VALUES,
        }
    )


def kernel_values(facts: KernelFacts) -> dict[str, Any]:
    """What a kernel rule sees: the signature's row, every context value, and the texts its
    message may show."""
    values = dict(facts.launch)
    values.update({name: value.compute(facts) for name, value in CONTEXT_VALUES.items()})
    values.update({name: text(facts) for name, text in FACT_TEXT_VALUES.items()})
    values.update({name: text.compute(values) for name, text in TEXT_VALUES.items()})
    return values
