"""Why the GPU waits: every idle nanosecond of the region, by what the host was doing meanwhile.

Each idle gap of a device (view.py; time inside communication kernels left out) is read on the
host thread that launched the work ending it (the thread the GPU waited for), sampled at
SAMPLES evenly spaced times. At each sample the thread is:

- `launch`: inside a CUDA call that issues work (kernel launches, async copies and memsets,
  event records, graph launches), or between two CUDA calls less than `min_cpu_stretch_ns`
  apart: the framework dispatching the next operation. The host issues work slower than the GPU
  runs it (launch-bound); a replayed CUDA graph removes this.
- `cpu`: in a stretch of at least `min_cpu_stretch_ns` with no CUDA call at all: the input
  pipeline, Python, preprocessing (CPU-bound).
- `alloc`: allocating memory, loading modules or initialising CUDA (the patterns of
  region/startup.py).
- `wait`: blocked in a synchronisation while this GPU is idle (it waits on something else: another
  device, a copy engine, a host callback).
- `unknown`: the launching thread is not known, or the export has no CUDA API table.

A gap that a blocking synchronisation drained (the sync returned inside it, view.py's
`sync_count`) is `opened by a sync`: without the sync the host would have prepared that work while
the GPU was still busy. Whether that helps depends on the host's slack: per iteration, the host's
own time is the wall time less the time it was blocked in syncs; dropping the syncs makes the
iteration about max(host time, GPU busy time) long, so the syncs cost wall - max(host, busy);
but never less than the round trips themselves (each draining sync's own time plus the launch
latency of the next work, which a host that had queued ahead would have hidden: view.syncs'
claim_ns; a host-bound loop that synchronises after every tiny op saves about that), and at most
the idle time of the gaps they opened. That part is the sync's; the rest of the idle time stays
with the host's activity, so no idle nanosecond is counted twice (the four analyses in
host_wait.py report disjoint parts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.timeline.view import TimelineView
from nsdiag.analysis.records.region import Region
from nsdiag.analysis.region.startup import CALL_KINDS
from nsdiag.model.intervals import runs, union_ns
from nsdiag.model.tables import records
from nsdiag.model.text_codes import factorize_all

CATEGORIES = ("launch", "cpu", "alloc", "wait", "unknown")
SAMPLES = 32
# The shortest host stretch without a CUDA call that is CPU work rather than the framework
# dispatching the next operation: PyTorch's eager dispatch between two launches took at most
# ~0.1 ms on the H200 (a BERT request: 166 launches, 0.53 ms at the longest, once, in a kernel's
# first call), a DataLoader batch or a collation 1.5-230 ms.
MIN_CPU_STRETCH_NS = 500_000
COPY_SOON_NS = 200_000
ALLOC_PATTERN = "|".join(f"(?:{pattern.pattern})" for _, pattern in CALL_KINDS)
_GRAPH_LAUNCH = ("cudaGraphLaunch", "cuGraphLaunch")
# What nested CUDA calls (a runtime call and the driver call inside it) count as, by rank: a sync
# if any of them is, else an allocation if any is, else a launch. Per CATEGORIES index: its rank
# (0 for the categories a call is never), and per rank: the CATEGORIES index.
_NESTED = ("launch", "alloc", "wait")
_NESTED_RANK = np.array([_NESTED.index(c) if c in _NESTED else 0 for c in CATEGORIES])
_BY_NESTED_RANK = np.array([CATEGORIES.index(c) for c in _NESTED])


@dataclass(frozen=True)
class WaitAccount:
    """The region's idle GPU time split by host activity, and the sync's share of it."""

    # One row per idle gap: device, start_ns, end_ns, idle_ns, iteration (-1: none), opened
    # (a draining sync returned in it), next_range, thread_id, one column per CATEGORIES (ns),
    # sync_ns (the part the syncs claim, taken out of the category columns in proportion).
    gaps: pd.DataFrame
    # One row per iteration (or one for the whole region): start_ns, end_ns, wall_ns, busy_ns,
    # blocked_ns, host_ns, slack_ns, opened_idle_ns, sync_ns.
    iterations: pd.DataFrame
    # The longest stretches with no CUDA call inside idle gaps, with the calls around them:
    # thread_id, start_ns, end_ns, idle_ns, before (call name), after (call name), after_copy.
    cpu_stretches: pd.DataFrame
    graph_launches: int  # cudaGraphLaunch calls in the region
    kernel_launches: int  # kernel launch calls in the region (eager)
    has_api: bool  # the export has a CUDA API table to read the host from
    min_cpu_stretch_ns: float = MIN_CPU_STRETCH_NS

    def total(self, category: str) -> float:
        return float(self.gaps[category].sum()) if len(self.gaps) else 0.0

    @property
    def sync_ns(self) -> float:
        return float(self.gaps["sync_ns"].sum()) if len(self.gaps) else 0.0

    @property
    def idle_ns(self) -> float:
        return float(self.gaps["idle_ns"].sum()) if len(self.gaps) else 0.0


def account(
    view: TimelineView,
    api: pd.DataFrame,
    region: Region | None,
    min_cpu_stretch_ns: float = MIN_CPU_STRETCH_NS,
) -> WaitAccount:
    """The region's idle time by host activity (the module docstring says how)."""
    gaps = view.gaps
    idle = (gaps["length"] - gaps.get("comm_ns", 0.0)).clip(lower=0).to_numpy("float64")
    frame = pd.DataFrame(
        {
            "device": gaps["device"].to_numpy(),
            "start_ns": gaps["start_ns"].to_numpy("int64"),
            "end_ns": gaps["end_ns"].to_numpy("int64"),
            "idle_ns": idle,
            "opened": gaps["sync_count"].to_numpy() > 0,
            "next_range": gaps["next_range"].to_numpy(dtype=object),
            "thread_id": gaps["thread_id"].to_numpy("int64"),
            "process_id": gaps["process_id"].to_numpy("int64"),
        },
        index=gaps.index,
        copy=False,  # the view's columns are read, never written: not copied
    )
    has_api = bool(len(api)) and {"thread_id", "start_ns", "end_ns", "name"} <= set(api.columns)
    names = _Names(api["name"].astype(str).to_numpy(dtype=object) if has_api else [])
    shares, stretches = (
        _host_shares(frame, api, min_cpu_stretch_ns, names)
        if has_api and len(frame)
        else (_unknown(len(frame)), _no_stretches())
    )
    for i, category in enumerate(CATEGORIES):
        frame[category] = shares[:, i] * idle
    frame["iteration"] = _iteration_of(frame["start_ns"].to_numpy(), region)
    iterations = _iterations(frame, view, api if has_api else None, region)
    iterations["sync_ns"] = _sync_claims(iterations, view, region)
    _claim_for_syncs(frame, iterations)
    frame["other"] = frame["alloc"] + frame["wait"] + frame["unknown"]
    return WaitAccount(
        gaps=frame,
        iterations=iterations,
        cpu_stretches=stretches,
        graph_launches=int(names.test(lambda u: u.isin(_GRAPH_LAUNCH)).sum()),
        kernel_launches=int(
            names.test(lambda u: u.str.contains(r"^cu(?:da)?LaunchKernel", regex=True)).sum()
        ),
        has_api=has_api,
        min_cpu_stretch_ns=min_cpu_stretch_ns,
    )


