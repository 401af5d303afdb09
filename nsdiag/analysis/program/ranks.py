"""Ranks of a distributed run: each rank's step split into computation, communication, exposed
communication and idle time, and how long each waits inside collectives for a late peer.

Per rank, over the analysed region's windows (chosen on the first rank; the others are held in
step by their collectives):
- computation: the union of its GPU work other than communication kernels (kernels, copies);
- communication: the union of its communication kernels (NCCL);
- exposed communication: communication while no computation runs on the GPU;
- idle: no GPU work at all;
- wait: time inside a collective before the last rank reached it. The k-th launch of a
  collective kernel (by name) on every rank is one collective: it can only move data once every
  rank has started its kernel, so a rank that started earlier waits for the latest one. Wait is
  part of the exposed communication; the rest of it is transfer (`exposed - wait`).
Figures are per iteration (the region's iterations; the region's wall time when it has none).
A rank's delay at a collective it reaches last is the time between the latest other rank's
start and its own. The late rank (the straggler) is the one whose delays are at least
CONSISTENT_SHARE of all ranks' delays: it is last at collective after collective. When the last
arrival changes hands (each rank's host a little late in turn) no rank is the straggler; what
the one that delays the others most does more than they do is in `lateness`
(analysis/program/lateness.py) either way.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.lateness import SAMPLED_OTHERS, host_stalls, longer_ranges
from nsdiag.analysis.records.ranks import Lateness, RankAnalysis, RankStep
from nsdiag.analysis.records.region import Region, Window
from nsdiag.model.intervals import union_ns
from nsdiag.model.ranks import is_communication, rank_of, session_ranks
from nsdiag.model.session import Session
from nsdiag.model.text_codes import factorize_text

FloatArray = npt.NDArray[np.float64]
CONSISTENT_SHARE = 0.75  # of all delays, caused by one rank: it is the straggler


def analyse_ranks(session: Session, region: Region | None) -> RankAnalysis | None:
    """The per-rank breakdown, for a session with two ranks or more (None otherwise)."""
    ranks = session_ranks(session.meta)
    timeline = session.timeline
    if len(ranks) < 2 or not len(timeline) or "rank" not in timeline:
        return None
    windows = region.windows if region is not None else _whole(timeline)
    iterations = max(len(region.iterations), 1) if region is not None else 1
    gpu = timeline[timeline["kind"].isin(("kernel", "memcpy", "memset"))]
    comm = is_communication(gpu["name"]) & (gpu["kind"] == "kernel").to_numpy()
    waits, delays, lasts, collectives = _collective_waits(gpu[comm], windows)
    wall = float(sum(e - s for s, e in windows))
    rows = _rows_by_rank(rank_of(gpu))
    wait_rows = _rows_by_rank(waits["rank"].to_numpy("int64"))
    none = np.zeros(0, dtype="int64")
    starts, ends = gpu["start_ns"].to_numpy("float64"), gpu["end_ns"].to_numpy("float64")
    steps = []
    for rank in ranks:
        mine = rows.get(rank.rank, none)
        computing, talking = mine[~comm[mine]], mine[comm[mine]]
        work = _clipped_intervals(starts[computing], ends[computing], windows)
        talk = _clipped_intervals(starts[talking], ends[talking], windows)
        wait = _clipped(waits.take(wait_rows.get(rank.rank, none)), windows)
        compute = union_ns(*work)
        busy = _union(work, talk)
        steps.append(
            RankStep(
                rank,
                wall / iterations,
                compute / iterations,
                union_ns(*talk) / iterations,
                (busy - compute) / iterations,
                (_union(work, wait) - compute) / iterations,
                (wall - busy) / iterations,
                delays.get(rank.rank, 0.0) / iterations,
            )
        )
    worst = max(steps, key=lambda s: s.delay_caused_ns)
    caused = sum(s.delay_caused_ns for s in steps)
    lateness = (
        _lateness(session, windows, iterations, worst, steps, lasts, collectives, caused)
        if worst.delay_caused_ns > 0
        else None
    )
    consistent = lateness is not None and lateness.share >= CONSISTENT_SHARE
    late_rank = worst.rank.rank if consistent else None
    steps = [
        s if s.rank.rank != late_rank else _marked(s)
        for s in sorted(steps, key=lambda s: s.rank.rank)
    ]
    return RankAnalysis(tuple(steps), iterations, collectives, late_rank, lateness)


def _lateness(
    session: Session,
    windows: tuple[Window, ...],
    iterations: int,
    late: RankStep,
    steps: list[RankStep],
    lasts: dict[int, int],
    collectives: int,
    caused: float,
) -> Lateness:
    others = [s for s in steps if s is not late]
    sample = others[:: max(len(others) // SAMPLED_OTHERS, 1)][:SAMPLED_OTHERS]
    stalls = host_stalls(
        session.api_calls, windows, [late.rank.rank, *(s.rank.rank for s in sample)]
    )
    stall, longest = stalls.get(late.rank.rank, (0.0, 0.0))
    others_stall = float(np.median([stalls.get(s.rank.rank, (0.0, 0.0))[0] for s in sample]))
    delay = late.delay_caused_ns
    return Lateness(
        rank=late.rank.rank,
        delay_ns=delay,
        last_at=lasts.get(late.rank.rank, 0),
        collectives=collectives,
        share=late.delay_caused_ns / caused if caused > 0 else 0.0,
        stall_ns=(stall - others_stall) / iterations,
        largest_stall_ns=longest,
        others_stall_ns=others_stall / iterations,
        extra_compute_ns=late.compute_ns - float(np.median([s.compute_ns for s in others])),
        extra_idle_ns=late.idle_ns - float(np.median([s.idle_ns for s in others])),
        ranges=longer_ranges(
            session.nvtx_ranges, windows, late.rank.rank, iterations, 0.25 * delay, late.wall_ns
        ),
    )


def _marked(step: RankStep) -> RankStep:
    return RankStep(
        step.rank,
        step.wall_ns,
        step.compute_ns,
        step.communication_ns,
        step.exposed_ns,
        step.wait_ns,
        step.idle_ns,
        step.delay_caused_ns,
        late=True,
    )


def _rows_by_rank(ranks: npt.NDArray[np.int64]) -> dict[int, npt.NDArray[np.int64]]:
    if not len(ranks):  # no rows (no collective kernels): np.split would still give one part
        return {}
    order = np.argsort(ranks, kind="stable")
    values, first = np.unique(ranks[order], return_index=True)
    parts = np.split(order, first[1:])
    return {int(v): p.astype("int64") for v, p in zip(values, parts, strict=True)}


def _union(a: tuple[FloatArray, FloatArray], b: tuple[FloatArray, FloatArray]) -> float:
    return union_ns(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def _whole(timeline: pd.DataFrame) -> tuple[Window, ...]:
    return ((int(timeline["start_ns"].min()), int(timeline["end_ns"].max())),)


def _clipped(acts: pd.DataFrame, windows: tuple[Window, ...]) -> tuple[FloatArray, FloatArray]:
    """The activities' intervals cut to the windows (parts outside dropped)."""
    return _clipped_intervals(
        acts["start_ns"].to_numpy("float64"), acts["end_ns"].to_numpy("float64"), windows
    )


