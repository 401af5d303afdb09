"""Ranks of a distributed run and its communication kernels.

A session holds one rank (a single process) or several: the processes of one trace that did GPU
work (torchrun under one nsys), or one report per rank merged (`srun nsys profile -o
rep_%q{SLURM_PROCID}`). Readers record each rank in `meta.ranks` (a `Rank`, model/meta.py) and
tag the timeline, the CUDA calls and the NVTX ranges with a `rank` column; a session without
them is one rank.

Communication kernels (NCCL's and RCCL's collectives and point-to-point transfers) are not
computation: a GPU waiting inside one for a late peer is not busy. Every analysis that judges
compute work (verdicts, roofline, fusion, launch overhead, idle time) leaves them out; the rank
analyses (analysis/program/ranks.py) account for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.model.meta import Rank, SessionMeta
from nsdiag.model.text_codes import factorize_text

# ncclDevKernel_AllReduce_Sum_f32_RING_LL (NCCL >= 2.19), ncclKernel_AllReduce_RING_LL_Sum_float,
# ncclAllReduceRingLLKernel_sum_f32 (older), rccl's the same.
COMMUNICATION_KERNEL = re.compile(r"\bnccl\w*Kernel")
BoolArray = npt.NDArray[np.bool_]


def is_communication(names: pd.Series | Iterable[str]) -> BoolArray:
    """Whether each kernel name is a communication kernel (decided once per distinct name)."""
    values = pd.Series(names, dtype=object) if not isinstance(names, pd.Series) else names
    if not len(values):
        return np.zeros(0, dtype=bool)
    inverse, distinct = factorize_text(values.astype(str))
    flags = np.array([bool(COMMUNICATION_KERNEL.search(n)) for n in distinct] + [False])
    return flags[inverse]


def communication_name(name: str) -> bool:
    return bool(COMMUNICATION_KERNEL.search(name))


def session_ranks(meta: SessionMeta) -> list[Rank]:
    """The ranks a session's meta records, by rank (empty: one process, nothing recorded)."""
    return sorted(meta.ranks or (), key=lambda r: r.rank)


def rank_of(frame: pd.DataFrame) -> npt.NDArray[np.int64]:
    """Each row's rank (0 where the session records none)."""
    if "rank" not in frame:
        return np.zeros(len(frame), dtype="int64")
    return pd.to_numeric(frame["rank"], errors="coerce").fillna(-1).to_numpy(dtype="int64")


def overlaps_communication(timeline: pd.DataFrame) -> BoolArray:
    """Per row: a computation kernel that ran while a communication kernel ran on its GPU (same
    rank and device). Such launches are slower than alone (on the H200 pair, DDP's backward
    GEMMs took 1.85x as long beside NCCL's all-reduce, whose kernel holds SMs), and ncu replays
    them alone: phase 2's duration groups leave them out (model/launches.py)."""
    out = np.zeros(len(timeline), dtype=bool)
    if not len(timeline) or "name" not in timeline:
        return out
    kind = timeline["kind"].astype(str).to_numpy() if "kind" in timeline else None
    kernel = kind == "kernel" if kind is not None else np.ones(len(timeline), dtype=bool)
    comm = is_communication(timeline["name"].astype(str)) & kernel
    if not comm.any():
        return out
    device = (
        pd.to_numeric(timeline["device"], errors="coerce").fillna(-1).to_numpy("int64")
        if "device" in timeline
        else np.zeros(len(timeline), dtype="int64")
    )
    gpu = rank_of(timeline) * (1 << 20) + device
    starts = timeline["start_ns"].to_numpy("float64")
    ends = timeline["end_ns"].to_numpy("float64")
    for key in np.unique(gpu[comm]):
        mine = gpu == key
        c = comm & mine
        order = np.argsort(starts[c], kind="stable")
        c_starts, c_reach = starts[c][order], np.maximum.accumulate(ends[c][order])
        rows = np.flatnonzero(mine & kernel & ~comm)
        before = np.searchsorted(c_starts, ends[rows], side="left") - 1
        hit = before >= 0
        hit[hit] = c_reach[before[hit]] > starts[rows][hit]
        out[rows] = hit
    return out
