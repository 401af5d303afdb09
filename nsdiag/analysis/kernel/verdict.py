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
- tensor-core kernels (tensor operations counted; where the report has no such counts, the
           tensor pipe at TENSOR_PIPE_BUSY_PCT or more; where it has neither, a name that says
           tensor cores: analysis/kernel/tensor.py) are judged against the tensor pipe: at
           SATURATED_PCT or more, and at least as busy as DRAM and L2, they are compute-bound
           on `tensor`. Their shared-memory and L1 traffic never makes them memory-bound: wgmma
           reads its operands from shared memory by design, and mma.sync kernels stage operands
           through shared memory and L1 too, so that traffic is the compute path. DRAM and L2
           still count; shared and L1 at or above saturation are named in the note.
Within NEAR_PCT (5 points) of the threshold, when memory and compute are within 5 points of each
other, or when a memory unit within 5 points of the threshold decides which unit is the limiter
(DRAM at 58% with L2 at 70%: L2; at 61%: DRAM), the verdict carries a note saying so instead of
pretending to be sure, and `close_call` is set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from nsdiag.analysis.kernel.tensor import tensor_core_evidence
from nsdiag.model.gpu_units import COMPUTE_UNITS, MEMORY_PRECEDENCE, MEMORY_UNITS
from nsdiag.model.names import short_name
from nsdiag.model.quantities import duration as duration_words
from nsdiag.model.values import number, number_or

LAUNCH_NS = 5_000.0
SATURATED_PCT = 60.0
NEAR_PCT = 5.0

Values = Mapping[str, Any]  # one launch's metrics, or a signature's typical launch
# Every metric `classify` reads.
INPUTS: tuple[str, ...] = (
    *MEMORY_UNITS.values(),
    *COMPUTE_UNITS.values(),
    "memory_throughput_pct",
    "sm_throughput_pct",
    "duration_ns",
    "grid_size",
    "sm_count",
    "top_stall",
    # whether it is a tensor-core kernel (analysis/kernel/tensor.py)
    "flop_tensor",
    "name",
    "demangled",
)
# Units a tensor-core kernel's operands pass through on their way to the tensor cores.
OPERAND_STAGING_UNITS: tuple[str, ...] = ("shared", "l1")


@dataclass(frozen=True)
class Verdict:
    bound: str
    limiter: str | None
    mem_pct: float
    compute_pct: float
    note: str
    limiter_pct: float = math.nan
    close_call: bool = False  # a unit within NEAR_PCT of a threshold decided bound or limiter
    aside: str = ""  # saturated units the rule set aside, and why (a fact, not a close call)


def _pct(values: Values, metric: str) -> float:
    return number_or(values.get(metric), math.nan)


def _busiest(values: Values, units: Mapping[str, str]) -> tuple[str | None, float]:
    best, best_pct = None, math.nan
    for unit, metric in units.items():
        pct = number(values.get(metric))
        if pct is not None and (best is None or pct > best_pct):
            best, best_pct = unit, pct
    return best, best_pct


def memory_units(tensor_core: bool) -> dict[str, str]:
    """The memory units that can make a kernel memory-bound: all of them, or for a tensor-core
    kernel those beyond its operand staging (DRAM and L2)."""
    if not tensor_core:
        return dict(MEMORY_UNITS)
    return {u: m for u, m in MEMORY_UNITS.items() if u not in OPERAND_STAGING_UNITS}


def _busiest_memory(values: Values, units: Mapping[str, str]) -> tuple[str | None, float]:
    """The memory limiter: of the units at or above saturation, the one furthest from the SM
    (DRAM, then L2, then shared, then L1), because traffic to a far unit also passes the near
    ones; a streaming copy shows L2 busier than DRAM, yet DRAM is what it waits for."""
    unit, pct = _busiest(values, units)
    for candidate in _precedence(units):
        if _pct(values, units[candidate]) >= SATURATED_PCT:
            return candidate, pct
    return unit, pct


