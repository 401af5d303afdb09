"""layout-conversion: kernels that only convert tensors between layouts (NCHW <-> NHWC)."""

from __future__ import annotations

import re

from nsdiag.analysis.context import ProgramContext
from nsdiag.analysis.diagnosis import Evidence, Finding, KernelDiagnosis
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.model.names import short_name
from nsdiag.model.values import number

_COPY_NAME = re.compile(r"copy", re.IGNORECASE)
_LAYOUT_NAME = re.compile(
    r"nchw.?to.?nhwc|nhwc.?to.?nchw|transpose|permute|layout|convert_?(?:format|layout)"
    r"|channels_?last",
    re.IGNORECASE,
)


def is_layout_kernel(k: KernelDiagnosis) -> bool:
    """Named as a layout conversion, or a copy whose accesses are strided: a plain copy is
    coalesced on both sides, a transposing one (NCHW <-> NHWC) cannot be on both."""
    if _LAYOUT_NAME.search(k.demangled) or _LAYOUT_NAME.search(k.name):
        return True
    if not _COPY_NAME.search(k.name):
        return False
    per_sector = [
        number(k.metrics.get(m))
        for m in ("global_load_bytes_per_sector", "global_store_bytes_per_sector")
    ]
    return any(v is not None and 0 < v < 16 for v in per_sector)


def layout_conversions(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    matches = [k for k in ctx.kernels if is_layout_kernel(k)]
    total_ns = ctx.total_gpu_time_ns
    if not matches or not total_ns:
        return []
    time_ns = sum(k.total_duration_ns for k in matches)
    share = time_ns / total_ns
    min_share = rule.params.get("min_share", 0.01)
    if share < min_share:
        return []
    per_launch = [(number(k.metrics.get("dram_bytes")), k.launches) for k in matches]
    moved = sum(nbytes * launches for nbytes, launches in per_launch if nbytes is not None)
    names = ", ".join(
        f"{short_name(k.name)} ({k.launches}x, {k.total_duration_ns / 1e3:.0f} us)"
        for k in matches[:5]
    )
    return [
        Finding(
            rule=rule.id,
            cause=rule.cause,
            title=rule.title,
            impact=share,
            recoverable=1.0,
            message=(
                f"{share * 100:.1f}% of GPU time ({time_ns / 1e3:.0f} us) is spent converting "
                f"tensor layouts: {names}; they move {moved / 1e6:.0f} MB and compute nothing."
            ),
            fix=rule.fix,
            impact_basis=rule.impact_basis,
            evidence=(
                Evidence("layout_time_share", share, ">=", min_share),
                Evidence("layout_time_ns", time_ns),
                Evidence("layout_dram_bytes", moved),
            ),
            kernel=matches[0].name,
            saved_ns=time_ns,
            details={"kernels": [k.name for k in matches]},
        )
    ]
