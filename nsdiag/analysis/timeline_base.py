"""Shared timeline model for the program analyses in timeline.py.

How time is attributed, so that impacts never add up to more than the time that exists:
each device's span (first GPU activity start to last end) is split into busy time (the union of
its activities) and idle gaps between busy segments. Busy copy time can be claimed by
pageable-memcpy (copy time beyond the pinned bandwidth) and then no-copy-compute-overlap (what
remains after that, beyond the slowest pipeline stage). Each idle gap is claimed at most once:
by sync-heavy (syncs that return inside it), by launch-overhead (short gaps between tiny kernels,
never gaps holding a sync return) or by gpu-idle-gaps (long gaps, minus any sync claim). The
impact denominator is the sum of the device spans (the device time that exists).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.analysis.diagnosis import Evidence, Finding
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.model.intervals import enclosing
from nsdiag.model.session import Session

HOST_TO_DEVICE = frozenset({"HtoD", "HtoA", "UVM_HtoD"})
DEVICE_TO_HOST = frozenset({"DtoH", "AtoH", "UVM_DtoH"})
UNNAMED = ""  # activities outside any NVTX range


@dataclass(frozen=True)
class TimelineView:
    """The timeline prepared once per session: activities, busy segments and idle gaps per device."""

    acts: (
        pd.DataFrame
    )  # sorted by (device, start): the timeline columns used, range ("" outside NVTX),
    # range_code, stage ('h2d', 'd2h', 'kernel', ''), segment
    segments: (
        pd.DataFrame
    )  # device, start_ns, end_ns, n, n_kernels, range and first_row (of its first activity)
    gaps: (
        pd.DataFrame
    )  # device, start_ns, end_ns, length, seg (index of the segment before), next_range,
    # next_latency_ns, process_id and thread_id (of the next work's launch), sync_count,
    # sync_claim_ns (GPU idle time attributed to syncs that return in this gap)
    syncs: (
        pd.DataFrame
    )  # blocking sync calls with device, gap index, claim_ns, work_ns (GPU work since last sync)
    spans: dict[int, tuple[int, int]]
    total_span_ns: float  # sum of device spans: the impact denominator


_CACHE: dict[int, tuple[weakref.ref, TimelineView]] = {}


def view(session: Session) -> TimelineView:
    """The prepared timeline, computed once per session (the five analyses share it). Keyed on the
    timeline DataFrame's identity: replace session.timeline rather than editing it in place."""
    key = id(session.timeline)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is session.timeline:
        return hit[1]
    result = _prepare(session)
    if len(_CACHE) > 8:
        _CACHE.clear()
    _CACHE[key] = (weakref.ref(session.timeline), result)
    return result


def _prepare(session: Session) -> TimelineView:
    acts = _activities(session.timeline)
    segments = _segments(acts)
    spans = {
        int(d): (int(g["start_ns"].min()), int(g["end_ns"].max()))
        for d, g in segments.groupby("device")
    }
    gaps = _gaps(segments, acts)
    syncs = _sync_claims(session.api_calls, gaps, acts)
    claims = (
        syncs.groupby("gap")["claim_ns"].agg(["sum", "size"])
        if len(syncs)
        else pd.DataFrame(columns=["sum", "size"])
    )
    gaps["sync_count"] = claims["size"].reindex(gaps.index).fillna(0).astype("int64")
    gaps["sync_claim_ns"] = np.minimum(
        claims["sum"].reindex(gaps.index).fillna(0.0), gaps["length"]
    )
    total = float(sum(end - start for start, end in spans.values()))
    return TimelineView(acts, segments, gaps, syncs, spans, total)


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


