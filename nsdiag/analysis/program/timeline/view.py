"""The timeline prepared once per diagnosis: activities, busy segments and idle gaps per device.

Each device's span (first GPU activity start to last end) is split into busy segments (the union
of its activities) and the idle gaps between them; each gap carries what the attribution of
syncs (attribution.py) claims of it.

Communication kernels (NCCL) are not work here: a GPU waiting inside one for a peer is not busy
computing. They are left out of the activities, and each gap records how much of it they cover
(`comm_ns`), time the rank analyses (analysis/program/ranks.py) account for. With several ranks,
each rank is a lane of its own (the `device` column holds the rank; `lane_devices` maps it back), so
ranks that share a device id on different hosts stay apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.timeline.attribution import sync_claims
from nsdiag.analysis.program.user_range import activity_ranges
from nsdiag.model.intervals import disjoint
from nsdiag.model.ranks import is_communication, rank_of, session_ranks
from nsdiag.model.session import Session

HOST_TO_DEVICE = frozenset({"HtoD", "HtoA", "UVM_HtoD"})
DEVICE_TO_HOST = frozenset({"DtoH", "AtoH", "UVM_DtoH"})


@dataclass(frozen=True)
class TimelineView:
    """The columns of the timeline the analyses use, and what is derived from them."""

    # Sorted by (device, start): start_ns, end_ns, device, stream, process_id, thread_id,
    # api_start_ns, api_end_ns, kind, range ("" outside NVTX), range_code (its integer twin),
    # copy_kind, src_kind, dst_kind, bytes, stage ('h2d', 'd2h', 'kernel', ''), segment.
    acts: pd.DataFrame
    # One row per busy segment: device, start_ns, end_ns, n, n_kernels, range and first_row
    # (of its first activity).
    segments: pd.DataFrame
    # device, start_ns, end_ns, length, seg (index of the segment before), next_range,
    # next_latency_ns, process_id and thread_id (of the next work's launch), sync_count,
    # sync_claim_ns (GPU idle time attributed to syncs that return in this gap).
    gaps: pd.DataFrame
    # Blocking sync calls with device, gap index, claim_ns, work_ns (GPU work since last sync).
    syncs: pd.DataFrame
    spans: dict[int, tuple[int, int]]  # device -> (first start, last end)
    total_span_ns: float  # sum of device spans
    lane_devices: dict[int, int] | None = None  # rank -> device, when lanes are ranks

    def device_of(self, lane: int) -> int:
        return self.lane_devices.get(lane, lane) if self.lane_devices else lane

    def rank_of(self, lane: int) -> int | None:
        return lane if self.lane_devices else None


def prepare(session: Session, windows: Sequence[tuple[int, int]] | None = None) -> TimelineView:
    """Prepare the session's timeline for the program analyses (once per diagnosis). With
    `windows` (the analysed region's), idle time outside them is left out of the gaps."""
    timeline = session.timeline
    lanes = {r.rank: r.device for r in session_ranks(session.meta)} or None
    if lanes and "rank" in timeline:
        timeline = timeline.assign(device=rank_of(timeline))
    talk = _communication(timeline)
    # read, not written: the timeline itself where it holds no communication (a copy otherwise)
    acts = _activities(timeline[~talk] if talk.any() else timeline, session.nvtx_ranges)
    segments = _segments(acts)
    spans = {
        int(cast(int, d)): (int(g["start_ns"].to_numpy().min()), int(g["end_ns"].to_numpy().max()))
        for d, g in segments.groupby("device")
    }
    gaps = _gaps(segments, acts)
    if windows is not None:
        gaps = _inside(gaps, windows)
    gaps["comm_ns"] = _covered(timeline[talk], gaps)
    syncs = sync_claims(session.api_calls, gaps, acts, lanes_are_ranks=lanes is not None)
    claims = (
        syncs.groupby("gap")["claim_ns"].agg(["sum", "size"])
        if len(syncs)
        else pd.DataFrame(columns=["sum", "size"])
    )
    gaps["sync_count"] = claims["size"].reindex(gaps.index).fillna(0).astype("int64")
    gaps["sync_claim_ns"] = np.minimum(
        claims["sum"].reindex(gaps.index).fillna(0.0), gaps["length"] - gaps["comm_ns"]
    )
    total = float(sum(end - start for start, end in spans.values()))
    return TimelineView(acts, segments, gaps, syncs, spans, total, lanes)


def _communication(timeline: pd.DataFrame) -> npt.NDArray[np.bool_]:
    if not len(timeline) or "name" not in timeline:
        return np.zeros(len(timeline), dtype=bool)
    kernel = (timeline["kind"] == "kernel").to_numpy() if "kind" in timeline else True
    return is_communication(timeline["name"]) & kernel


def _covered(comm: pd.DataFrame, gaps: pd.DataFrame) -> npt.NDArray[np.float64]:
    """How much of each gap communication kernels on its lane cover."""
    out = np.zeros(len(gaps))
    if not len(comm) or not len(gaps):
        return out
    lanes = pd.to_numeric(comm["device"], errors="coerce").fillna(0).to_numpy("int64")
    gap_lanes = gaps["device"].to_numpy()
    for lane in np.unique(gap_lanes):
        mine = lanes == lane
        if not mine.any():
            continue
        starts, ends = disjoint(
            comm["start_ns"].to_numpy("int64")[mine], comm["end_ns"].to_numpy("int64")[mine]
        )
        rows = np.flatnonzero(gap_lanes == lane)
        out[rows] = _covered_before(starts, ends, gaps["end_ns"].to_numpy("int64")[rows]) - (
            _covered_before(starts, ends, gaps["start_ns"].to_numpy("int64")[rows])
        )
    return np.clip(out, 0, None)


def _covered_before(
    starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], t: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Time covered by sorted disjoint intervals before each t: the intervals that ended, plus
    the part of the one open at t."""
    done = np.concatenate([[0], np.cumsum(ends - starts)])
    i = np.searchsorted(starts, t, side="right")
    prev = np.clip(i - 1, 0, None)
    partial = np.where(i > 0, np.clip(t - starts[prev], 0, ends[prev] - starts[prev]), 0)
    return (done[prev] * (i > 0) + partial).astype("float64")


_KEEP = {
    "start_ns": -1,
    "end_ns": -1,
    "device": 0,
    "stream": -1,
    "process_id": 0,
    "thread_id": -1,
    "api_start_ns": -1,
    "api_end_ns": -1,
}


def _activities(timeline: pd.DataFrame, nvtx: pd.DataFrame | None = None) -> pd.DataFrame:
    """The columns the analyses use, as numpy-backed columns sorted by (device, start), with a
    `stage` ('h2d', 'd2h', 'kernel' or '') and a `segment` id. Copying only these columns keeps a
    million-row timeline cheap."""
    cols = {
        c: (
            pd.to_numeric(timeline[c], errors="coerce").fillna(d).to_numpy(dtype="int64")
            if c in timeline
            else np.full(len(timeline), d, dtype="int64")
        )
        for c, d in _KEEP.items()
    }
    cols["end_ns"] = np.maximum(cols["end_ns"], cols["start_ns"])
    order = np.lexsort((cols["end_ns"], cols["start_ns"], cols["device"]))
    columns: dict[str, np.ndarray | pd.Series] = {c: v[order] for c, v in cols.items()}
    # one frame built once from fresh arrays (no concat, no copies); string columns stay
    # object columns (pandas would make them `str`)
    columns.update(
        (k, pd.Series(v, dtype=object, copy=False) if v.dtype == object else v)
        for k, v in _labels(timeline, order, nvtx).items()
    )
    acts = pd.DataFrame(columns, copy=False)
    acts["segment"] = _segment_ids(acts)
    return acts


def _labels(
    timeline: pd.DataFrame, order: npt.NDArray[np.intp], nvtx: pd.DataFrame | None = None
) -> dict[str, np.ndarray]:
    """Kind, NVTX range, copy kinds, bytes and pipeline stage of each activity, in `order`.
    String columns stay numpy object arrays (no per-row string dtype conversion); `range_code`
    is an integer twin of `range` for fast grouping. The range is the program's own around
    the launch (user_range.py), never a library's."""
    kind = _objects(timeline, "kind", "")[order]
    rng = activity_ranges(timeline, nvtx)[order]
    codes, _ = pd.factorize(rng)
    extra: dict[str, np.ndarray] = {"kind": kind, "range": rng, "range_code": codes.astype("int64")}
    for column in ("copy_kind", "src_kind", "dst_kind"):
        extra[column] = _objects(timeline, column, "")[order]
    extra["bytes"] = (
        pd.to_numeric(timeline["bytes"], errors="coerce").to_numpy(dtype="float64")[order]
        if "bytes" in timeline
        else np.full(len(order), np.nan)
    )
    stage = np.full(len(kind), "", dtype=object)
    stage[kind == "kernel"] = "kernel"
    copies = np.flatnonzero(kind == "memcpy")
    copy_kind = pd.Series(extra["copy_kind"][copies], dtype=object)
    stage[copies[copy_kind.isin(HOST_TO_DEVICE).to_numpy()]] = "h2d"
    stage[copies[copy_kind.isin(DEVICE_TO_HOST).to_numpy()]] = "d2h"
    extra["stage"] = stage
    return extra


def _objects(frame: pd.DataFrame, column: str, default: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), default, dtype=object)
    return frame[column].to_numpy(dtype=object)


