"""Why the late rank of a distributed run is late, from what it does that the others don't.

A rank that makes the others wait is late for a reason that shows in its own timeline:
- its host stalls: stretches of a millisecond or more with no CUDA call on the threads that
  launch its kernels (data loading, preprocessing, Python work before the step's kernels);
- its GPU computes more: extra kernels, or the same kernels on a slower GPU;
- it spends longer in an NVTX range than the others (its own annotation of the extra work).

When none of them accounts for its lateness, its host runs the same work as the others, call for
call, only slower throughout the step. That is what a busier or slower CPU core looks like, and
also what the profiler's own overhead does: nsys slows each traced process by a different amount.
On the two-H200 machine the same balanced DDP program (tests/data/multi_gpu) ran 10-13 ms per
step without a profiler and 15-21 ms under nsys; in five of ten traces one rank arrived last at
nearly every collective, 3.6-7.3 ms per step, spread over its ~1000 host gaps per step (none
of 1 ms), a different rank from run to run. A deliberate 12 ms data-loading delay shows instead
as 12.4 ms per step of host stalls on the late rank.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.records.region import Window
from nsdiag.model.ranks import rank_of
from nsdiag.model.text_codes import factorize_text

STALL_NS = 1_000_000.0  # a host gap this long on the launching threads is a stall, not overhead
SAMPLED_OTHERS = 15  # other ranks whose stalls give the median (evenly spaced; 256 ranks: 16 read)


def host_stalls(
    api_calls: pd.DataFrame, windows: tuple[Window, ...], only: Sequence[int] | None = None
) -> dict[int, tuple[float, float]]:
    """Per rank (of `only`, else every one): (total, longest) host stall in the windows, ns. A
    stall is a gap of STALL_NS or more between the CUDA calls of the threads that launch kernels
    (other threads, such as NCCL's watchdog polling its events, would cut a stall into
    pieces)."""
    if not len(api_calls) or "thread_id" not in api_calls or not windows:
        return {}
    ranks = rank_of(api_calls)
    if only is not None:
        mine = np.isin(ranks, list(only))
        if not mine.all():  # (the ranks a run has are most often all asked for: no copy)
            api_calls, ranks = api_calls[mine], ranks[mine]
    thread = ranks * (1 << 32) + api_calls["thread_id"].to_numpy("int64")
    codes, names = factorize_text(api_calls["name"].astype(str))  # each distinct name once
    launches = np.array([*("Launch" in n for n in names), False], dtype=bool)[codes]
    starts = api_calls["start_ns"].to_numpy("float64")
    ends = api_calls["end_ns"].to_numpy("float64")
    edges = np.array([w[0] for w in windows], dtype="float64")
    window = np.searchsorted(edges, starts, side="right") - 1
    closes = np.array([w[1] for w in windows], dtype="float64")
    # against the few launching threads, not every launch's (np.isin sorts both sides)
    keep = np.isin(thread, pd.unique(thread[launches])) & (window >= 0)
    keep &= ends <= closes[np.clip(window, 0, None)]
    rank, gap = _gaps(ranks[keep], window[keep], starts[keep], ends[keep])
    stalls = pd.DataFrame({"rank": rank, "gap": gap})[gap >= STALL_NS]
    found = {int(r): (0.0, 0.0) for r in np.unique(ranks[keep])}
    summary = stalls.groupby("rank")["gap"].agg(["sum", "max"])
    for rank, total, longest in zip(
        summary.index.to_numpy("int64"), summary["sum"], summary["max"], strict=True
    ):
        found[int(rank)] = (float(total), float(longest))
    return found


def _gaps(
    ranks: npt.NDArray[np.int64],
    windows: npt.NDArray[np.int64],
    starts: npt.NDArray[np.float64],
    ends: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The calls in order of rank, window and start, each call's rank and the gap before it:
    from the farthest end of the earlier calls of its rank and window (0 for the first)."""
    order = np.lexsort((starts, windows, ranks))  # stable, as sort_values(kind="stable")
    ranks, windows, starts, ends = ranks[order], windows[order], starts[order], ends[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (ranks[1:] != ranks[:-1]) | (windows[1:] != windows[:-1])
    reach = ends.copy()  # the running maximum of each group's ends (the caller kept none missing)
    bounds = [*np.flatnonzero(first).tolist(), len(order)]
    for a, b in itertools.pairwise(bounds):
        np.maximum.accumulate(ends[a:b], out=reach[a:b])
    gap = np.zeros(len(order), dtype="float64")
    gap[1:] = starts[1:] - reach[:-1]
    gap[first] = 0.0
    return ranks, gap


def longer_ranges(
    nvtx: pd.DataFrame,
    windows: tuple[Window, ...],
    late: int,
    per: int,
    at_least: float,
    step_ns: float,
) -> tuple[tuple[str, float], ...]:
    """NVTX ranges (starting in the windows) the late rank spends at least `at_least` ns per
    iteration longer in than the median other rank, longest first (at most three). Ranges that
    take half the step or more on the other ranks (the iteration's own range) span the waiting
    too, and explain nothing."""
    if not len(nvtx) or "rank" not in nvtx:
        return ()
    starts = nvtx["start_ns"].to_numpy("float64")
    inside = np.zeros(len(nvtx), dtype=bool)
    for w_start, w_end in windows:
        inside |= (starts >= w_start) & (starts < w_end)
    frame = pd.DataFrame(
        {
            "rank": rank_of(nvtx)[inside],
            "name": nvtx["name"].astype(str).to_numpy()[inside],
            "ns": pd.to_numeric(nvtx["duration_ns"], errors="coerce")
            .fillna(0)
            .to_numpy(dtype="float64")[inside],
        }
    )
    table = frame.groupby(["name", "rank"])["ns"].sum().unstack().fillna(0.0)
    if late not in table.columns or len(table.columns) < 2:
        return ()
    others = table.drop(columns=[late]).median(axis=1) / max(per, 1)
    extra = table[late] / max(per, 1) - others
    spans = others >= 0.5 * step_ns
    found = extra[(extra >= at_least) & ~spans].sort_values(ascending=False).head(3)
    return tuple((str(n), float(v)) for n, v in found.items())