def _activities(timeline: pd.DataFrame) -> pd.DataFrame:
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
    acts = pd.DataFrame({c: v[order] for c, v in cols.items()})
    # String columns stay numpy object arrays (no per-row string dtype conversion); `range_code`
    # is an integer twin of `range` for fast grouping.
    kind = _objects(timeline, "kind", "")[order]
    rng = _objects(timeline, "nvtx_range", UNNAMED)[order]
    rng = np.where(pd.isna(rng), UNNAMED, rng)
    codes, names = pd.factorize(rng)
    extra = {"kind": kind, "range": rng, "range_code": codes.astype("int64")}
    for column in ("copy_kind", "src_kind", "dst_kind"):
        extra[column] = _objects(timeline, column, "")[order]
    extra["bytes"] = (
        pd.to_numeric(timeline["bytes"], errors="coerce").to_numpy(dtype="float64")[order]
        if "bytes" in timeline
        else np.full(len(acts), np.nan)
    )
    is_copy = kind == "memcpy"
    stage = np.where(kind == "kernel", "kernel", "").astype(object)
    stage[is_copy & pd.Series(extra["copy_kind"]).isin(HOST_TO_DEVICE).to_numpy()] = "h2d"
    stage[is_copy & pd.Series(extra["copy_kind"]).isin(DEVICE_TO_HOST).to_numpy()] = "d2h"
    extra["stage"] = stage
    acts = pd.concat(
        [
            acts,
            pd.DataFrame(
                {
                    k: pd.Series(v, dtype=v.dtype if v.dtype != object else object)
                    for k, v in extra.items()
                }
            ),
        ],
        axis=1,
    )
    acts["segment"] = _segment_ids(acts)
    return acts


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
        }
    )


def group_union(
    codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, n_groups: int
) -> np.ndarray:
    """Length of the union of intervals per group code (0..n_groups-1), vectorised."""
    if len(codes) == 0:
        return np.zeros(n_groups)
    order = np.lexsort((starts, codes))
    g, s, e = codes[order], starts[order], ends[order]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[0] = s[0]
    prev[1:] = np.where(g[1:] == g[:-1], reach[:-1], s[1:])
    contribution = np.clip(e - np.maximum(s, prev), 0, None).astype("float64")
    return np.bincount(g, weights=contribution, minlength=n_groups)


def _gaps(segments: pd.DataFrame, acts: pd.DataFrame) -> pd.DataFrame:
    same = segments["device"].to_numpy()[1:] == segments["device"].to_numpy()[:-1]
    before = np.flatnonzero(same)
    gaps = pd.DataFrame(
        {
            "device": segments["device"].to_numpy()[before],
            "start_ns": segments["end_ns"].to_numpy()[before],
            "end_ns": segments["start_ns"].to_numpy()[before + 1],
            "seg": before,
        }
    )
    gaps["length"] = (gaps["end_ns"] - gaps["start_ns"]).astype("float64")
    nxt = acts.loc[segments["first_row"].to_numpy()[before + 1]]
    gaps["next_range"] = nxt["range"].to_numpy(dtype=object)
    latency = (nxt["start_ns"] - nxt["api_start_ns"]).to_numpy()
    gaps["next_latency_ns"] = np.where(
        nxt["api_start_ns"].to_numpy() > 0, np.clip(latency, 0, None), 0
    ).astype("float64")
    gaps["process_id"] = nxt["process_id"].to_numpy()
    gaps["thread_id"] = nxt["thread_id"].to_numpy()
    return gaps


def _sync_claims(api: pd.DataFrame, gaps: pd.DataFrame, acts: pd.DataFrame) -> pd.DataFrame:
    """Blocking syncs, each matched to the idle gap (per device) its return falls in.

    A sync that returns inside an idle gap drained the GPU; after it the GPU waits for the host
    to submit again. Its claim is the time the host spent blocked plus the launch latency of the
    next work (API call to GPU start), which a host that had queued ahead would have hidden;
    capped at the gap.
    """
    columns = [
        "name",
        "start_ns",
        "end_ns",
        "duration_ns",
        "range",
        "device",
        "gap",
        "claim_ns",
        "work_ns",
    ]
    if not len(api) or "is_sync" not in api or not len(gaps):
        return pd.DataFrame(columns=columns)
    syncs = api[api["is_sync"].astype(bool)]
    if not len(syncs):
        return pd.DataFrame(columns=columns)
    rng = syncs["nvtx_range"] if "nvtx_range" in syncs else pd.Series(UNNAMED, index=syncs.index)
    base = pd.DataFrame(
        {
            "name": syncs["name"].to_numpy(),
            "start_ns": syncs["start_ns"].to_numpy(dtype="int64"),
            "end_ns": syncs["end_ns"].to_numpy(dtype="int64"),
            "range": rng.astype("object").where(rng.notna(), UNNAMED).to_numpy(),
        }
    )
    base["duration_ns"] = (base["end_ns"] - base["start_ns"]).astype("float64")
    out = []
    for device, dev_gaps in gaps.groupby("device", sort=False):
        starts, ends = dev_gaps["start_ns"].to_numpy(), dev_gaps["end_ns"].to_numpy()
        pos = np.searchsorted(starts, base["end_ns"].to_numpy(), side="right") - 1
        inside = (pos >= 0) & (base["end_ns"].to_numpy() < ends[np.clip(pos, 0, None)])
        hit = base[inside].copy()
        rows = dev_gaps.iloc[pos[inside]]
        hit["device"] = device
        hit["gap"] = rows.index.to_numpy()
        hit["claim_ns"] = np.minimum(
            hit["duration_ns"].to_numpy() + rows["next_latency_ns"].to_numpy(),
            rows["length"].to_numpy(),
        )
        out.append(hit)
    result = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)
    result["work_ns"] = _work_between(result, acts)
    return result[columns]


