"""The session seen through its analysed region: what falls inside, and the profiled kernels
weighed by the time they take there.

An activity belongs to the region when the host launched it inside one of the region's windows
(its API call; its GPU start where the call is unknown), a CUDA call when it starts inside, an
NVTX range when it overlaps. Profiled kernels (ncu) take their share from the region's kernel
launches, matched as at profile time (model/matching.py); kernels that ran only outside the
region (warm-up, autotuning candidates, start-up) drop out of the diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from nsdiag.analysis.records.region import Region
from nsdiag.analysis.region.windows import launch_times, within
from nsdiag.model.launches import SIGNATURE_COLUMNS, kernel_launches
from nsdiag.model.matching import timeline_weights
from nsdiag.model.session import Session
from nsdiag.model.signature import signature_key, signature_keys
from nsdiag.model.tables import rows_where
from nsdiag.model.text_codes import distinct_pairs, factorize_text

TIMELINE_WEIGHTS = (
    "timeline_launches",
    "timeline_total_ns",
    "timeline_variant",
    "timeline_variants",
)


def restrict(session: Session, region: Region) -> Session:
    """The session's timeline, CUDA calls and NVTX ranges inside the region; its kernels table
    (ncu) as it is."""
    timeline = session.timeline
    inside = (
        within(launch_times(timeline), region.windows) if len(timeline) else np.zeros(0, dtype=bool)
    )
    api = session.api_calls
    api_inside = (
        within(api["start_ns"].to_numpy("int64"), region.windows)
        if len(api)
        else np.zeros(0, dtype=bool)
    )
    nvtx = session.nvtx_ranges
    if len(nvtx):
        starts, ends = nvtx["start_ns"].to_numpy("int64"), nvtx["end_ns"].to_numpy("int64")
        overlaps = np.zeros(len(nvtx), dtype=bool)
        for w_start, w_end in region.windows:
            overlaps |= (starts < w_end) & (ends > w_start)
        nvtx = rows_where(nvtx, overlaps)
    else:
        nvtx = nvtx.reset_index(drop=True)
    return replace(
        session,
        timeline=rows_where(timeline, inside),
        api_calls=rows_where(api, api_inside) if len(api) else api,
        nvtx_ranges=nvtx,
    )


@dataclass(frozen=True)
class RegionKernels:
    """The profiled kernels with their launches and time in the region."""

    kernels: pd.DataFrame  # rows of session.kernels that ran in the region, timeline_* columns set
    outside: int  # profiled signatures that ran only outside the region
    matched: (
        bool  # False: no profiled kernel matched the region's launches (weights left as they were)
    )


def weigh_by_region(kernels: pd.DataFrame, region_timeline: pd.DataFrame) -> RegionKernels:
    """Each profiled launch with its signature's launch count and total time in the region."""
    if not len(kernels) or not len(region_timeline):
        return RegionKernels(kernels, 0, False)
    # kernel_launches keeps the kernel rows, and a kernel's `contended` flag reads kernels
    # alone: the region's other rows are not filtered out first (a copy of every column)
    launches = kernel_launches(region_timeline)
    if not len(launches):
        return RegionKernels(kernels, 0, False)
    weighed = timeline_weights(
        kernels.drop(columns=[c for c in TIMELINE_WEIGHTS if c in kernels]),
        _shaped_like(kernels, launches[[c for c in SIGNATURE_COLUMNS if c in launches]]),
    )
    ran = weighed["timeline_total_ns"].notna()
    if not ran.any():
        return RegionKernels(kernels, 0, False)
    signature = signature_keys(weighed)
    outside = len(set(signature[~ran]) - set(signature[ran]))
    return RegionKernels(weighed[ran].reset_index(drop=True), outside, True)


def _shaped_like(kernels: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """The launches of the signatures a profiled kernel may match (model/matching.py): of its
    grid and block, and of its bare function name (by key: the launch's name's; by shape: the
    launch's function). Whole signatures are kept or left out (all their launches share name,
    grid and block), so each weight is the same; grouping the others is spared (a foreach
    optimizer step launches 143 signatures 45,000 times for 38 profiled kernels)."""
    if not {"grid", "block", "name"} <= set(kernels.columns) or not len(launches):
        return launches
    keys = [
        signature_key(n, g, b)
        for n, g, b in zip(
            kernels["name"].astype(str), kernels["grid"], kernels["block"], strict=True
        )
    ]
    shapes, functions = {(k.grid, k.block) for k in keys}, {k.function for k in keys}
    # decided per distinct name, function and shape, then read per launch by number
    name, names = factorize_text(launches["name"])
    function, function_names = factorize_text(launches["function"])
    grid, grids = factorize_text(launches["grid"])
    block, blocks = factorize_text(launches["block"])
    if min(name.min(), function.min(), grid.min(), block.min()) < 0:  # a missing value
        return _shaped_like_rows(launches, shapes, functions)
    named = np.array(
        [signature_key(str(n), "", "").function in functions for n in names], dtype=bool
    )
    of_function = np.array([f in functions for f in function_names], dtype=bool)
    named[np.unique(name[of_function[function]])] = True
    of_grid, of_block, shape, _ = distinct_pairs(grid, block)
    known = np.array(
        [
            (grids[g], blocks[b]) in shapes
            for g, b in zip(of_grid.tolist(), of_block.tolist(), strict=True)
        ],
        dtype=bool,
    )
    keep = named[name] & known[shape]
    return launches if keep.all() else launches[keep].reset_index(drop=True)


def _shaped_like_rows(
    launches: pd.DataFrame, shapes: set[tuple[str, str]], functions: set[str]
) -> pd.DataFrame:
    """`_shaped_like` launch by launch, where a name, function, grid or block is missing."""
    names = launches["name"].tolist()
    named = {n for n in set(names) if signature_key(str(n), "", "").function in functions}
    named.update(
        n for n, f in zip(names, launches["function"].tolist(), strict=True) if f in functions
    )
    rows = zip(names, launches["grid"].tolist(), launches["block"].tolist(), strict=True)
    keep = np.fromiter(
        (n in named and (g, b) in shapes for n, g, b in rows), dtype=bool, count=len(launches)
    )
    return launches if keep.all() else launches[keep].reset_index(drop=True)
