"""layout-conversion: kernels that only convert tensors between layouts (NCHW <-> NHWC).

A launch is a layout conversion when its name says so (kernel_facts kind `layout-conversion`,
such as cuDNN's nchwToNhwc/nhwcToNchw, or a transpose/permute kernel the name parser gives no
other kind), or when it is a copy whose profiled loads or stores use under half of each 32-byte
sector (a permuting copy such as x.contiguous() on a channels_last tensor). Kernels whose names
only mention a layout (`batch_norm_transform_input_channels_last_kernel` normalises a tensor
that is already channels_last) are not conversions. The time is measured on the region's
launches: the timeline's where there is one, else the profiled launches.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from nsdiag.analysis.program.analyses import LAYOUT_CONVERSIONS
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.analysis.records.findings import Evidence, Finding, share_of
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model import quantities
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.names import short_names
from nsdiag.model.signature import signature_key
from nsdiag.model.text_codes import factorize_text
from nsdiag.model.values import number

_COPY_NAME = re.compile(r"copy", re.IGNORECASE)
_LAYOUT_NAME = re.compile(
    r"nchw.?to.?nhwc|nhwc.?to.?nchw|transpose|permute|convert_?(?:format|layout)", re.IGNORECASE
)
_OTHER_WORK = frozenset(
    {"gemm", "conv-fprop", "conv-dgrad", "conv-wgrad", "attention", "normalization", "reduction",
     "softmax", "pooling", "loss", "optimizer", "communication"}
)  # fmt: skip


def named_conversion(name: str) -> bool:
    """The kernel's name says it converts layouts, and says it does nothing else."""
    kind = parse_kernel_name(name).kind
    if kind == "layout-conversion":
        return True
    return kind not in _OTHER_WORK and bool(_LAYOUT_NAME.search(name))


def strided_copy(k: KernelDiagnosis) -> bool:
    """A copy whose accesses are strided: a plain copy is coalesced on both sides, a
    transposing one (NCHW <-> NHWC) cannot be on both."""
    if not _COPY_NAME.search(k.name):
        return False
    per_sector = [
        number(k.metrics.get(m))
        for m in ("global_load_bytes_per_sector", "global_store_bytes_per_sector")
    ]
    return any(v is not None and 0 < v < 16 for v in per_sector)


def _conversions(ctx: ProgramContext) -> pd.DataFrame:
    sequence = ctx.launches
    strided = {signature_key(k.name, "", "")[3] for k in ctx.kernels if strided_copy(k)}

    # each distinct name tested once, found by number: long names hashed whole 36,000 times
    # by `unique` and again by `isin` cost 10 ms on a per-parameter optimizer's step
    def converts(name: str) -> bool:
        return named_conversion(name) or signature_key(name, "", "")[3] in strided

    codes, names = factorize_text(sequence["name"])
    if (codes < 0).any():  # a missing name: as pandas matches it
        marked = {n for n in sequence["name"].unique() if converts(n)}
        return sequence[sequence["name"].isin(marked)]
    return sequence[np.array([converts(n) for n in names], dtype=bool)[codes]]


def layout_conversions(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    found = _conversions(ctx)
    if not len(found) or not ctx.wall_ns:
        return []
    time_ns = float(found["duration_ns"].sum())
    share = time_ns / ctx.wall_ns
    min_share = LAYOUT_CONVERSIONS.params_of(rule)["min_share"]
    if share < min_share:
        return []
    per_kernel = (
        found.groupby("name", sort=False)["duration_ns"]
        .agg(["size", "sum"])
        .sort_values("sum", ascending=False)
    )
    names = tuple(str(n) for n in per_kernel.index)
    labels = short_names(names)
    moved = _bytes(found)
    values = {
        "share_pct": share * 100,
        "time_us": time_ns / 1e3,
        "launches": len(found),
        "kernels": ", ".join(
            f"{labels[str(name)]} ({int(row['size'])}x, {quantities.duration(row['sum'])})"
            for name, row in per_kernel.head(5).iterrows()
        ),
        "moved_mb": moved / 1e6 if moved else None,
        "moved": f"; they move {quantities.size(moved)} and compute nothing" if moved else "",
        "saved_ms": time_ns / 1e6,
    }
    message, fix = LAYOUT_CONVERSIONS.text(rule, values)
    timed = "timeline" if ctx.session.has_timeline() else "metrics"
    return [
        Finding(
            rule=rule.id,
            cause=rule.cause,
            title=rule.title,
            impact=share_of(time_ns, ctx.wall_ns),
            recoverable=1.0,
            message=message,
            fix=fix,
            impact_basis=rule.impact_basis,
            evidence=(
                Evidence("layout_time_share", share, ">=", min_share),
                Evidence("layout_time_ns", time_ns),
                Evidence("layout_dram_bytes", moved or None),
            ),
            kernel=str(per_kernel.index[0]),
            saved_ns=time_ns,
            details={"kernels": list(names)},
            estimate=timed,
            kernels=names,
        )
    ]


def _bytes(found: pd.DataFrame) -> float:
    total = (found["read_bytes"] + found["write_bytes"]).sum(min_count=1)
    value = number(total)
    return value or 0.0
