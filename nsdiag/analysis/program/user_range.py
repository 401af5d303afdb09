"""The NVTX range an activity counts under: the program's own, never a library's.

The readers record the innermost range open on the launching thread; where that is a library's
(CUB inside an embedding backward, NCCL around a collective, PyTorch's emit_nvtx op ranges,
model/nvtx_owners.py), the activity counts under the program's range around it (a step's
`train_step`, its `backward`), so library ranges never split a step into thousands of ranges
(a transformers Llama under emit_nvtx: 10,683 distinct op ranges in one region).

Work launched from a thread with no program range open counts under the innermost one open on
another thread of its process at its launch: PyTorch's autograd engine runs the backward pass
on a thread of its own while the main thread sits in the user's `backward` range (on the H200
DDP recordings, tests/data/multi_gpu, 3,329 of 5,440 kernels of each rank came from that
thread, outside `train_step` as the launching thread saw it).

Ranges named per instance (`step_0`, `step_1`, ...: region/nvtx.py's base_name) count as the one
range they are instances of, so a finding across iterations names `step`, not the last step.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.region.nvtx import base_name, user_ranges
from nsdiag.model.intervals import enclosing
from nsdiag.model.nvtx_owners import library_of

UNNAMED = ""


def program_ranges(names: npt.ArrayLike) -> npt.NDArray[np.object_]:
    """`names` with library ranges (and missing values) as UNNAMED."""
    # factorised as objects (a Series would first check a million values are strings)
    codes, distinct = pd.factorize(np.asarray(names, dtype=object), use_na_sentinel=True)
    mapped = np.array(
        [UNNAMED if library_of(str(n)) is not None else str(n) for n in distinct] + [UNNAMED],
        dtype=object,
    )
    return mapped[np.where(codes < 0, len(distinct), codes)]


def activity_ranges(acts: pd.DataFrame, nvtx: pd.DataFrame | None) -> npt.NDArray[np.object_]:
    """Per row of `acts` (GPU activities or CUDA calls: process_id, thread_id, and api_start_ns
    or start_ns): the innermost program range open at its launch on its thread, else on another
    thread of its process (module docstring); UNNAMED where none. Without the NVTX table's
    threads, the readers' `nvtx_range` less the library ranges."""
    needed = {"process_id", "thread_id", "start_ns", "end_ns", "name"}
    if nvtx is None or not len(nvtx) or not needed <= set(nvtx.columns):
        return program_ranges(_column(acts, "nvtx_range"))
    if not {"process_id", "thread_id"} <= set(acts.columns):
        return program_ranges(_column(acts, "nvtx_range"))
    mine = user_ranges(nvtx)
    if not len(mine):
        return np.full(len(acts), UNNAMED, dtype=object)
    when = acts["api_start_ns"] if "api_start_ns" in acts else acts["start_ns"]
    times = pd.to_numeric(when, errors="coerce").fillna(acts["start_ns"]).to_numpy("int64")
    pids = pd.to_numeric(acts["process_id"], errors="coerce").fillna(-1).to_numpy("int64")
    tids = pd.to_numeric(acts["thread_id"], errors="coerce").fillna(-1).to_numpy("int64")
    out = np.full(len(acts), UNNAMED, dtype=object)
    on_thread = _innermost(mine, ["process_id", "thread_id"], (pids, tids), times)
    found = on_thread != UNNAMED
    out[found] = on_thread[found]
    elsewhere = ~found  # only these are looked up on the process's other threads
    out[elsewhere] = _innermost(mine, ["process_id"], (pids[elsewhere],), times[elsewhere])
    return _as_instances_of(out, mine["name"].astype(str).unique())


def _as_instances_of(
    names: npt.NDArray[np.object_], distinct: npt.NDArray[np.object_]
) -> npt.NDArray[np.object_]:
    """Each name that is one of several numbered instances of a range, as that range."""
    bases = pd.Series([base_name(n) for n in distinct], index=distinct)
    shared = bases.map(bases.value_counts()) >= 2
    renamed = dict(bases[shared & (bases != bases.index)].items())
    if not renamed:
        return names
    codes, distinct_names = pd.factorize(pd.Series(names, dtype=object))
    mapped = np.array([renamed.get(n, n) for n in distinct_names], dtype=object)
    return mapped[codes] if len(mapped) else names


def _innermost(
    nvtx: pd.DataFrame,
    keys: list[str],
    values: tuple[npt.NDArray[np.int64], ...],
    times: npt.NDArray[np.int64],
) -> npt.NDArray[np.object_]:
    """The latest-starting range of the same `keys` (thread, or process) open at each time."""
    out = np.full(len(times), UNNAMED, dtype=object)
    ranges = nvtx.sort_values([*keys, "start_ns"], kind="stable")
    names = ranges["name"].astype(str).to_numpy(dtype=object)
    starts = ranges["start_ns"].to_numpy("int64")
    ends = ranges["end_ns"].to_numpy("int64")
    for key, rows in ranges.groupby(keys, sort=False).indices.items():
        parts = cast(tuple[int, ...], key if isinstance(key, tuple) else (key,))
        wanted = np.ones(len(times), dtype=bool)
        for part, column in zip(parts, values, strict=True):
            wanted &= column == int(part)
        at = np.flatnonzero(wanted)
        if len(at):
            hit = enclosing(starts[rows], ends[rows], times[at])
            out[at[hit >= 0]] = names[rows[hit[hit >= 0]]]
    return out


def _column(frame: pd.DataFrame, name: str) -> npt.NDArray[np.object_]:
    if name not in frame:
        return np.full(len(frame), UNNAMED, dtype=object)
    return frame[name].to_numpy(dtype=object)