def _unknown(n: int) -> npt.NDArray[np.float64]:
    shares = np.zeros((n, len(CATEGORIES)))
    shares[:, CATEGORIES.index("unknown")] = 1.0
    return shares


def _no_stretches() -> pd.DataFrame:
    return pd.DataFrame(
        columns=[
            "process_id", "thread_id", "start_ns", "end_ns", "idle_ns", "before", "after",
            "after_copy",
        ]
    )  # fmt: skip


@dataclass(frozen=True)
class _Thread:
    """One host thread's CUDA calls as disjoint busy intervals, each with its category and the
    names of its first and last call."""

    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    kind: npt.NDArray[np.int64]  # index into CATEGORIES (launch, alloc or wait)
    first_name: npt.NDArray[np.int64]  # the calls' name numbers (_Names.codes)
    last_name: npt.NDArray[np.int64]
    # a copy starts within COPY_SOON_NS of this interval's start (PyTorch checks the stream's
    # capture state, allocates, then copies: the copy is a call or two later)
    copy_soon: npt.NDArray[np.bool_]


class _Names:
    """The CUDA calls' names, each distinct name numbered once: a million calls have a few dozen
    names, so a string test runs once per distinct name."""

    def __init__(self, names: npt.ArrayLike) -> None:
        self.values = np.asarray(names, dtype=object)
        # pandas' object table (model/text_codes.py): 3.6 against 6.2 ms for 110,000 calls
        self.codes, uniques = factorize_all(self.values)  # a missing name numbered too
        self.distinct = pd.Series(uniques, dtype="str")  # as pandas holds the names

    def test(self, test: Callable[[pd.Series], pd.Series]) -> npt.NDArray[np.bool_]:
        """`test` (a string test of a Series of names, as pandas runs it) per call."""
        if not len(self.distinct):
            return np.zeros(len(self.values), dtype=bool)
        return np.asarray(test(self.distinct), dtype=bool)[self.codes]