def _segment_ids(acts: pd.DataFrame) -> np.ndarray:
    """Busy segments: maximal runs of overlapping or touching activities on one device."""
    reach = acts.groupby("device", sort=False)["end_ns"].cummax().to_numpy()
    device = acts["device"].to_numpy()
    new = np.ones(len(acts), dtype=bool)
    new[1:] = (device[1:] != device[:-1]) | (acts["start_ns"].to_numpy()[1:] > reach[:-1])
    return np.cumsum(new) - 1


def _segments(acts: pd.DataFrame) -> pd.DataFrame:
    """One row per busy segment. Segments are contiguous row blocks (acts are sorted), so numpy
    reductions over block starts replace a groupby."""
    if not len(acts):
        return pd.DataFrame(
            columns=["device", "start_ns", "end_ns", "n", "n_kernels", "range", "first_row"]
        )
    first = np.flatnonzero(np.diff(acts["segment"].to_numpy(), prepend=-1))
    n = np.diff(np.append(first, len(acts)))
    return pd.DataFrame(
        {
            "device": acts["device"].to_numpy()[first],
            "start_ns": acts["start_ns"].to_numpy()[first],
            "end_ns": np.maximum.reduceat(acts["end_ns"].to_numpy(), first),
            "n": n,
            "n_kernels": np.add.reduceat(
                (acts["stage"].to_numpy() == "kernel").astype("int64"), first
            ),
            "range": acts["range"].to_numpy()[first],
            "first_row": first,
        },
        copy=False,  # fresh arrays
    )