def _clipped_intervals(
    starts: FloatArray, ends: FloatArray, windows: tuple[Window, ...]
) -> tuple[FloatArray, FloatArray]:
    lo_parts, hi_parts = [], []
    for w_start, w_end in windows:
        lo, hi = np.maximum(starts, w_start), np.minimum(ends, w_end)
        keep = hi > lo
        lo_parts.append(lo[keep])
        hi_parts.append(hi[keep])
    if not lo_parts:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(lo_parts), np.concatenate(hi_parts)


def _collective_waits(
    comm: pd.DataFrame, windows: tuple[Window, ...]
) -> tuple[pd.DataFrame, dict[int, float], dict[int, int], int]:
    """The waits inside collectives (rank, start_ns, end_ns: from a rank's kernel start to the
    latest rank's, within its kernel), the delay each rank caused as the last to arrive and at
    how many collectives it did, and how many collectives start in the windows. The k-th launch
    of a kernel name on each rank is one collective."""
    none = pd.DataFrame({"rank": [], "start_ns": [], "end_ns": []})
    if not len(comm):
        return none, {}, {}, 0
    starts, ends, ranks = _by_collective(
        rank_of(comm),
        comm["name"].astype(str).to_numpy(),
        comm["start_ns"].to_numpy("float64"),
        comm["end_ns"].to_numpy("float64"),
    )
    shared = (~np.isnan(starts)).sum(axis=1) >= 2
    first = np.nanmin(starts, axis=1)  # every collective has a rank's launch
    inside = np.zeros(len(starts), dtype=bool)
    for w_start, w_end in windows:
        inside |= (first >= w_start) & (first < w_end)
    starts, ends = starts[shared], ends[shared]
    if not len(starts):
        return none, {}, {}, 0
    ready = np.nanmax(starts, axis=1)
    wait_end = np.minimum(ends, ready[:, None])
    rows = np.nonzero(np.nan_to_num(wait_end - starts, nan=0.0) > 0)
    waits = pd.DataFrame(
        {
            "rank": ranks[rows[1]].astype("int64"),
            "start_ns": starts[rows],
            "end_ns": wait_end[rows],
        }
    )
    delay, last_at = _delays(starts[inside[shared]])
    caused = dict(zip(ranks.tolist(), delay.tolist(), strict=True))
    lasts = dict(zip(ranks.tolist(), last_at.tolist(), strict=True))
    return waits, caused, lasts, int(inside[shared].sum())


