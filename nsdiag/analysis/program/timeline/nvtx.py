"""NVTX ranges on the host: which range a thread was in at a given time."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from nsdiag.model.intervals import enclosing

UNNAMED = ""  # the range of activities outside any NVTX range


def host_ranges(
    nvtx: pd.DataFrame | None, pids: np.ndarray, tids: np.ndarray, times: np.ndarray
) -> np.ndarray:
    """Innermost NVTX range open on (pid, tid) at each time; None where there is none."""
    out = np.full(len(times), None, dtype=object)
    if nvtx is None or not len(nvtx) or not len(times):
        return out
    ranges = nvtx.sort_values(["process_id", "thread_id", "start_ns"], kind="stable")
    names = ranges["name"].to_numpy(dtype=object)
    starts, ends = ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy()
    groups = ranges.groupby(["process_id", "thread_id"], sort=False).indices
    for key, rows in groups.items():
        pid, tid = cast(tuple[int, int], key)
        wanted = np.flatnonzero((pids == pid) & (tids == tid))
        if len(wanted):
            found = enclosing(starts[rows], ends[rows], times[wanted])
            out[wanted[found >= 0]] = names[rows[found[found >= 0]]]
    return out


def label(name: str, any_ranges: bool = True) -> str:
    """A range as a message names it: `NVTX range 'step'`, `work outside NVTX ranges`, or
    nothing where the program has no ranges of its own (every finding is about the whole run,
    and saying "outside NVTX ranges" before each would tell the reader nothing)."""
    if name:
        return f"NVTX range '{name}'"
    return "work outside NVTX ranges" if any_ranges else ""


def without_label(message: str) -> str:
    """A message whose template starts `{range_label}: ` rendered with an empty label: the
    sentence starts at what follows, capitalised."""
    if not message.startswith(": "):
        return message
    rest = message[2:]
    return rest[:1].upper() + rest[1:]
