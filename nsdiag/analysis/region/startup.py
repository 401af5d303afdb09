"""What ran before the analysed region: start-up and warm-up, summarised on one line and never
ranked against the region's findings.

The time from the first event of the trace to the region is split into parts that add up: the
warm-up iterations the region left out, and before them the CUDA calls by kind (module loading,
memory allocation, initialisation, other calls) and the host's time outside any CUDA call
(imports, model construction, data preparation, compilation).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from nsdiag.analysis.records.region import Region, Startup, StartupPart, ms
from nsdiag.model import quantities
from nsdiag.model.intervals import union_ns
from nsdiag.model.text_codes import factorize_text

CALL_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "module loading",
        re.compile(
            r"^(?:cu(?:Library|Module)(?:Load|GetFunction|GetKernel|Unload)|cuGetProcAddress"
            r"|cudaGetDriverEntryPoint)"
        ),
    ),
    (
        "memory allocation",
        re.compile(
            r"^(?:cuda|cu)(?:Malloc|MemAlloc|MemCreate|MemMap|MemSetAccess|MemAddressReserve"
            r"|HostAlloc|MallocHost|MemHostAlloc|HostRegister|Free|MemFree|MemRelease|MemUnmap)"
        ),
    ),
    (
        "CUDA initialisation",
        re.compile(r"^(?:cuInit|cuDevicePrimaryCtx|cuCtxCreate|cudaSetDevice|cudaGetDevice)"),
    ),
)
OTHER_CALLS = "other CUDA calls"
MIN_STARTUP_NS = 1e6  # less before the region is not worth a line (a capture that starts at it)
HOST = "host work outside CUDA calls"


def _calls_before(api: pd.DataFrame, t0: int, end: int) -> pd.DataFrame:
    if not len(api):
        return api
    calls = api[(api["start_ns"] >= t0) & (api["start_ns"] < end)]
    return calls.assign(end_ns=np.minimum(calls["end_ns"].to_numpy("int64"), end))


def _call_parts(calls: pd.DataFrame) -> list[StartupPart]:
    """CUDA calls by kind, each call counted in the first kind it matches."""
    # each distinct name matched once (a start-up makes 10^4 calls of a few dozen names)
    codes, names = factorize_text(calls["name"].astype(str))
    left = np.ones(len(calls), dtype=bool)
    parts = []
    for label, pattern in (*CALL_KINDS, (OTHER_CALLS, re.compile(""))):
        # the last slot, -1's, is a missing name's: it matches none
        matched = np.array([*(bool(pattern.search(n)) for n in names), False], dtype=bool)
        mine = calls[left & matched[codes]]
        left &= ~calls.index.isin(mine.index)
        if not len(mine):
            continue
        time = union_ns(mine["start_ns"].to_numpy("int64"), mine["end_ns"].to_numpy("int64"))
        top = mine["name"].value_counts().head(2)
        detail = ", ".join(f"{n} x{c}" for n, c in top.items())
        parts.append(StartupPart(label, time, detail))
    return parts


def summarise(region: Region, api: pd.DataFrame) -> Startup | None:
    """The start-up before `region`, or None when the region starts with the trace (or within
    MIN_STARTUP_NS of it)."""
    t0 = region.trace_start_ns
    if region.start_ns - t0 < MIN_STARTUP_NS:
        return None
    first = region.warmup[0].start_ns if region.warmup else region.start_ns
    parts: list[StartupPart] = []
    if region.warmup:
        walls = float(sum(i.wall_ns for i in region.warmup))
        steady = region.iteration_median_ns or 0.0
        extra = walls - steady * len(region.warmup)
        detail = (
            f"{ms(extra)} more than steady iterations: autotuning, compilation, lazy loading, "
            "allocator growth"
        )
        parts.append(
            StartupPart(quantities.plural(len(region.warmup), "warm-up iteration"), walls, detail)
        )
    calls = _calls_before(api, t0, first)
    covered = 0.0
    if len(calls):
        parts += _call_parts(calls)
        covered = union_ns(calls["start_ns"].to_numpy("int64"), calls["end_ns"].to_numpy("int64"))
    host = max(first - t0 - covered, 0.0)
    if host > 0:
        parts.append(StartupPart(HOST, host, "imports, model construction, data preparation"))
    parts.sort(key=lambda p: -p.time_ns)
    return Startup(
        float(region.start_ns - t0),
        tuple(parts),
        float(max(region.trace_end_ns - region.end_ns, 0)),
    )
