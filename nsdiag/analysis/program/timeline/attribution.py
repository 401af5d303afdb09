"""Which blocking syncs drained the GPU, and what each cost.

How time is attributed, so that impacts never add up to more than the time that exists:
each device's span (first GPU activity start to last end) is split into busy time (the union of
its activities) and idle gaps between busy segments. Busy copy time can be claimed by
pageable-memcpy (copy time beyond the pinned bandwidth) and then no-copy-compute-overlap (what
remains after that, beyond the slowest pipeline stage). Each idle nanosecond is claimed at most
once, by the host-wait analyses (waits.py: the syncs' share first, then launching, CPU work and
what fits neither); time inside communication kernels goes to the rank analyses. Each analysis's
record states what it claims before which others (`claims_before`: PAGEABLE_MEMCPY, SYNC_BOUND,
RANK_IMBALANCE and EXPOSED_COMMUNICATION).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsdiag.analysis.program.timeline.nvtx import UNNAMED
from nsdiag.model.ranks import rank_of

_SYNC_COLUMNS = [
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


def sync_claims(
    api: pd.DataFrame, gaps: pd.DataFrame, acts: pd.DataFrame, lanes_are_ranks: bool = False
) -> pd.DataFrame:
    """Blocking syncs, each matched to the idle gap (per device) its return falls in (per rank,
    when the lanes are ranks: a rank's syncs drain only its own GPU).

    A sync that returns inside an idle gap drained the GPU; after it the GPU waits for the host
    to submit again. Its claim is the time the host spent blocked plus the launch latency of the
    next work (API call to GPU start), which a host that had queued ahead would have hidden;
    capped at the gap.
    """
    columns = _SYNC_COLUMNS
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
    ranks = rank_of(syncs) if lanes_are_ranks else None
    out = []
    for device, dev_gaps in gaps.groupby("device", sort=False):
        mine = base if ranks is None else base[ranks == device]
        starts, ends = dev_gaps["start_ns"].to_numpy(), dev_gaps["end_ns"].to_numpy()
        pos = np.searchsorted(starts, mine["end_ns"].to_numpy(), side="right") - 1
        inside = (pos >= 0) & (mine["end_ns"].to_numpy() < ends[np.clip(pos, 0, None)])
        hit = mine[inside].copy()
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
    devices = acts["device"].to_numpy()
    act_starts, act_ends = acts["start_ns"].to_numpy(), acts["end_ns"].to_numpy()
    for device, idx in syncs.groupby("device", sort=False).indices.items():
        mine = devices == device
        # by end; integer durations, so the sums are exact in any order of equal ends
        by_end = np.argsort(act_ends[mine], kind="stable")
        dev_ends = act_ends[mine][by_end]
        cumulative = np.concatenate([[0], np.cumsum(dev_ends - act_starts[mine][by_end])])
        order = np.argsort(syncs["end_ns"].to_numpy()[idx], kind="stable")
        ends = syncs["end_ns"].to_numpy()[idx][order]
        done = cumulative[np.searchsorted(dev_ends, ends, side="right")]
        work[idx[order]] = np.diff(np.concatenate([[0], done]))
    return work