def _threads(api: pd.DataFrame, calls: _Names) -> dict[int, _Thread]:
    names = calls.codes
    kind = np.full(len(api), CATEGORIES.index("launch"), dtype="int64")
    kind[calls.test(lambda u: u.str.contains(ALLOC_PATTERN, regex=True))] = CATEGORIES.index(
        "alloc"
    )
    memcpy = calls.test(lambda u: u.str.contains("Memcpy", regex=False))
    if "is_sync" in api:
        kind[api["is_sync"].astype(bool).to_numpy()] = CATEGORIES.index("wait")
    out: dict[int, _Thread] = {}
    tids = api["thread_id"].to_numpy("int64")
    starts_all, ends_all = api["start_ns"].to_numpy("int64"), api["end_ns"].to_numpy("int64")
    for tid in np.unique(tids):
        rows = np.flatnonzero(tids == tid)
        order = rows[np.lexsort((ends_all[rows], starts_all[rows]))]
        s, e = starts_all[order], np.maximum(ends_all[order], starts_all[order])
        first, piece_ends = runs(s, e)
        last = np.append(first[1:], len(s)) - 1
        # nested calls share one interval, of the highest-ranked kind among them
        top = np.maximum.reduceat(_NESTED_RANK[kind[order]], first)
        is_copy = memcpy[order]
        copy_at = np.where(is_copy, s, np.iinfo("int64").max)
        # the first copy at or after each interval's start: a suffix minimum over the calls
        next_copy = np.minimum.accumulate(copy_at[::-1])[::-1][first]
        out[int(tid)] = _Thread(
            starts=s[first],
            ends=piece_ends,
            kind=_BY_NESTED_RANK[top],
            first_name=names[order[first]],
            last_name=names[order[last]],
            copy_soon=(next_copy - s[first]) <= COPY_SOON_NS,
        )
    return out