def _precedence(units: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(u for u in MEMORY_PRECEDENCE if u in units)


def _staging_note(values: Values, evidence: str) -> str:
    """Say which saturated units a tensor-core kernel's verdict set aside, and why."""
    busy = [
        f"{'shared memory' if u == 'shared' else u.upper()} {_pct(values, MEMORY_UNITS[u]):.0f}%"
        for u in OPERAND_STAGING_UNITS
        if _pct(values, MEMORY_UNITS[u]) >= SATURATED_PCT
    ]
    if not busy:
        return ""
    return (
        f"{' and '.join(busy)} busy: a tensor-core kernel ({evidence}) stages its operands "
        "there, so that traffic is its compute path, not a memory limit"
    )


def _limiter_note(values: Values, limiter: str | None, units: Mapping[str, str]) -> str:
    """Name the unit that would change the memory limiter if it moved a few points: a farther
    unit just under the threshold, or the chosen one just over it with a nearer unit saturated.
    Replays and launches of one signature differ by that much (DRAM at 60.4% in one run, 59.8%
    in another, for the same launch of an AdamW kernel on the H200)."""
    precedence = _precedence(units)
    if limiter is None or limiter not in precedence:
        return ""

    def pct(unit: str) -> float:
        return _pct(values, MEMORY_UNITS[unit])

    chosen = precedence.index(limiter)
    for unit in precedence[:chosen]:  # farther units, just under the threshold
        if SATURATED_PCT - NEAR_PCT <= pct(unit) < SATURATED_PCT:
            return (
                f"limiter a close call: {unit.upper()} at {pct(unit):.0f}%, near the "
                f"{SATURATED_PCT:.0f}% above which it, not {limiter.upper()} "
                f"({pct(limiter):.0f}%), is the limiter"
            )
    if pct(limiter) < SATURATED_PCT + NEAR_PCT:  # the chosen unit just over, a nearer one saturated
        for unit in precedence[chosen + 1 :]:
            if pct(unit) >= SATURATED_PCT:
                return (
                    f"limiter a close call: {limiter.upper()} at {pct(limiter):.0f}%, near the "
                    f"{SATURATED_PCT:.0f}% below which {unit.upper()} ({pct(unit):.0f}%) is the "
                    "limiter"
                )
    return ""


def classify(values: Values) -> Verdict:
    """Bound and limiter of one launch (or a signature's typical launch): the rule above."""
    evidence = tensor_core_evidence(values)
    units = memory_units(bool(evidence))
    mem_unit, mem_pct = _busiest_memory(values, units)
    cmp_unit, cmp_pct = _busiest(values, COMPUTE_UNITS)
    # ncu's SOL figures stand in only when the per-unit metrics are missing: sm__throughput
    # also counts issue and scheduler activity, so it reads high in kernels whose pipes idle
    # (a block waiting at a barrier), and the memory SOL figure does not say which unit (so it
    # is not used for a tensor-core kernel whose only memory figures are shared and L1).
    if math.isnan(mem_pct) and _busiest(values, MEMORY_UNITS)[0] is None:
        mem_pct = _pct(values, "memory_throughput_pct")
    if math.isnan(cmp_pct):
        cmp_pct = _pct(values, "sm_throughput_pct")
    duration = _pct(values, "duration_ns")
    if duration < LAUNCH_NS:
        return Verdict(
            "launch",
            "launch",
            mem_pct,
            cmp_pct,
            f"runs {duration_words(duration)}, "
            f"under the {duration_words(LAUNCH_NS)} a launch costs",
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
        verdict = _saturated(values, (mem_unit, mem_pct), (cmp_unit, cmp_pct), notes, units)
    else:
        verdict = _latency(values, mem_pct, cmp_pct, notes)
    return replace(verdict, aside=_staging_note(values, evidence)) if evidence else verdict


def _saturated(
    values: Values,
    memory: tuple[str | None, float],
    compute: tuple[str | None, float],
    notes: list[str],
    units: Mapping[str, str],
) -> Verdict:
    """Memory- or compute-bound: the busiest unit is at SATURATED_PCT or more."""
    (mem_unit, mem_pct), (cmp_unit, cmp_pct) = memory, compute
    is_memory = not math.isnan(mem_pct) and (math.isnan(cmp_pct) or mem_pct >= cmp_pct)
    if not math.isnan(mem_pct) and not math.isnan(cmp_pct) and abs(mem_pct - cmp_pct) < NEAR_PCT:
        notes.append(f"memory {mem_pct:.0f}% and compute {cmp_pct:.0f}% are nearly balanced")
    if is_memory:
        unit_pct = values.get(MEMORY_UNITS.get(mem_unit or "", ""), mem_pct)
        notes = [n for n in (*notes, _limiter_note(values, mem_unit, units)) if n]
        note = "; ".join(notes)
        return Verdict(
            "memory", mem_unit or "memory", mem_pct, cmp_pct, note, unit_pct, bool(notes)
        )
    note = "; ".join(notes)
    return Verdict("compute", cmp_unit or "sm", mem_pct, cmp_pct, note, cmp_pct, bool(notes))


def _latency(values: Values, mem_pct: float, cmp_pct: float, notes: list[str]) -> Verdict:
    """Nothing saturates: a grid too small for the GPU, else the warps' top stall."""
    grid, sms = number(values.get("grid_size")), number(values.get("sm_count"))
    if grid is not None and sms is not None and grid < sms:
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


def _nanmax(a: float, b: float) -> float:
    vals = [v for v in (a, b) if not math.isnan(v)]
    return max(vals) if vals else math.nan


def sentence(name: str, verdict: Verdict, pct_of_roof: float | None) -> str:
    """The verdict in one sentence a performance engineer would say."""
    name = short_name(name)
    roof = (
        f", at {pct_of_roof:.0f}% of its roofline"
        if pct_of_roof is not None and not math.isnan(pct_of_roof)
        else ""
    )
    limiter = verdict.limiter
    if verdict.bound == "memory":
        unit = limiter.upper() if limiter else "memory"
        return f"{name} is memory-bound on {unit} ({verdict.limiter_pct:.0f}% of peak){roof}."
    if verdict.bound == "compute":
        return (
            f"{name} is compute-bound on the {limiter} pipe "
            f"({verdict.limiter_pct:.0f}% of peak){roof}."
        )
    if verdict.bound == "latency":
        if limiter == "small_grid":
            why = f", because the grid leaves most SMs idle ({verdict.note})"
        else:
            why = f", warps mostly stalled on {limiter.replace('_', ' ')}" if limiter else ""
        units = "beyond its tensor cores' operand staging " if verdict.aside else ""
        return (
            f"{name} is latency-bound: no unit {units}is busy (memory {verdict.mem_pct:.0f}%, "
            f"compute {verdict.compute_pct:.0f}%){why}."
        )
    if verdict.bound == "launch":
        return f"{name} is launch-bound: it {verdict.note}."
    return f"{name}: not enough metrics for a verdict ({verdict.note})."
