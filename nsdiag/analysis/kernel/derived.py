"""Per-launch derived quantities (FLOPs, shares, conflict rates) computed from catalogue metrics.

`add_derived` adds the columns derived_names.py lists (DERIVED_METRICS, numeric, which the rule
loader accepts next to the catalogue's names; DERIVED_TEXTS, text, which a rule's message may
show and a condition never reads): a column added here is listed there.
"""

from __future__ import annotations

from typing import cast

import numpy as np
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


def _col(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series(np.nan, index=frame.index)


def _sum(frame: pd.DataFrame, *terms: tuple[float, str]) -> pd.Series:
    """Weighted sum of columns; NaN only when every term is missing."""
    # on arrays: a frame built per sum cost more than the sums (a few terms, tens of rows)
    total = np.full(len(frame), np.nan)
    for weight, name in terms:
        if name in frame:
            term = weight * pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype="float64")
            total = np.where(np.isnan(total), term, np.where(np.isnan(term), total, total + term))
    return pd.Series(total, index=frame.index)


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    return num / den.where(den > 0)


def add_derived(kernels: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of `kernels` with derived columns added."""
    k = kernels.copy()
    _bound(k)
    _add_flops(k)
    _add_memory(k)
    _add_stalls(k)
    _add_occupancy(k)
    return k


def _bound(k: pd.DataFrame) -> None:
    """Each BOUNDED_PCT column held to [0, 100]."""
    for name in BOUNDED_PCT:
        if name in k:
            k[name] = pd.to_numeric(k[name], errors="coerce").clip(0.0, 100.0)


def _add_flops(k: pd.DataFrame) -> None:
    """Counts where the report has them; else ncu's roofline inputs: per-cycle rates x cycles."""
    cycles = _col(k, "sm_cycles_per_second") * _col(k, "duration_ns") * 1e-9
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
        k[f"flop_{precision}"] = counted.fillna(rates * cycles)
    add_tensor_flops(k)  # flop_tensor and flop_tensor_<precision>
    k["flop_total"] = _sum(
        k, (1, "flop_fp32"), (1, "flop_fp64"), (1, "flop_fp16"), (1, "flop_tensor")
    )


def _add_memory(k: pd.DataFrame) -> None:
    k["dram_bytes"] = _col(k, "dram_bytes").fillna(
        _sum(k, (1, "dram_read_bytes"), (1, "dram_write_bytes"))
    )
    k["l2_bytes"] = 32 * _col(k, "l2_sectors")
    k["global_load_sectors_per_request"] = _ratio(
        _col(k, "global_load_sectors"), _col(k, "global_load_requests")
    )
    k["global_store_sectors_per_request"] = _ratio(
        _col(k, "global_store_sectors"), _col(k, "global_store_requests")
    )
    _add_access(k)
    missed = 1 - _col(k, "l1_hit_rate_pct") / 100
    global_sectors = _sum(k, (1, "global_load_sectors"), (1, "global_store_sectors"))
    for side in ("load", "store"):
        useful = _col(k, f"global_{side}_bytes_per_sector")
        waste = ((1 - useful / 32) * missed).where(useful > 0, 0.0)  # 0: no plain accesses
        k[f"global_{side}_waste"] = waste.where(useful.notna())
        k[f"global_{side}_sector_share"] = _ratio(_col(k, f"global_{side}_sectors"), global_sectors)
    wavefronts = _sum(k, (1, "shared_load_wavefronts"), (1, "shared_store_wavefronts"))
    conflicts = _sum(k, (1, "shared_load_bank_conflicts"), (1, "shared_store_bank_conflicts"))
    requests = _sum(k, (1, "shared_load_requests"), (1, "shared_store_requests"))
    # No shared-memory traffic means no conflicts (0), not an unknown.
    k["shared_bank_conflict_pct"] = (
        (100 * _ratio(conflicts, wavefronts)).clip(0.0, 100.0).where(~(wavefronts == 0), 0.0)
    )
    k["shared_ways"] = _ratio(wavefronts, requests)
    k["local_sectors"] = _sum(k, (1, "local_load_sectors"), (1, "local_store_sectors"))
    k["lsu_sectors"] = _sum(
        k, (1, "local_sectors"), (1, "global_load_sectors"), (1, "global_store_sectors")
    )


WARP_LANES = 32


def _add_access(k: pd.DataFrame) -> None:
    """Access width and useful bytes per side, from ncu's sector counters."""
    widths, useful_bytes = [], []
    for side in ("load", "store"):
        useful = _col(k, f"global_{side}_bytes_per_sector")
        width = _col(k, f"global_{side}_sectors_per_request") * useful / WARP_LANES
        k[f"global_{side}_access_bytes"] = width
        # A side with no plain accesses (0 useful bytes: TMA or cp.async loads) has no width.
        widths.append(width.where(useful > 0))
        useful_bytes.append(_col(k, f"global_{side}_sectors") * useful)
    k["global_access_bytes"] = pd.concat(widths, axis=1).max(axis=1)
    k["global_useful_bytes"] = pd.concat(useful_bytes, axis=1).sum(axis=1, min_count=1)


def _add_stalls(k: pd.DataFrame) -> None:
    stalls = [f"stall_{r}" for r in STALL_REASONS if f"stall_{r}" in k and r != "selected"]
    if not stalls:
        k["stall_total"] = np.nan
        k["top_stall_share"] = np.nan
        k["top_stall"] = None
        return
    total = k[stalls].sum(axis=1, min_count=1)
    k["stall_total"] = total
    share_names = [name.replace("stall_", "stall_share_", 1) for name in stalls]
    if all(isinstance(k[n].dtype, np.dtype) and k[n].dtype.kind in "fiub" for n in stalls):
        # every share at once (_ratio's arithmetic, on numpy columns): a column set at a time
        # cost most of this
        counts = k[stalls].to_numpy(dtype="float64")
        den = total.where(total > 0).to_numpy(dtype="float64")[:, None]
        with np.errstate(all="ignore"):
            shares = pd.DataFrame(counts / den, index=k.index, columns=share_names)
        k[share_names] = shares
    else:
        for name, share in zip(stalls, share_names, strict=True):
            k[share] = _ratio(k[name], total)
    # 'not_selected' means a warp was ready but another issued: plenty of warps, not a
    # reason the kernel waits, so it never names the top stall.
    shares = k[
        [s.replace("stall_", "stall_share_", 1) for s in stalls if s != "stall_not_selected"]
    ]
    k["top_stall_share"] = shares.max(axis=1)
    # Launches without stall metrics (another input's, a cut-short report) have no top stall.
    known = shares.notna().any(axis=1)
    top = pd.Series(None, index=k.index, dtype=object)
    if known.any():
        top[known] = cast("pd.Series[str]", shares[known].idxmax(axis=1)).str.replace(
            "stall_share_", "", regex=False
        )
    k["top_stall"] = top


def _add_occupancy(k: pd.DataFrame) -> None:
    limits = [c for c in _OCCUPANCY_LIMITS if c in k]
    k["occupancy_limit_min"] = k[limits].min(axis=1) if limits else np.nan
    # Per launch, before signatures average them: an exact 2.0 stays 2.0 (a mean of equal
    # values can come out at 2.0000000000000004, whose ceiling is 3).
    per_sm = k["occupancy_limit_min"].where(k["occupancy_limit_min"] > 0)
    waves = (_col(k, "grid_size") / (_col(k, "sm_count") * per_sm)).fillna(_col(k, "waves_per_sm"))
    k["waves"] = waves
    full = np.ceil(waves)
    k["wave_tail"] = ((full - waves) / full).where(waves > 0)
    known = k[limits].notna().any(axis=1) if limits else pd.Series(False, index=k.index)
    if known.any():  # a launch whose report lacks every limit has no limiter (not an error)
        fewest = cast("pd.Series[str]", k.loc[known, limits].idxmin(axis=1))
        limiter = fewest.str.replace("occupancy_limit_", "", regex=False)
        k["occupancy_limiter"] = limiter.reindex(k.index).astype(object).where(known, None)
    else:
        k["occupancy_limiter"] = None