def _host_shares(
    gaps: pd.DataFrame, api: pd.DataFrame, min_cpu_ns: float, names: _Names
) -> tuple[npt.NDArray[np.float64], pd.DataFrame]:
    """Per gap, the share of its samples in each category; and the CPU stretches seen."""
    threads = _threads(api, names)
    n = len(gaps)
    counts = np.zeros((n, len(CATEGORIES)))
    offsets = (np.arange(SAMPLES) + 0.5) / SAMPLES
    tids = gaps["thread_id"].to_numpy("int64")
    starts, ends = gaps["start_ns"].to_numpy("int64"), gaps["end_ns"].to_numpy("int64")
    idle = gaps["idle_ns"].to_numpy("float64")
    pids = gaps["process_id"].to_numpy("int64")
    stretch_rows: list[pd.DataFrame] = []
    for tid in np.unique(tids):
        rows = np.flatnonzero(tids == tid)
        thread = threads.get(int(tid))
        if thread is None or not len(thread.starts):
            counts[rows, CATEGORIES.index("unknown")] = SAMPLES
            continue
        # a gap whose samples all fall in one run of a category other than CPU work (most
        # gaps: the host launching throughout) is that category; only the others are sampled
        cat, single = _single_run(thread, starts[rows], ends[rows], offsets, min_cpu_ns)
        counts.reshape(-1)[rows[single] * len(CATEGORIES) + cat[single]] = SAMPLES
        rows = rows[~single]
        if not len(rows):
            continue
        times = starts[rows, None] + offsets[None, :] * (ends[rows] - starts[rows])[:, None]
        times = times.astype("int64")
        i = np.searchsorted(thread.starts, times, side="right") - 1
        inside = (i >= 0) & (times < thread.ends[np.clip(i, 0, None)])
        # outside a call: the stretch from the previous call's end to the next call's start
        prev_end = np.where(i >= 0, thread.ends[np.clip(i, 0, None)], np.iinfo("int64").min // 2)
        nxt = np.clip(i + 1, 0, len(thread.starts) - 1)
        next_start = np.where(
            i + 1 < len(thread.starts), thread.starts[nxt], np.iinfo("int64").max // 2
        )
        long_stretch = (next_start - prev_end) >= min_cpu_ns
        category = np.where(
            inside,
            thread.kind[np.clip(i, 0, None)],
            np.where(long_stretch, CATEGORIES.index("cpu"), CATEGORIES.index("launch")),
        )
        for c in range(len(CATEGORIES)):
            counts[rows, c] = (category == c).sum(axis=1)
        cpu = ~inside & long_stretch & (i >= 0) & (i + 1 < len(thread.starts))
        r, k = np.nonzero(cpu)
        if len(r):
            samples = (pids[rows[r]], int(tid), i[r, k], idle[rows[r]])
            stretch_rows.append(_thread_stretches(*samples, thread))
    stretches = _stretches(stretch_rows, names)
    counts /= SAMPLES  # in place: the shares
    return counts, stretches


def _single_run(
    thread: _Thread,
    starts: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.float64],
    min_cpu_ns: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Per gap, whether all its samples fall in one run of consecutive stretches of one category
    other than `cpu`, and that category. The thread's time is cut at each interval's start and
    end: inside interval j its kind, after it (until the next start) `cpu` or `launch` by the
    length of the stretch, as _host_shares decides per sample (with the same integer sentinels
    before the first and after the last call). The sample times grow monotonically along a
    gap, so the first and last sample (computed as _host_shares computes them) in one run
    means every sample is in it. Two changes at one time (a call of no duration) make a run
    no sample can be in: gaps across it are sampled, as are the rest."""
    cpu, launch = CATEGORIES.index("cpu"), CATEGORIES.index("launch")
    # the stretch before each interval (j = 0..n-1) and after the last
    prev_end = np.concatenate([[np.iinfo("int64").min // 2], thread.ends])
    next_start = np.concatenate([thread.starts, [np.iinfo("int64").max // 2]])
    free = np.where((next_start - prev_end) >= min_cpu_ns, cpu, launch)
    # The category changes where interval j starts (its kind differs from the stretch before)
    # and where it ends (differs from the stretch after), in time order (positions 2j+1 and
    # 2j+2 in the cut sequence start_0, end_0, ...): a host launching throughout changes
    # category a few hundred times in a million calls.
    enter = np.flatnonzero(thread.kind != free[:-1])
    leave = np.flatnonzero(thread.kind != free[1:])
    order = np.argsort(np.concatenate([2 * enter + 1, 2 * leave + 2]), kind="stable")
    changes = np.concatenate([thread.starts[enter], thread.ends[leave]])[order]
    run_category = np.concatenate([free[:1], thread.kind[enter], free[leave + 1]])
    run_category[1:] = run_category[1:][order]
    span = ends - starts
    first = (starts + offsets[0] * span).astype("int64")
    last = (starts + offsets[-1] * span).astype("int64")
    # a sample's run: the changes at or before it
    run_first = np.searchsorted(changes, first, side="right")
    run_last = np.searchsorted(changes, last, side="right")
    cat = run_category[run_first]
    return cat, (run_first == run_last) & (cat != cpu)


def _thread_stretches(
    pids: npt.NDArray[np.int64],
    tid: int,
    at: npt.NDArray[np.int64],
    gap_idle: npt.NDArray[np.float64],
    thread: _Thread,
) -> pd.DataFrame:
    """A thread's CPU samples (`at`: the call before each; `gap_idle`: its gap's idle time),
    one row per process and stretch with the idle time its samples stand for summed. The
    call before a sample names its stretch (the stretch runs from that call's end to the next
    call's start), so the samples are summed per call, not per row of seven keys (a long
    recording samples hundreds of thousands of CPU moments); each group's samples are summed
    in their order, as the groupby of _stretches sums them."""
    if len(pids) and pids.min() == pids.max():  # one process (np.unique sorts every sample)
        processes, process = pids[:1], np.zeros(len(pids), dtype="int64")
    else:
        processes, process = np.unique(pids, return_inverse=True)
    span = len(thread.starts) + 1
    key = process.astype("int64") * span + at
    idle = pd.Series(gap_idle / SAMPLES).groupby(key, sort=True).sum()
    found = idle.index.to_numpy("int64")
    at = found % span
    return pd.DataFrame(
        {
            "process_id": processes[found // span],
            "thread_id": tid,
            "start_ns": thread.ends[at],
            "end_ns": thread.starts[at + 1],
            "idle_ns": idle.to_numpy("float64"),
            "before": thread.last_name[at],
            "after": thread.first_name[at + 1],
            "after_copy": thread.copy_soon[at + 1],
        }
    )


def _stretches(rows: list[pd.DataFrame], names: _Names) -> pd.DataFrame:
    """The CPU stretches, one row each (the idle time sampled inside it summed), most idle time
    first; `after_copy`: a copy follows within COPY_SOON_NS (the host prepared input). The rows
    name the calls before and after by number: grouped on numbers, not on the strings (a long
    recording samples hundreds of thousands of CPU moments), and named after."""
    if not rows:
        return _no_stretches()
    keys = ["process_id", "thread_id", "start_ns", "end_ns", "before", "after", "after_copy"]
    joined = pd.concat(rows, ignore_index=True)
    frame = _one_per_stretch(joined, keys)
    if frame is None:
        frame = joined.groupby(keys, as_index=False).agg(idle_ns=("idle_ns", "sum"))
    distinct = names.distinct.to_numpy(dtype=object)
    for side in ("before", "after"):
        frame[side] = pd.Series(distinct[frame[side].to_numpy()], index=frame.index, dtype="str")
    return frame.sort_values(by="idle_ns", ascending=False).reset_index(drop=True)


def _one_per_stretch(joined: pd.DataFrame, keys: list[str]) -> pd.DataFrame | None:
    """The stretches in the order the groupby of `_stretches` gives them, where each comes once
    (None otherwise): `_thread_stretches` summed each thread's samples per stretch, and a
    stretch is told apart by its process, thread and start, so the groupby on seven keys would
    only sort the rows (pandas' own work, 2 ms of a diagnosis)."""
    if not len(joined):
        return None
    told = [joined[c].to_numpy("int64") for c in ("process_id", "thread_id", "start_ns")]
    order = np.lexsort(told[::-1])
    ordered = [c[order] for c in told]
    again = np.logical_and.reduce([c[1:] == c[:-1] for c in ordered])
    if again.any():  # a stretch twice: the groupby sums it
        return None
    return joined.take(order)[[*keys, "idle_ns"]].reset_index(drop=True)


def _iteration_of(starts: npt.NDArray[np.int64], region: Region | None) -> npt.NDArray[np.int64]:
    if region is None or not region.iterations:
        return np.zeros(len(starts), dtype="int64")
    its = sorted(region.iterations, key=lambda it: it.start_ns)
    begin = np.array([it.start_ns for it in its], dtype="int64")
    end = np.array([it.end_ns for it in its], dtype="int64")
    i = np.searchsorted(begin, starts, side="right") - 1
    ok = (i >= 0) & (starts < end[np.clip(i, 0, None)])
    return np.where(ok, i, -1)


def _windows(region: Region | None, view: TimelineView) -> list[tuple[int, int]]:
    if region is not None and region.iterations:
        return [
            (it.start_ns, it.end_ns) for it in sorted(region.iterations, key=lambda x: x.start_ns)
        ]
    if region is not None and region.windows:
        start = min(w[0] for w in region.windows)
        return [(start, max(w[1] for w in region.windows))]
    if view.spans:
        return [(min(s for s, _ in view.spans.values()), max(e for _, e in view.spans.values()))]
    return []


def _iterations(
    gaps: pd.DataFrame, view: TimelineView, api: pd.DataFrame | None, region: Region | None
) -> pd.DataFrame:
    """Per iteration: wall, GPU busy (wall less the idle gaps in it, on the busiest device), the
    host's time blocked in syncs (their union, every thread), its own time and its slack."""
    windows = _windows(region, view)
    rows = []
    syncs = (
        api[api["is_sync"].astype(bool)]
        if api is not None and "is_sync" in api
        else pd.DataFrame(columns=["start_ns", "end_ns"])
    )
    s_start = syncs["start_ns"].to_numpy("int64")
    s_end = syncs["end_ns"].to_numpy("int64")
    # by start (stable: the order union_ns would sort them in), so that each window reads
    # only the syncs that can reach it, not all of them (a serving loop: 219 windows)
    by_start = np.argsort(s_start, kind="stable")
    s_start, s_end = s_start[by_start], s_end[by_start]
    longest = int(max((s_end - s_start).max(), 0)) if len(s_start) else 0
    per_iteration = region is not None and bool(region.iterations)
    # each iteration's gaps as one block of rows, in their order (one stable sort, not a scan
    # of every gap per iteration); sums are taken over the same values in the same order
    which = gaps["iteration"].to_numpy("int64") if per_iteration else np.zeros(len(gaps), "int64")
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(len(windows) + 1), side="left")
    idle = gaps["idle_ns"].to_numpy("float64")[order]
    opened_rows = gaps["opened"].to_numpy(bool)[order]
    by_device = gaps.groupby([which, gaps["device"].to_numpy()], sort=True)["idle_ns"].sum()
    least = by_device.groupby(level=0, sort=True).min()
    least_of = dict(zip(least.index.tolist(), least.tolist(), strict=True))  # read per window
    for index, (start, end) in enumerate(windows):
        wall = float(end - start)
        lo, hi = int(bounds[index]), int(bounds[index + 1])
        idle_min = float(least_of.get(index, 0.0)) if lo < hi else 0.0
        busy = max(wall - idle_min, 0.0)
        first, stop = np.searchsorted(s_start, [start - longest, end], side="left")
        blocked = _union_inside(s_start[first:stop], s_end[first:stop], start, end)
        host = max(wall - blocked, 0.0)
        opened = _nansum(idle[lo:hi][opened_rows[lo:hi]])
        slack = max(wall - max(host, busy), 0.0)
        rows.append(
            {
                "start_ns": start,
                "end_ns": end,
                "wall_ns": wall,
                "busy_ns": busy,
                "blocked_ns": blocked,
                "host_ns": host,
                "slack_ns": slack,
                "opened_idle_ns": opened,
            }
        )
    return pd.DataFrame(rows)


