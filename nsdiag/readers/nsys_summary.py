"""`nsys stats` summary reports as a kernel table: cuda_gpu_kern_sum's rows become one kernels
row per kernel name, standing for all its launches.

A summary row says how often a kernel ran (Instances), how long in all (Total Time) and per
launch (Avg): the kernels row holds the mean launch as `duration_ns` and the totals as
`timeline_launches` / `timeline_total_ns`, the columns a targeted profile uses for the launches
it did not profile, so the aggregation ranks kernels by total time and counts every instance
(analysis/kernel/signatures.py). Nothing else is known per kernel: no grid, block or metrics.

What a summary cannot tell is said once, in a warning: it has no timeline (no idle time,
overlap, synchronisation or launch analyses), no per-launch metrics (no bound or limiter) and
no region (the whole run is counted, start-up and warm-up included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.session import Session
from nsdiag.readers.kernel_table import build_session

FORMAT = "nsys-stats-cuda_gpu_kern_sum"
# base-unit columns of the report (readers/nsys_stats_csv.py's _base_units) this module reads
_NEEDED = ("name", "instances", "total_time_ns")


def cannot_tell(path: Path | str) -> str:
    return (
        f"{path} is an nsys stats summary (cuda_gpu_kern_sum): kernels are ranked by their total "
        "time over the whole run; a summary has no timeline (no idle time, overlap, "
        "synchronisation or launch analyses), no per-launch metrics (no bound, limiter or "
        "roofline) and no region (start-up and warm-up are counted with the steady state); "
        "record with nsys profile and pass the .nsys-rep or its SQLite export for those"
    )


def kernel_summary(table: pd.DataFrame, path: Path) -> Session:
    """The Session of a cuda_gpu_kern_sum report (`table` in base units, snake_case columns)."""
    missing = [c for c in _NEEDED if c not in table]
    if missing:
        raise InputError(
            f"{path}: cuda_gpu_kern_sum lacks {', '.join(missing)}",
            "re-export it with: nsys stats --report cuda_gpu_kern_sum --format csv",
        )
    names = table["name"].astype("object").fillna("").astype(str)
    instances = pd.to_numeric(table["instances"], errors="coerce")
    total = pd.to_numeric(table["total_time_ns"], errors="coerce")
    # a row without a name, a count or a total says nothing about any kernel
    usable = (names != "") & np.isfinite(instances) & (instances >= 1) & np.isfinite(total)
    usable &= total >= 0
    dropped = int((~usable).sum())
    names, instances, total = names[usable], instances[usable], total[usable]
    if not len(names):
        raise InputError(
            f"{path}: cuda_gpu_kern_sum has no kernel rows",
            "the program launched no kernel, or the report was cut; re-run nsys stats",
        )
    average = (
        pd.to_numeric(table.loc[usable.to_numpy(), "avg_ns"], errors="coerce")
        if "avg_ns" in table
        else total / instances
    )
    identity = pd.DataFrame(
        {
            # the name as printed (demangled, with template arguments): with no grid or block
            # to tell them apart, two instances of one template are two kernels only by it
            "name": names.to_numpy(),
            "demangled": names.to_numpy(),
            "timeline_launches": instances.to_numpy(dtype="float64"),
            "timeline_total_ns": total.to_numpy(dtype="float64"),
            "timeline_variant": 0.0,
            "timeline_variants": 1.0,
        }
    )
    warnings = [cannot_tell(path)]
    if dropped:
        warnings.append(
            f"{path}: {dropped} row(s) lack a name, a count or a total time; they are left out"
        )
    return build_session(
        identity,
        pd.DataFrame(index=range(len(identity))),
        {},
        source=str(path),
        fmt=FORMAT,
        extra_canonical=pd.DataFrame({"duration_ns": average.to_numpy(dtype="float64")}),
        warnings=warnings,
    )


SHOWN_ROWS = 4  # entries named in a summary's line
_WHAT = {
    "cuda_api_sum": ("CUDA API calls", "num_calls", "calls"),
    "cuda_gpu_mem_time_sum": ("GPU memory operations", "count", "operations"),
    "cuda_gpu_mem_size_sum": ("GPU memory operations", "count", "operations"),
    "nvtx_sum": ("NVTX ranges", "instances", "instances"),
}


def summary_lines(report: str, rows: list[dict[str, Any]], path: str) -> list[str]:
    """One line on what a summary other than cuda_gpu_kern_sum holds: its entries taking the
    most time, with their share and count (the analyses need a trace for more)."""
    what, count_key, count_word = _WHAT.get(report, ("entries", "count", "entries"))
    label = "range" if report == "nvtx_sum" else ("operation" if "mem_" in report else "name")
    value_key = "total_bytes" if report == "cuda_gpu_mem_size_sum" else "total_time_ns"
    ranked = sorted(
        ((_number(r.get(value_key)), r) for r in rows if _number(r.get(value_key)) >= 0),
        key=lambda pair: -pair[0],
    )
    if not ranked:
        return [f"{path} is an nsys stats summary ({report}) with no rows"]
    total = sum(value for value, _ in ranked) or 1.0
    top = ", ".join(
        f"{str(row.get(label, '?'))[:80]} {value / total:.1%}"
        + (f" ({int(count)} {count_word})" if (count := _number(row.get(count_key))) >= 0 else "")
        for value, row in ranked[:SHOWN_ROWS]
    )
    unit = "bytes" if value_key == "total_bytes" else "time"
    return [
        f"{path} is an nsys stats summary ({report}) of {len(ranked)} {what}; most {unit}: {top}. "
        "A summary has no timeline: pass the trace (.nsys-rep or its SQLite export) for the "
        "analyses that need one"
    ]


def _number(value: object) -> float:
    """A summary cell as a finite number, -1 when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return -1.0
    return float(value) if np.isfinite(value) else -1.0
