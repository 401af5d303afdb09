"""Phase 1's launches as integer arrays, made once per plan, and ncu's name filter and
per-launch-configuration count replayed on them (what rounds.py asks thousands of times while
it weighs candidate runs). On pandas frames the planner took 10-12 s for the 163,644 launches of
a GPT-2 decode loop (tests/data/idioms/decode.sqlite.gz), most of it grouping string columns
again for every name set. Pure: a DataFrame in, arrays out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Codes:
    """Every launch's filter name, launch configuration and end time, as arrays in launch
    order (positions are the frame's row numbers, as the planner's launches are indexed)."""

    names: dict[str, int]  # filter name -> its code
    name: np.ndarray  # per launch: its filter name's code
    key: np.ndarray  # per launch: the code of (filter name, grid, block)
    shape: np.ndarray  # per launch: the code of (grid, block)
    start: np.ndarray  # per launch: start time in ns (NaN: unknown)
    end: np.ndarray  # per launch: end time in ns (NaN: unknown)
    last_end: float  # the latest end (NaN: none known)
    first_inside: int  # the analysed region's first launch (0 without a region or none in it)
    region_partial: bool  # some launches lie outside the analysed region
    # per code of `key`: whether all its launches are of one kernel (one demangled name): not
    # so for template variants behind one bare function name
    one_kernel: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


@dataclass(frozen=True)
class Seen:
    """The launches ncu's name filter lets through, each with its rank in its launch
    configuration (0: the configuration's first)."""

    positions: np.ndarray  # ascending
    rank: np.ndarray  # aligned with positions
    rank_at: np.ndarray  # every launch position's rank (-1: not let through)
    sizes: np.ndarray  # launches per (filter name, grid, block) group among them


def _codes_of(column: pd.Series) -> np.ndarray:
    codes, _ = pd.factorize(column, use_na_sentinel=False)
    return np.asarray(codes, dtype=np.int64)


def _combined(*parts: np.ndarray) -> np.ndarray:
    """One code per distinct tuple of the parts' codes."""
    out = np.zeros(len(parts[0]), dtype=np.int64)
    for part in parts:
        out = out * (int(part.max(initial=0)) + 1) + part
        out = np.asarray(pd.factorize(out)[0], dtype=np.int64)  # compact: no overflow
    return out


def _times(launches: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if "start_ns" not in launches:
        nan = np.full(len(launches), np.nan)
        return nan, nan
    start = pd.to_numeric(launches["start_ns"], errors="coerce").to_numpy(dtype=float)
    duration = pd.to_numeric(launches["duration_ns"], errors="coerce").fillna(0.0)
    return start, start + duration.to_numpy(dtype=float)


def encode(launches: pd.DataFrame) -> Codes:
    """The codes of a planner's launches (kernel_launches' columns, `in_region` optional)."""
    names, uniques = pd.factorize(launches["filter_name"].astype(str))
    name = np.asarray(names, dtype=np.int64)
    grid, block = _codes_of(launches["grid"]), _codes_of(launches["block"])
    start, end = _times(launches)
    first_inside, partial = 0, False
    if "in_region" in launches:
        inside = launches["in_region"].astype(bool).to_numpy()
        partial = not bool(inside.all())
        hits = np.flatnonzero(inside)
        first_inside = int(hits[0]) if len(hits) else 0
    key = _combined(name, grid, block)
    return Codes(
        {str(u): i for i, u in enumerate(uniques)},
        name,
        key,
        _combined(grid, block),
        start,
        end,
        float(np.nanmax(end)) if np.isfinite(end).any() else float("nan"),
        first_inside,
        partial,
        _one_kernel(key, launches),
    )


def _one_kernel(key: np.ndarray, launches: pd.DataFrame) -> np.ndarray:
    """Per key code: whether its launches share one demangled name (`name`; without the column,
    none is known to)."""
    out = np.zeros(int(key.max(initial=-1)) + 1, dtype=bool)
    if "name" not in launches or not len(key):
        return out
    kernel = _codes_of(launches["name"].astype(str))
    pairs = np.unique(np.stack([key, kernel]), axis=1)
    out[:] = np.bincount(pairs[0], minlength=len(out)) == 1
    return out


def ranked(codes: Codes, names: Iterable[str], key_has_name: bool, after: int = 0) -> Seen:
    """The launches of these names from launch `after` on (ncu's --launch-skip-before-match),
    ranked per launch configuration: (name, grid, block), or (grid, block) when ncu's key had no
    name. A stable sort by key keeps launch order inside each configuration."""
    wanted = [codes.names[n] for n in names if n in codes.names]
    mask = np.isin(codes.name, wanted)
    if after:
        mask[:after] = False
    positions = np.flatnonzero(mask)
    keys = (codes.key if key_has_name else codes.shape)[positions]
    order = np.argsort(keys, kind="stable")
    rank = np.empty(len(positions), dtype=np.int64)
    rank[order] = _ranks_in_runs(keys[order])
    rank_at = np.full(len(codes.name), -1, dtype=np.int64)
    rank_at[positions] = rank
    _, sizes = np.unique(codes.key[positions], return_counts=True)
    return Seen(positions, rank, rank_at, sizes)


def _ranks_in_runs(sorted_keys: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal values of a sorted array."""
    n = len(sorted_keys)
    if not n:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)