def _nansum(values: npt.NDArray[np.float64]) -> float:
    """The sum pandas' Series.sum gives (NaN as 0, then numpy's sum of the array)."""
    values = values.copy()
    values[np.isnan(values)] = 0.0
    return float(values.sum())


def _sync_claims(iterations: pd.DataFrame, view: TimelineView, region: Region | None) -> pd.Series:
    """Per iteration: what dropping the syncs saves, between the round trips and the idle time
    they opened (the module docstring says why)."""
    if not len(iterations):
        return pd.Series(dtype="float64")
    syncs = view.syncs
    drains = np.zeros(len(iterations))
    if len(syncs):
        ends = syncs["end_ns"].to_numpy("int64")
        starts = iterations["start_ns"].to_numpy("int64")
        i = np.searchsorted(starts, ends, side="right") - 1
        ok = (i >= 0) & (ends < iterations["end_ns"].to_numpy("int64")[np.clip(i, 0, None)])
        np.add.at(drains, i[ok], syncs["claim_ns"].to_numpy("float64")[ok])
    cost = np.maximum(iterations["slack_ns"].to_numpy(), drains)
    return pd.Series(
        np.minimum(iterations["opened_idle_ns"].to_numpy(), cost), index=iterations.index
    )


def _union_inside(
    starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], lo: int, hi: int
) -> float:
    keep = (starts < hi) & (ends > lo)
    return union_ns(np.maximum(starts[keep], lo), np.minimum(ends[keep], hi))