def _work_between(syncs: pd.DataFrame, acts: pd.DataFrame) -> np.ndarray:
    """GPU busy time (sum of activity durations) that ended between each draining sync and the
    previous one on the same device: how much work each sync waited for."""
    work = np.zeros(len(syncs))
    for device, idx in syncs.groupby("device", sort=False).indices.items():
        dev = acts[acts["device"] == device].sort_values("end_ns")
        cumulative = np.concatenate([[0], np.cumsum((dev["end_ns"] - dev["start_ns"]).to_numpy())])
        order = np.argsort(syncs["end_ns"].to_numpy()[idx], kind="stable")
        ends = syncs["end_ns"].to_numpy()[idx][order]
        done = cumulative[np.searchsorted(dev["end_ns"].to_numpy(), ends, side="right")]
        work[idx[order]] = np.diff(np.concatenate([[0], done]))
    return work


def gap_parts(nvtx: pd.DataFrame, gaps: pd.DataFrame, samples: int = 16) -> pd.DataFrame:
    """Split each gap between the NVTX ranges the host was in during it: the innermost range open
    on the thread that launched the work ending the gap, sampled at `samples` evenly spaced
    times. One row per (gap, range) with the fraction of the gap. Without NVTX data, or when the
    launching thread is unknown, the whole gap goes to the range of the work that ends it."""
    if not len(gaps):
        return pd.DataFrame(columns=["gap", "range", "fraction"])
    index = np.repeat(gaps.index.to_numpy(), samples)
    offsets = np.tile((np.arange(samples) + 0.5) / samples, len(gaps))
    starts, lengths = (
        np.repeat(gaps["start_ns"].to_numpy(), samples),
        np.repeat(gaps["length"].to_numpy(), samples),
    )
    times = (starts + offsets * lengths).astype("int64")
    tids = np.repeat(gaps["thread_id"].to_numpy(), samples)
    found = host_ranges(nvtx, np.repeat(gaps["process_id"].to_numpy(), samples), tids, times)
    fallback = np.repeat(gaps["next_range"].to_numpy(dtype=object), samples)
    known = (tids >= 0) & (len(nvtx) > 0)
    names = np.where(known, np.where(pd.isna(found), UNNAMED, found), fallback)
    parts = (
        pd.DataFrame({"gap": index, "range": names}).groupby(["gap", "range"], sort=False).size()
    )
    return (parts / samples).rename("fraction").reset_index()