def _by_collective(
    ranks: npt.NDArray[np.int64],
    names: npt.NDArray[np.object_],
    starts: npt.NDArray[np.float64],
    ends: npt.NDArray[np.float64],
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
    """The communication kernels' starts and ends, one row per collective (by name, then k:
    the k-th launch of a name on each rank, in order of start) and one column per rank (in
    order; NaN where a rank did not launch it), and the ranks."""
    name, distinct = factorize_text(names)
    order = np.lexsort((starts, ranks))  # by rank, then start; stable
    order = order[name[order] >= 0]  # a launch without a name is no collective
    ranks, name, starts, ends = ranks[order], name[order], starts[order], ends[order]
    column_of, column = np.unique(ranks, return_inverse=True)
    k = _occurrence(column.astype("int64") * max(len(distinct), 1) + name)
    # names in sorted order (as a groupby sorts them), then k
    place = np.empty(len(distinct), dtype="int64")
    place[np.argsort(np.array(distinct, dtype=object), kind="stable")] = np.arange(len(distinct))
    _, row = np.unique(place[name] * (int(k.max()) + 1) + k, return_inverse=True)
    shape = (int(row.max()) + 1, len(column_of))
    by_start, by_end = np.full(shape, np.nan), np.full(shape, np.nan)
    by_start[row, column], by_end[row, column] = starts, ends
    return by_start, by_end, column_of.astype("int64")


def _occurrence(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per element: how many earlier elements have its key (groupby(...).cumcount())."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    n = len(keys)
    first = np.ones(n, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    since = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0))
    out = np.empty(n, dtype="int64")
    out[order] = since
    return out


def _delays(values: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Per rank (the columns), summed over collectives (the rows): how long after every other
    rank it arrived (0 where it was not the last), and at how many collectives it arrived
    last."""
    filled = np.where(np.isnan(values), -np.inf, values)
    last = np.argmax(filled, axis=1)
    ordered = np.sort(filled, axis=1)
    gap = ordered[:, -1] - ordered[:, -2]
    gap = np.where(np.isfinite(gap), gap, 0.0)
    caused = np.bincount(last, weights=gap, minlength=values.shape[1])
    count = np.bincount(last[gap > 0], minlength=values.shape[1])
    return caused.astype("float64"), count.astype("int64")


DETAILED_RANKS = 4  # ranks the per-rank program analyses (fusion, idle gaps, ...) look at


def detailed_ranks(analysis: RankAnalysis | None) -> set[int] | None:
    """The ranks whose own timelines the program analyses read (None: all of them). Ranks run
    the same program, so with many of them a few stand for all: the first, the late one, the
    one that waits longest and the one idle longest. The rank table covers every rank."""
    if analysis is None or len(analysis.steps) <= DETAILED_RANKS:
        return None
    steps = analysis.steps
    chosen = [steps[0].rank.rank]
    if analysis.late_rank is not None:
        chosen.append(analysis.late_rank)
    chosen.append(max(steps, key=lambda s: s.wait_ns).rank.rank)
    chosen.append(max(steps, key=lambda s: s.idle_ns).rank.rank)
    return set(chosen)


def only_ranks(session: Session, keep: set[int] | None) -> Session:
    """The session's rows of these ranks (the whole session for None)."""
    if keep is None:
        return session
    from dataclasses import replace

    def mine(frame: pd.DataFrame) -> pd.DataFrame:
        if "rank" not in frame or not len(frame):
            return frame
        return frame[np.isin(rank_of(frame), sorted(keep))].reset_index(drop=True)

    meta = replace(session.meta, ranks=tuple(r for r in session.meta.ranks or () if r.rank in keep))
    return replace(
        session,
        timeline=mine(session.timeline),
        api_calls=mine(session.api_calls),
        nvtx_ranges=mine(session.nvtx_ranges),
        meta=meta,
    )