def _claim_for_syncs(gaps: pd.DataFrame, iterations: pd.DataFrame) -> None:
    """Take each iteration's sync claim out of the gaps the syncs opened, in proportion to their
    idle time and to each category's share of it."""
    gaps["sync_ns"] = 0.0
    if not len(iterations) or not len(gaps):
        return
    which = gaps["iteration"].to_numpy("int64")
    if not (len(iterations) > 1 or (which >= 0).all()):
        which = np.zeros(len(gaps), dtype="int64")  # one window: every gap is its
    idle = gaps["idle_ns"].to_numpy("float64")
    mine = gaps["opened"].to_numpy(bool) & (which >= 0) & (which < len(iterations))
    opened = np.bincount(which[mine], weights=idle[mine], minlength=len(iterations))
    claim = iterations["sync_ns"].to_numpy("float64")
    share = np.divide(claim, opened, out=np.zeros(len(claim)), where=(opened > 0) & (claim > 0))
    fraction = np.zeros(len(gaps))
    fraction[mine] = np.minimum(share, 1.0)[which[mine]]
    gaps["sync_ns"] = idle * fraction
    for category in CATEGORIES:
        gaps[category] = gaps[category].to_numpy("float64") * (1 - fraction)


def stretch_text(
    stretches: pd.DataFrame, ranges: Sequence[str | None] = (), top: int = 2
) -> Sequence[str]:
    """The CPU stretches that cost most idle time, longest first, in words ("4.10 ms between
    cudaStreamSynchronize and cudaStreamIsCapturing, in NVTX range 'load_batch', then a
    copy"); `ranges`: the NVTX range the host was in during each stretch (None: none)."""
    picked = records(stretches.head(top))
    named = [*ranges, *([None] * len(picked))]
    rows = sorted(
        zip(picked, named[: len(picked)], strict=True),
        key=lambda pair: -(int(pair[0]["end_ns"]) - int(pair[0]["start_ns"])),
    )
    out = []
    for row, name in rows:
        length = (int(row["end_ns"]) - int(row["start_ns"])) / 1e6
        where = f", in NVTX range '{name}'" if name else ""
        then = ", then a copy to the GPU" if row["after_copy"] else ""
        out.append(f"{length:.2f} ms between {row['before']} and {row['after']}{where}{then}")
    return out