def union_ns(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of intervals (any order)."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts)[order], np.asarray(ends)[order]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate([[s[0]], reach[:-1]])
    # Each interval adds what lies beyond everything before it.
    return float(np.sum(np.clip(e - np.maximum(s, prev), 0, None)))


def host_ranges(
    nvtx: pd.DataFrame, pids: np.ndarray, tids: np.ndarray, times: np.ndarray
) -> np.ndarray:
    """Innermost NVTX range open on (pid, tid) at each time; None where there is none."""
    out = np.full(len(times), None, dtype=object)
    if nvtx is None or not len(nvtx) or not len(times):
        return out
    ranges = nvtx.sort_values(["process_id", "thread_id", "start_ns"], kind="stable")
    names = ranges["name"].to_numpy(dtype=object)
    for (pid, tid), rows in ranges.groupby(["process_id", "thread_id"], sort=False).indices.items():
        wanted = np.flatnonzero((pids == pid) & (tids == tid))
        if len(wanted):
            found = enclosing(
                ranges["start_ns"].to_numpy()[rows],
                ranges["end_ns"].to_numpy()[rows],
                times[wanted],
            )
            out[wanted[found >= 0]] = names[rows[found[found >= 0]]]
    return out


def pinned_model(v: TimelineView, params: dict[str, float]) -> pd.DataFrame:
    """Host-device copies with the time each would take from pinned memory.

    The pinned bandwidth is measured on this timeline's pinned copies of at least
    min_copy_bytes in the same direction on the same device (else the other direction); with
    none, pageable copies are assumed assumed_pinned_speedup times slower than pinned ones.
    Copies under min_copy_bytes are latency-bound: they keep their time.
    """
    min_bytes = params.get("min_copy_bytes", 1 << 20)
    speedup = max(params.get("assumed_pinned_speedup", 2.0), 1.0)
    acts = v.acts
    copies = acts[acts["stage"].isin(["h2d", "d2h"])].copy()
    copies["direction"] = copies["stage"]
    host_kind = np.where(
        copies["direction"] == "h2d",
        copies["src_kind"].astype("object"),
        copies["dst_kind"].astype("object"),
    )
    copies["host_kind"] = host_kind
    copies["duration"] = (copies["end_ns"] - copies["start_ns"]).astype("float64")
    big = copies["bytes"].fillna(0) >= min_bytes
    pinned = copies[big & (copies["host_kind"] == "pinned")]
    bw = pinned.groupby(["device", "direction"])[["bytes", "duration"]].sum()
    by_device = pinned.groupby("device")[["bytes", "duration"]].sum()
    copies["pinned_bw"] = _bandwidth(copies, bw, by_device)
    measured = copies["pinned_bw"] > 0
    ideal = np.where(
        measured,
        copies["bytes"].fillna(0) / copies["pinned_bw"].where(measured, 1.0) * 1e9,
        copies["duration"] / speedup,
    )
    pageable = big & (copies["host_kind"] == "pageable")
    copies["pinned_ns"] = np.where(
        pageable, np.minimum(ideal, copies["duration"]), copies["duration"]
    )
    copies["pageable"] = pageable
    return copies


def _bandwidth(copies: pd.DataFrame, bw: pd.DataFrame, by_device: pd.DataFrame) -> np.ndarray:
    """Measured pinned bandwidth (bytes/s) per copy: same device and direction, else same device, else 0."""
    keys = pd.MultiIndex.from_arrays([copies["device"], copies["direction"]])
    pair = (bw["bytes"] / bw["duration"] * 1e9).reindex(keys).to_numpy()
    dev = (by_device["bytes"] / by_device["duration"] * 1e9).reindex(copies["device"]).to_numpy()
    return np.nan_to_num(np.where(np.isnan(pair), dev, pair))


def range_wall_ns(session: Session, v: TimelineView, name: str, device: int) -> float:
    """Wall time of a range: its NVTX instances' total, or the device span for unnamed work."""
    nvtx = session.nvtx_ranges
    if name != UNNAMED and len(nvtx):
        total = float(nvtx.loc[nvtx["name"] == name, "duration_ns"].sum())
        if total > 0:
            return total
    start, end = v.spans.get(device, (0, 0))
    return float(end - start)


def make_finding(
    rule: RuleSpec,
    v: TimelineView,
    session: Session,
    device: int,
    name: str,
    saved_ns: float,
    message: str,
    evidence: tuple[Evidence, ...],
    details: dict[str, Any],
) -> Finding:
    start, end = v.spans.get(device, (0, 0))
    wall = range_wall_ns(session, v, name, device)
    impact = saved_ns / v.total_span_ns if v.total_span_ns else 0.0
    details = {
        "device": int(device),
        "span_ns": v.total_span_ns,
        "device_span_ns": float(end - start),
        "range_wall_ns": wall,
        **details,
    }
    return Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=min(impact, 1.0),
        recoverable=min(saved_ns / wall, 1.0) if wall else 0.0,
        message=message,
        fix=rule.fix,
        impact_basis=rule.impact_basis,
        evidence=evidence,
        range=name or None,
        saved_ns=float(saved_ns),
        details=details,
    )


def label(name: str) -> str:
    return f"NVTX range '{name}'" if name else "work outside NVTX ranges"
