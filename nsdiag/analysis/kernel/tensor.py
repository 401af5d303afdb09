"""Tensor-core work of a kernel: operations per precision, the dense roof they run under, and
whether the kernel is a tensor-core kernel at all.

The roof of tensor work is the dense peak of its precision (`model/tensor_peaks.py`) x SM count
x the SM clock ncu measured during the kernel (`sm__cycles_elapsed.avg.per_second`): at that
clock nsdiag's percentage equals ncu's own `pct_of_peak_sustained_elapsed` of the dense path.
Per launch, each precision's operations per SM per SM-clock cycle are compared with the dense
rate of the table: the percentage of the roof is 100 x sum(achieved rate_p / dense rate_p), the
share of the kernel's SM cycles its tensor work needs at the dense rates (one precision:
ops / duration / peak). A signature's is the time-weighted mean over its launches. Where the
compute capability, the SM count, the clock or the precision is unknown, there is no number
and the note says which; nothing is guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from nsdiag.model.catalogue import TENSOR_OPS_PRECISIONS
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.tensor_peaks import dense_ops_per_sm_per_clock, parse_cc
from nsdiag.model.values import number

if TYPE_CHECKING:  # numpy only where a table is read: the rule loader imports this module
    import numpy as np
    import numpy.typing as npt

#: A tensor pipe busier than this, in a report without tensor-op counts, marks a tensor-core
#: kernel. Not lower: special_function_heavy_good (tests/data/calib) shows the pipe 6.6% busy
#: while it runs no tensor operation at all.
TENSOR_PIPE_BUSY_PCT = 10.0
#: sm_90: ncu's dense peak of the legacy mma.sync path (HMMA) is 360,448 fp16 ops per cycle on
#: the H200, 2/3 of wgmma's 540,672 (docs/tensor-roofs.md); the roof stays the wgmma rate.
MMA_SYNC_CEILING_SM90 = 2 / 3

TENSOR_DERIVED: dict[str, str] = {
    **{
        f"flop_tensor_{p}": f"Tensor-core operations on {p} inputs (a multiply-add is 2)."
        for p in TENSOR_OPS_PRECISIONS
    },
    **{
        f"tensor_ops_per_sm_cycle_{p}": f"Tensor-core {p} operations per SM per SM-clock cycle, "
        "achieved; the dense rate of model/tensor_peaks.py is its roof."
        for p in TENSOR_OPS_PRECISIONS
    },
    "tensor_flops_per_s": "Tensor-core operations per second, achieved.",
}


class Columns(Protocol):
    """A launch table's columns as float64 arrays (analysis/kernel/derived.py's `_Columns`:
    NaN where a column is missing), to which columns are added."""

    def __contains__(self, name: str) -> bool: ...
    def __getitem__(self, name: str) -> npt.NDArray[np.float64]: ...
    def __setitem__(self, name: str, values: npt.NDArray[np.float64]) -> None: ...


def add_tensor_flops(k: Columns) -> None:
    """Per launch: `flop_tensor_<precision>` from the per-precision counts, `flop_tensor`, their
    sum (the per-instruction paths' `tensor_ops` where a report lacks the sums), and the rates.

    The rates are per launch so that a signature's duration-weighted mean of them is its
    time-weighted rate: a GEMM launched with several K under one grid does different work per
    launch, and its mean operations over its mean duration would overstate it (2.5x the roof
    for an nvjet GEMM of tests/data/profile/duration-groups)."""
    import numpy as np

    total = None  # the counts summed left to right, NaN only where every one is missing
    for p in TENSOR_OPS_PRECISIONS:
        ops = k[f"tensor_ops_{p}"]
        k[f"flop_tensor_{p}"] = ops
        total = (
            ops
            if total is None
            else np.where(np.isnan(total), ops, np.where(np.isnan(ops), total, total + ops))
        )
    assert total is not None
    k["flop_tensor"] = np.where(np.isnan(total), k["tensor_ops"], total)
    seconds = k["duration_ns"] * 1e-9
    hz = k["sm_cycles_per_second"]
    clock = np.where(np.isnan(hz), k["sm_frequency_hz"], hz)
    sm_cycles = k["sm_count"] * clock * seconds
    sm_cycles = np.where(sm_cycles > 0, sm_cycles, np.nan)
    for p in TENSOR_OPS_PRECISIONS:
        k[f"tensor_ops_per_sm_cycle_{p}"] = k[f"flop_tensor_{p}"] / sm_cycles
    k["tensor_flops_per_s"] = k["flop_tensor"] / np.where(seconds > 0, seconds, np.nan)


def tensor_flops(values: Mapping[str, Any]) -> dict[str, float]:
    """Precision -> tensor operations, for every precision the report counted (zeros kept)."""
    out: dict[str, float] = {}
    for p in TENSOR_OPS_PRECISIONS:
        ops = number(values.get(f"flop_tensor_{p}"))
        if ops is not None:
            out[p] = ops
    return out


def dominant_precision(flops: Mapping[str, float]) -> str | None:
    """The precision with the most tensor operations; None when none was counted."""
    counted = {p: ops for p, ops in flops.items() if ops > 0}
    return max(counted, key=lambda p: counted[p]) if counted else None


def tensor_core_evidence(values: Mapping[str, Any]) -> str:
    """Why the kernel counts as a tensor-core kernel, or "" when it does not. The counters decide
    where the report has them, the kernel's name only where it has neither: tensor operations
    counted; else the tensor pipe busier than TENSOR_PIPE_BUSY_PCT; else a name that says tensor
    cores (`kernel_facts`)."""
    ops = number(values.get("flop_tensor"))
    if ops is not None:
        return "tensor operations counted" if ops > 0 else ""
    pipe = number(values.get("pipe_tensor_pct"))
    if pipe is not None:
        return f"tensor pipe {pipe:.0f}% busy" if pipe >= TENSOR_PIPE_BUSY_PCT else ""
    for key in ("demangled", "name"):
        name = values.get(key)
        if isinstance(name, str) and parse_kernel_name(name).tensor_core:
            return "its name says tensor cores"
    return ""


def device_cc(values: Mapping[str, Any]) -> tuple[int, int] | None:
    """The compute capability of the kernel's device: the `cc` column, else ncu's attributes."""
    cc = values.get("cc")
    if isinstance(cc, str) and cc.strip():
        parsed = parse_cc(cc)
        if parsed is not None:
            return parsed
    major = number(values.get("device_compute_capability_major"))
    minor = number(values.get("device_compute_capability_minor"))
    if major is None:
        return None
    return (int(major), int(minor or 0))


def sm_clock_hz(values: Mapping[str, Any]) -> float:
    """The SM clock ncu measured during the kernel (NaN when the report lacks it)."""
    for name in ("sm_cycles_per_second", "sm_frequency_hz"):
        hz = number(values.get(name))
        if hz is not None and hz > 0:
            return hz
    return math.nan


@dataclass(frozen=True)
class TensorRoof:
    """One kernel's tensor work against the dense tensor roof of its precision."""

    precision: str | None  # the precision with the most tensor operations
    flops: Mapping[str, float] = field(default_factory=dict)  # by precision, as counted
    peak_flops_per_s: float = math.nan  # dense peak of `precision` at the kernel's SM clock
    achieved_flops_per_s: float = math.nan  # all tensor operations / duration (time-weighted)
    pct_of_roof: float = math.nan  # tensor time at the dense peaks / duration, %
    note: str = ""  # why a number is missing, or what caps this kernel below the roof


def tensor_roof(values: Mapping[str, Any], device_name: str | None = None) -> TensorRoof | None:
    """The kernel's tensor work against its roof; None when it did no tensor work that the
    report shows (no tensor operation counted, and no sign of tensor cores)."""
    flops = tensor_flops(values)
    precision = dominant_precision(flops)
    if precision is None:
        evidence = tensor_core_evidence(values)
        if not evidence:
            return None
        return TensorRoof(
            None,
            flops,
            note=f"tensor-core kernel ({evidence}) but the report counts no tensor operations "
            "per precision: its precision, and so its tensor roof, is unknown",
        )
    duration_s = (number(values.get("duration_ns")) or math.nan) * 1e-9
    total = sum(ops for ops in flops.values() if ops > 0)
    achieved = number(values.get("tensor_flops_per_s"))
    if achieved is None:
        achieved = total / duration_s if duration_s > 0 else math.nan
    used = [p for p, ops in flops.items() if ops > 0]
    rates, missing = _dense_rates(values, used, device_name)
    sms, clock = number(values.get("sm_count")) or math.nan, sm_clock_hz(values)
    if not missing and (math.isnan(sms) or math.isnan(clock)):
        missing = "the report lacks the SM count or the SM clock: no tensor roof"
    if missing:
        return TensorRoof(precision, flops, achieved_flops_per_s=achieved, note=missing)
    # the share of the kernel's SM cycles its tensor work needs at the dense rates
    busy = sum(_ops_per_sm_cycle(values, p, sms * clock * duration_s) / rates[p] for p in used)
    return TensorRoof(
        precision,
        flops,
        peak_flops_per_s=rates[precision] * sms * clock,
        achieved_flops_per_s=achieved,
        pct_of_roof=100 * busy,
        note=_mma_sync_note(values, total),
    )


def _ops_per_sm_cycle(values: Mapping[str, Any], precision: str, sm_cycles: float) -> float:
    """Per launch, or a signature's time-weighted mean of its launches' (`add_tensor_flops`)."""
    rate = number(values.get(f"tensor_ops_per_sm_cycle_{precision}"))
    if rate is not None:
        return rate
    ops = number(values.get(f"flop_tensor_{precision}")) or 0.0
    return ops / sm_cycles if sm_cycles > 0 else math.nan


def _dense_rates(
    values: Mapping[str, Any], precisions: list[str], device_name: str | None
) -> tuple[dict[str, float], str]:
    """Dense ops/clk/SM per precision, or a note saying what is unknown."""
    cc = device_cc(values)
    if cc is None:
        return {}, "the report does not say the GPU's compute capability: no tensor roof"
    rates: dict[str, float] = {}
    for p in precisions:
        # The accumulator is not in ncu's per-precision counts: fp16 and fp8 take the rate with
        # an fp16 accumulator, the higher one where the two differ (GeForce), so no kernel is
        # placed above its roof.
        accumulate = "fp16" if p in ("fp16", "fp8") else "fp32"
        rate = dense_ops_per_sm_per_clock(cc, p, device_name=device_name, accumulate=accumulate)
        if rate is None:
            return {}, (
                f"no dense {p} tensor rate is known for compute capability {cc[0]}.{cc[1]} "
                "(docs/tensor-roofs.md): no tensor roof"
            )
        rates[p] = rate
    return rates, ""


def _mma_sync_note(values: Mapping[str, Any], total: float) -> str:
    """On Hopper, a kernel whose tensor work runs the legacy mma.sync path cannot pass 2/3 of
    the (wgmma) roof: say so, since the gap to the roof is then the instruction path."""
    legacy = number(values.get("tensor_ops_mma_sync"))
    if device_cc(values) != (9, 0) or legacy is None or total <= 0 or legacy < 0.5 * total:
        return ""
    return (
        f"{100 * legacy / total:.0f}% of its tensor work runs the legacy mma.sync path, which "
        f"peaks at {100 * MMA_SYNC_CEILING_SM90:.0f}% of this roof on sm_90 (the roof is "
        "wgmma's)"
    )