def _inside(gaps: pd.DataFrame, windows: Sequence[tuple[int, int]]) -> pd.DataFrame:
    """Each gap's part inside the windows (its first start to last end there, and the length
    inside); gaps wholly outside go."""
    if not len(gaps):
        return gaps
    starts, ends = gaps["start_ns"].to_numpy("int64"), gaps["end_ns"].to_numpy("int64")
    length = np.zeros(len(gaps))
    first = np.full(len(gaps), np.iinfo("int64").max)
    last = np.zeros(len(gaps), dtype="int64")
    for w_start, w_end in windows:
        lo, hi = np.maximum(starts, w_start), np.minimum(ends, w_end)
        part = np.clip(hi - lo, 0, None)
        length += part
        first = np.where(part > 0, np.minimum(first, lo), first)
        last = np.where(part > 0, np.maximum(last, hi), last)
    keep = length > 0
    # the frame is prepare's own: filtered (a new frame) only where a gap goes, never copied
    clipped = gaps if keep.all() else gaps[keep]
    clipped["start_ns"], clipped["end_ns"] = first[keep], last[keep]
    clipped["length"] = length[keep]
    return clipped


def _gaps(segments: pd.DataFrame, acts: pd.DataFrame) -> pd.DataFrame:
    """The idle gaps between consecutive busy segments of a device, and what ends each: the
    next work's NVTX range, its launch latency and the process and thread that launched it."""
    same = segments["device"].to_numpy()[1:] == segments["device"].to_numpy()[:-1]
    before = np.flatnonzero(same)
    gaps = pd.DataFrame(
        {
            "device": segments["device"].to_numpy()[before],
            "start_ns": segments["end_ns"].to_numpy()[before],
            "end_ns": segments["start_ns"].to_numpy()[before + 1],
            "seg": before,
        },
        copy=False,  # fresh arrays
    )
    gaps["length"] = (gaps["end_ns"] - gaps["start_ns"]).astype("float64")
    # the first activity after each gap: only the columns read (not a copy of every column)
    nxt = segments["first_row"].to_numpy()[before + 1].astype("intp")

    def after(column: str) -> npt.NDArray[np.int64]:
        return np.asarray(acts[column].to_numpy("int64")[nxt])

    gaps["next_range"] = acts["range"].to_numpy(dtype=object)[nxt]
    api_start = after("api_start_ns")
    latency = after("start_ns") - api_start
    gaps["next_latency_ns"] = np.where(api_start > 0, np.clip(latency, 0, None), 0).astype(
        "float64"
    )
    gaps["process_id"] = after("process_id")
    gaps["thread_id"] = after("thread_id")
    return gaps
