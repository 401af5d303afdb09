"""Per-launch derived quantities (FLOPs, shares, conflict rates) computed from catalogue metrics.

`add_derived` adds the columns derived_names.py lists (DERIVED_METRICS, numeric, which the rule
loader accepts next to the catalogue's names; DERIVED_TEXTS, text, which a rule's message may
show and a condition never reads): a column added here is listed there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.kernel.tensor import add_tensor_flops
from nsdiag.model.catalogue import STALL_REASONS

_OCCUPANCY_LIMITS = (
    "occupancy_limit_registers",
    "occupancy_limit_shared_mem",
    "occupancy_limit_warps",
    "occupancy_limit_blocks",
    "occupancy_limit_barriers",
)


# Percentages that cannot physically pass 100 (or 0): hit rates, occupancy, shares of issue
# slots and branches. ncu samples their counters in different replay passes, so a rate can read
# 100.04; the rules, the verdict and the JSON read them held to [0, 100] (session.raw, the raw
# table, keeps ncu's value). Throughputs (% of a sustained peak) are left as measured.
BOUNDED_PCT = (
    "l1_hit_rate_pct",
    "l2_hit_rate_pct",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "branch_uniformity_pct",
    "shared_bank_conflict_pct",
)


FloatArray = npt.NDArray[np.float64]


class _Columns:
    """The launches' columns as float64 arrays (read as `pd.to_numeric(errors="coerce")`, NaN
    where a column is missing) and the derived ones, kept here as they are computed and written
    to the frame in order by `flush`: on tens of rows, a pandas operation and a column insert
    each cost more than the arithmetic (add_derived took 25 ms on 64 launches)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.added: dict[str, npt.NDArray[Any]] = {}
        self._read: dict[str, FloatArray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.added or name in self.frame

    def __getitem__(self, name: str) -> FloatArray:
        if name in self.added:
            return self.added[name]
        if name not in self._read:
            self._read[name] = (
                pd.to_numeric(self.frame[name], errors="coerce").to_numpy(dtype="float64")
                if name in self.frame
                else np.full(len(self.frame), np.nan)
            )
        return self._read[name]

    def __setitem__(self, name: str, values: npt.NDArray[Any]) -> None:
        self.added[name] = values  # a column set twice keeps its first place, as in a frame

    def flush(self) -> pd.DataFrame:
        """The frame with the added columns: those it had replaced in place, the others after
        its own in the order they were first set (where `frame[name] = ...` would put them)."""
        frame, index = self.frame, self.frame.index
        fresh = {}
        for name, values in self.added.items():
            # objects stay objects (pandas would make a column of strings `str`)
            column = (
                pd.Series(values, index=index, dtype=object) if values.dtype == object else values
            )
            if name in frame:
                frame[name] = column
            else:
                fresh[name] = column
        if fresh:
            frame = pd.concat([frame, pd.DataFrame(fresh, index=index)], axis=1)
        self.frame, self.added, self._read = frame, {}, {}
        return frame


def _sum(k: _Columns, *terms: tuple[float, str]) -> FloatArray:
    """Weighted sum of columns; NaN only when every term is missing."""
    total = np.full(len(k.frame), np.nan)
    for weight, name in terms:
        if name in k:
            term = weight * k[name]
            total = np.where(np.isnan(total), term, np.where(np.isnan(term), total, total + term))
    return total


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    return num / np.where(den > 0, den, np.nan)


def _fill(values: FloatArray, missing: FloatArray) -> FloatArray:
    """`values` with its NaN taken from `missing` (Series.fillna)."""
    return np.where(np.isnan(values), missing, values)


def _clip(values: FloatArray, low: float, high: float) -> FloatArray:
    """Series.clip: NaN stays NaN, and so does the sign of a zero at the bound."""
    return np.where(values < low, low, np.where(values > high, high, values))


def add_derived(kernels: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of `kernels` with derived columns added."""
    k = _Columns(kernels.copy())
    with np.errstate(all="ignore"):  # NaN and inf follow the arithmetic, as pandas lets them
        _bound(k)
        _add_flops(k)
        _add_memory(k)
        _add_stalls(k)
        _add_occupancy(k)
    return k.flush()


def _bound(k: _Columns) -> None:
    """Each BOUNDED_PCT column held to [0, 100]."""
    for name in BOUNDED_PCT:
        if name in k:
            k[name] = _clip(k[name], 0.0, 100.0)


def _add_flops(k: _Columns) -> None:
    """Counts where the report has them; else ncu's roofline inputs: per-cycle rates x cycles."""
    cycles = k["sm_cycles_per_second"] * k["duration_ns"] * 1e-9
    for precision, (add, mul, fma) in {
        "fp32": ("fadd", "fmul", "ffma"),
        "fp64": ("dadd", "dmul", "dfma"),
        "fp16": ("hadd", "hmul", "hfma"),
    }.items():
        scale = 2 if precision == "fp16" else 1  # half2 instructions do two operations
        counted = _sum(
            k,
            (scale, f"{add}_thread_inst"),
            (scale, f"{mul}_thread_inst"),
            (2 * scale, f"{fma}_thread_inst"),
        )
        rates = _sum(
            k,
            (scale, f"{add}_per_cycle"),
            (scale, f"{mul}_per_cycle"),
            (2 * scale, f"{fma}_per_cycle"),
        )
        k[f"flop_{precision}"] = _fill(counted, rates * cycles)
    add_tensor_flops(k)  # flop_tensor and flop_tensor_<precision>
    k["flop_total"] = _sum(
        k, (1, "flop_fp32"), (1, "flop_fp64"), (1, "flop_fp16"), (1, "flop_tensor")
    )


def _add_memory(k: _Columns) -> None:
    k["dram_bytes"] = _fill(
        k["dram_bytes"], _sum(k, (1, "dram_read_bytes"), (1, "dram_write_bytes"))
    )
    k["l2_bytes"] = 32 * k["l2_sectors"]
    k["global_load_sectors_per_request"] = _ratio(
        k["global_load_sectors"], k["global_load_requests"]
    )
    k["global_store_sectors_per_request"] = _ratio(
        k["global_store_sectors"], k["global_store_requests"]
    )
    _add_access(k)
    missed = 1 - k["l1_hit_rate_pct"] / 100
    global_sectors = _sum(k, (1, "global_load_sectors"), (1, "global_store_sectors"))
    for side in ("load", "store"):
        useful = k[f"global_{side}_bytes_per_sector"]
        waste = np.where(useful > 0, (1 - useful / 32) * missed, 0.0)  # 0: no plain accesses
        k[f"global_{side}_waste"] = np.where(np.isnan(useful), np.nan, waste)
        k[f"global_{side}_sector_share"] = _ratio(k[f"global_{side}_sectors"], global_sectors)
    wavefronts = _sum(k, (1, "shared_load_wavefronts"), (1, "shared_store_wavefronts"))
    conflicts = _sum(k, (1, "shared_load_bank_conflicts"), (1, "shared_store_bank_conflicts"))
    requests = _sum(k, (1, "shared_load_requests"), (1, "shared_store_requests"))
    # No shared-memory traffic means no conflicts (0), not an unknown.
    k["shared_bank_conflict_pct"] = np.where(
        wavefronts == 0, 0.0, _clip(100 * _ratio(conflicts, wavefronts), 0.0, 100.0)
    )
    k["shared_ways"] = _ratio(wavefronts, requests)
    k["local_sectors"] = _sum(k, (1, "local_load_sectors"), (1, "local_store_sectors"))
    k["lsu_sectors"] = _sum(
        k, (1, "local_sectors"), (1, "global_load_sectors"), (1, "global_store_sectors")
    )


WARP_LANES = 32


def _add_access(k: _Columns) -> None:
    """Access width and useful bytes per side, from ncu's sector counters."""
    widths, useful_bytes = [], []
    for side in ("load", "store"):
        useful = k[f"global_{side}_bytes_per_sector"]
        width = k[f"global_{side}_sectors_per_request"] * useful / WARP_LANES
        k[f"global_{side}_access_bytes"] = width
        # A side with no plain accesses (0 useful bytes: TMA or cp.async loads) has no width.
        widths.append(np.where(useful > 0, width, np.nan))
        useful_bytes.append(k[f"global_{side}_sectors"] * useful)
    k["global_access_bytes"] = np.fmax(*widths)  # the wider; NaN where both are
    load, store = useful_bytes
    both = np.where(np.isnan(load), 0.0, load) + np.where(np.isnan(store), 0.0, store)
    k["global_useful_bytes"] = np.where(np.isnan(load) & np.isnan(store), np.nan, both)


def _add_stalls(k: _Columns) -> None:
    n = len(k.frame)
    stalls = [f"stall_{r}" for r in STALL_REASONS if f"stall_{r}" in k and r != "selected"]
    if not stalls:
        k["stall_total"] = np.full(n, np.nan)
        k["top_stall_share"] = np.full(n, np.nan)
        k["top_stall"] = np.full(n, None, dtype=object)
        return
    # summed by pandas, as before: the order it adds twenty columns in is its own
    total = k.frame[stalls].sum(axis=1, min_count=1).to_numpy(dtype="float64")
    k["stall_total"] = total
    counts = np.column_stack([k[name] for name in stalls])
    shares = counts / np.where(total > 0, total, np.nan)[:, None]
    for j, name in enumerate(stalls):
        k[name.replace("stall_", "stall_share_", 1)] = shares[:, j]
    # 'not_selected' means a warp was ready but another issued: plenty of warps, not a
    # reason the kernel waits, so it never names the top stall.
    ranked = [j for j, name in enumerate(stalls) if name != "stall_not_selected"]
    candidates = shares[:, ranked]
    known = _has_value(candidates)
    k["top_stall_share"] = _row_extreme(candidates, known, np.nanmax)
    # Launches without stall metrics (another input's, a cut-short report) have no top stall.
    top = np.full(n, None, dtype=object)
    if known.any():
        first = np.nanargmax(candidates[known], axis=1)  # the first of equal shares, as idxmax
        top[known] = [stalls[ranked[j]].removeprefix("stall_") for j in first.tolist()]
    k["top_stall"] = top


def _has_value(values: FloatArray) -> npt.NDArray[np.bool_]:
    """Per row: any value not NaN (False for a table without columns)."""
    return (
        np.asarray(~np.isnan(values).all(axis=1), dtype=bool)
        if values.shape[1]
        else (np.zeros(len(values), dtype=bool))
    )


def _row_extreme(
    values: FloatArray, known: npt.NDArray[np.bool_], extreme: Callable[..., FloatArray]
) -> FloatArray:
    """Each row's nanmax or nanmin, NaN where the row has no value."""
    out = np.full(len(values), np.nan)
    if known.any():
        out[known] = extreme(values[known], axis=1)
    return out


def _add_occupancy(k: _Columns) -> None:
    n = len(k.frame)
    limits = [c for c in _OCCUPANCY_LIMITS if c in k]
    values = np.column_stack([k[c] for c in limits]) if limits else np.full((n, 0), np.nan)
    known = _has_value(values)
    fewest = _row_extreme(values, known, np.nanmin)
    k["occupancy_limit_min"] = fewest
    # Per launch, before signatures average them: an exact 2.0 stays 2.0 (a mean of equal
    # values can come out at 2.0000000000000004, whose ceiling is 3).
    per_sm = np.where(fewest > 0, fewest, np.nan)
    waves = _fill(k["grid_size"] / (k["sm_count"] * per_sm), k["waves_per_sm"])
    k["waves"] = waves
    full = np.ceil(waves)
    k["wave_tail"] = np.where(waves > 0, (full - waves) / full, np.nan)
    # a launch whose report lacks every limit has no limiter (not an error)
    limiter = np.full(n, None, dtype=object)
    if known.any():
        first = np.nanargmin(values[known], axis=1)  # the first of equal limits, as idxmin
        limiter[known] = [limits[j].removeprefix("occupancy_limit_") for j in first.tolist()]
    k["occupancy_limiter"] = limiter
