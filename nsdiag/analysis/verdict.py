"""Bound and limiter per kernel from the speed-of-light metrics.

The rule, written down (docs/diagnosis.md repeats it):
- launch:  the kernel runs shorter than LAUNCH_NS (5 us); launching it costs about as much as
           running it, whatever its counters say.
- memory / compute: the busiest unit is at SATURATED_PCT (60 %) of its peak or more; memory if
           the busiest memory unit (DRAM, L2, L1, shared) is at least as busy as the busiest
           compute pipe (FMA, ALU, FP64, FP16, tensor, XU, LSU; over elapsed cycles), else
           compute. The limiter is the saturated memory unit furthest from the SM (DRAM before
           L2 before shared before L1), or the busiest pipe.
- latency: nothing reaches 60 %; the warps wait (the limiter is the top stall reason).
Within NEAR_PCT (5 points) of the threshold, when memory and compute are within 5 points of each
other, or when a memory unit within 5 points of the threshold decides which unit is the limiter
(DRAM at 58% with L2 at 70%: L2; at 61%: DRAM), the verdict carries a note saying so instead of
pretending to be sure, and `close_call` is set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nsdiag.model.names import short_name

LAUNCH_NS = 5_000.0
SATURATED_PCT = 60.0
NEAR_PCT = 5.0

MEMORY_ORDER = (
    "dram",
    "l2",
    "shared",
    "l1",
)  # furthest from the SM first: the limiter's precedence
MEMORY_UNITS = {
    "dram": "dram_throughput_pct",
    "l2": "l2_throughput_pct",
    "l1": "l1_throughput_pct",
    "shared": "shared_throughput_pct",
}
COMPUTE_UNITS = {
    "fma": "pipe_fma_pct",
    "alu": "pipe_alu_pct",
    "fp64": "pipe_fp64_pct",
    "fp16": "pipe_fp16_pct",
    "tensor": "pipe_tensor_pct",
    "xu": "pipe_xu_pct",
    "lsu": "pipe_lsu_pct",
}


@dataclass(frozen=True)
class Verdict:
    bound: str
    limiter: str | None
    mem_pct: float
    compute_pct: float
    note: str
    limiter_pct: float = math.nan
    close_call: bool = False  # a unit within NEAR_PCT of a threshold decided bound or limiter


def _busiest(values: dict[str, float], units: dict[str, str]) -> tuple[str | None, float]:
    best, best_pct = None, math.nan
    for unit, metric in units.items():
        pct = values.get(metric)
        if pct is not None and not math.isnan(pct) and (best is None or pct > best_pct):
            best, best_pct = unit, pct
    return best, best_pct


def _busiest_memory(values: dict[str, float]) -> tuple[str | None, float]:
    """The memory limiter: of the units at or above saturation, the one furthest from the SM
    (DRAM, then L2, then shared, then L1), because traffic to a far unit also passes the near
    ones; a streaming copy shows L2 busier than DRAM, yet DRAM is what it waits for."""
    unit, pct = _busiest(values, MEMORY_UNITS)
    for candidate in MEMORY_ORDER:
        value = values.get(MEMORY_UNITS[candidate])
        if value is not None and not math.isnan(value) and value >= SATURATED_PCT:
            return candidate, pct
    return unit, pct


def _limiter_note(values: dict[str, float], limiter: str | None) -> str:
    """Name the unit that would change the memory limiter if it moved a few points: a farther
    unit just under the threshold, or the chosen one just over it with a nearer unit saturated.
    Replays and launches of one signature differ by that much (DRAM at 60.4% in one run, 59.8%
    in another, for the same launch of an AdamW kernel on the H200)."""
    if limiter not in MEMORY_ORDER:
        return ""

    def pct(unit: str) -> float:
        value = values.get(MEMORY_UNITS[unit])
        return math.nan if value is None else float(value)

    chosen = MEMORY_ORDER.index(limiter)
    for unit in MEMORY_ORDER[:chosen]:  # farther units, just under the threshold
        if SATURATED_PCT - NEAR_PCT <= pct(unit) < SATURATED_PCT:
            return (
                f"limiter a close call: {unit.upper()} at {pct(unit):.0f}%, near the {SATURATED_PCT:.0f}% "
                f"above which it, not {limiter.upper()} ({pct(limiter):.0f}%), is the limiter"
            )
    if pct(limiter) < SATURATED_PCT + NEAR_PCT:  # the chosen unit just over, a nearer one saturated
        for unit in MEMORY_ORDER[chosen + 1 :]:
            if pct(unit) >= SATURATED_PCT:
                return (
                    f"limiter a close call: {limiter.upper()} at {pct(limiter):.0f}%, near the "
                    f"{SATURATED_PCT:.0f}% below which {unit.upper()} ({pct(unit):.0f}%) is the limiter"
                )
    return ""


def classify(values: dict[str, float]) -> Verdict:
    mem_unit, mem_pct = _busiest_memory(values)
    cmp_unit, cmp_pct = _busiest(values, COMPUTE_UNITS)
    # ncu's SOL figures stand in only when the per-unit metrics are missing: sm__throughput
    # also counts issue and scheduler activity, so it reads high in kernels whose pipes idle
    # (a block waiting at a barrier), and the memory SOL figure does not say which unit.
    if math.isnan(mem_pct):
        mem_pct = _nanmax(math.nan, values.get("memory_throughput_pct"))
    if math.isnan(cmp_pct):
        cmp_pct = _nanmax(math.nan, values.get("sm_throughput_pct"))
    duration = values.get("duration_ns", math.nan)
    if not math.isnan(duration) and duration < LAUNCH_NS:
        return Verdict(
            "launch",
            "launch",
            mem_pct,
            cmp_pct,
            f"runs {duration / 1000:.1f} us, under the {LAUNCH_NS / 1000:.0f} us a launch costs",
        )
    if math.isnan(mem_pct) and math.isnan(cmp_pct):
        return Verdict("unknown", None, mem_pct, cmp_pct, "no speed-of-light metrics in the report")
    top = _nanmax(mem_pct, cmp_pct)
    notes = []
    if abs(top - SATURATED_PCT) < NEAR_PCT:
        notes.append(
            f"busiest unit at {top:.0f}%, near the {SATURATED_PCT:.0f}% saturation threshold"
        )
    if top >= SATURATED_PCT:
        is_memory = not math.isnan(mem_pct) and (math.isnan(cmp_pct) or mem_pct >= cmp_pct)
        if (
            not math.isnan(mem_pct)
            and not math.isnan(cmp_pct)
            and abs(mem_pct - cmp_pct) < NEAR_PCT
        ):
            notes.append(f"memory {mem_pct:.0f}% and compute {cmp_pct:.0f}% are nearly balanced")
        if is_memory:
            unit_pct = values.get(MEMORY_UNITS.get(mem_unit or "", ""), mem_pct)
            notes.append(_limiter_note(values, mem_unit))
            notes = [n for n in notes if n]
            return Verdict(
                "memory",
                mem_unit or "memory",
                mem_pct,
                cmp_pct,
                "; ".join(notes),
                unit_pct,
                bool(notes),
            )
        return Verdict(
            "compute", cmp_unit or "sm", mem_pct, cmp_pct, "; ".join(notes), cmp_pct, bool(notes)
        )
    grid, sms = values.get("grid_size"), values.get("sm_count")
    if (
        grid is not None
        and sms is not None
        and not math.isnan(grid)
        and not math.isnan(sms)
        and grid < sms
    ):
        close = bool(notes)
        notes.append(f"{grid:.0f} blocks for {sms:.0f} SMs")
        return Verdict(
            "latency", "small_grid", mem_pct, cmp_pct, "; ".join(notes), close_call=close
        )
    stall = values.get("top_stall")
    return Verdict(
        "latency",
        stall if isinstance(stall, str) else None,
        mem_pct,
        cmp_pct,
        "; ".join(notes),
        close_call=bool(notes),
    )


def _nanmax(a: float | None, b: float | None) -> float:
    vals = [v for v in (a, b) if v is not None and not math.isnan(v)]
    return max(vals) if vals else math.nan


def sentence(name: str, verdict: Verdict, roofline: dict) -> str:
    """The verdict in one sentence a performance engineer would say."""
    name = short_name(name)
    pct_roof = roofline.get("pct_of_roof")
    roof = (
        f", at {pct_roof:.0f}% of its roofline"
        if isinstance(pct_roof, float) and not math.isnan(pct_roof)
        else ""
    )
    if verdict.bound == "memory":
        return f"{name} is memory-bound on {verdict.limiter.upper() if verdict.limiter else 'memory'} ({verdict.limiter_pct:.0f}% of peak){roof}."
    if verdict.bound == "compute":
        return f"{name} is compute-bound on the {verdict.limiter} pipe ({verdict.limiter_pct:.0f}% of peak){roof}."
    if verdict.bound == "latency":
        if verdict.limiter == "small_grid":
            why = f", because the grid leaves most SMs idle ({verdict.note})"
        else:
            why = (
                f", warps mostly stalled on {verdict.limiter.replace('_', ' ')}"
                if verdict.limiter
                else ""
            )
        return (
            f"{name} is latency-bound: no unit is busy (memory {verdict.mem_pct:.0f}%, compute "
            f"{verdict.compute_pct:.0f}%){why}."
        )
    if verdict.bound == "launch":
        return f"{name} is launch-bound: it {verdict.note}."
    return f"{name}: not enough metrics for a verdict ({verdict.note})."
