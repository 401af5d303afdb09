"""Region from NVTX ranges: the instances of a top-level range that repeats are iterations; where
none repeats alone, the part of the run the ranges cover.

Only the program's own ranges choose the region: a library's (CUB, NCCL, cuDNN, PyTorch's
operator ranges; model/nvtx_owners.py) is left out, unless the user asks for it by name
(`--region nvtx:NAME`). Ranges whose names differ only by numbers standing as words of their
own (`step_12`, `IO 10`, `iter 3/100`, `epoch 2 batch 17`, `ProfilerStep#7`) are instances of
one range, as are names that end in a number (`iter1`); a number inside a word (`fp16 step`)
is part of the name."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from nsdiag.analysis.records.region import Iteration, Region, Window
from nsdiag.analysis.region.steady import (
    FEW_ITERATIONS,
    MIN_ITERATIONS,
    iteration_region,
    steady,
)
from nsdiag.analysis.region.windows import IntArray, as_iterations, counts
from nsdiag.model.nvtx_owners import library_flags

TIGHT_LOOP = 0.8  # instances covering this share of their span follow one another
MAX_VARIANTS_SHARE = 0.2  # a second repeating range with more launches than this is a variant
# A trailing number (with its separators: 'step_12', 'iter3', 'iter 3/100'), and a number
# standing as a word elsewhere ('epoch 2 batch 17').
_INSTANCE_SUFFIX = re.compile(r"[\s#_:\-/=]*\d+$")
_INSTANCE_NUMBER = re.compile(r"(?:^|[\s#_:\-/=,]+)\d+(?=$|[\s#_:\-/=,])")


def base_name(name: str) -> str:
    """'ProfilerStep#12' -> 'ProfilerStep', 'step 3' -> 'step', 'epoch 2 batch 17' -> 'epoch
    batch', 'iter 3/100' -> 'iter': instances of one range."""
    text = str(name)
    base = " ".join(_INSTANCE_NUMBER.sub(" ", _INSTANCE_SUFFIX.sub("", text)).split())
    return base or text


def user_ranges(nvtx: pd.DataFrame) -> pd.DataFrame:
    """The program's own ranges: a library's left out (model/nvtx_owners.py)."""
    if not len(nvtx):
        return nvtx
    domains = (
        nvtx["domain"].astype(object).where(nvtx["domain"].notna(), "")
        if "domain" in nvtx
        else pd.Series("", index=nvtx.index)
    )
    flags = library_flags(
        nvtx["name"].astype(str).to_numpy(dtype=object),
        domains.astype(str).to_numpy(dtype=object),
    )
    keep = ~flags
    mine: pd.DataFrame = nvtx[keep]
    return mine


def _top_level(nvtx: pd.DataFrame) -> pd.DataFrame:
    nvtx = user_ranges(nvtx)
    if "depth" not in nvtx:
        return nvtx
    return nvtx[pd.to_numeric(nvtx["depth"], errors="coerce").fillna(0) == 0]


def nvtx_candidates(
    nvtx: pd.DataFrame,
    launches: IntArray,
    only: str | None = None,
    least: int = MIN_ITERATIONS,
) -> list[tuple[int, str, list[Iteration]]]:
    """Top-level NVTX ranges (or the one asked for, at any depth) that repeat without
    overlapping (`least` times or more), with their instances as iterations, most kernel
    launches first. An instance runs to the start of the next where the instances follow one
    another closely (a loop whose body is the range); where other work sits between them, each
    instance is its own window."""
    return _candidates(nvtx if only else _top_level(nvtx), launches, only, least)


def _candidates(
    ranges: pd.DataFrame, launches: IntArray, only: str | None, least: int
) -> list[tuple[int, str, list[Iteration]]]:
    """`nvtx_candidates` among `ranges` (the top-level ones, or all where one is asked for)."""
    frame = ranges.assign(base=lambda f: f["name"].astype(str).map(base_name))
    found = []
    for (base, _, _), group in frame.groupby(["base", "process_id", "thread_id"], sort=False):
        if only is not None and only not in (base, *group["name"].astype(str)):
            continue
        group = group.sort_values("start_ns")
        starts = group["start_ns"].to_numpy("int64")
        ends = group["end_ns"].to_numpy("int64")
        if len(group) < (1 if only else least) or np.any(starts[1:] < ends[:-1]):
            continue
        tight = (ends - starts).sum() >= TIGHT_LOOP * (ends[-1] - starts[0])
        stops = np.append(starts[1:], ends[-1]) if tight else ends
        iterations = as_iterations(
            [(int(a), int(b)) for a, b in zip(starts, stops, strict=True)], launches
        )
        launched = sum(i.kernels for i in iterations)
        if launched:
            found.append((launched, str(base), iterations))
    return sorted(found, key=lambda c: -c[0])


def annotated_window(nvtx: pd.DataFrame, launches: IntArray) -> tuple[Window, list[str]] | None:
    """From the first top-level NVTX range that launches kernels to the end of the last one: the
    part of the run its author annotated, and the ranges' names in order."""
    return _annotated(_top_level(nvtx), launches)


def _annotated(top_level: pd.DataFrame, launches: IntArray) -> tuple[Window, list[str]] | None:
    top = top_level.sort_values("start_ns")
    windows = [(int(s), int(e)) for s, e in zip(top["start_ns"], top["end_ns"], strict=True)]
    used = [
        (w, str(n))
        for w, n, c in zip(windows, top["name"], counts(launches, windows), strict=True)
        if c
    ]
    if not used:
        return None
    names = list(dict.fromkeys(n for _, n in used))
    return (min(w[0] for w, _ in used), max(w[1] for w, _ in used)), names


def nvtx_region(nvtx: pd.DataFrame, launches: IntArray, bounds: Window) -> Region | None:
    if not len(nvtx):
        return None
    # the program's top-level ranges, told from the libraries' once for the three searches
    top = _top_level(nvtx)
    # a range that runs twice is the short run's step only where none runs three times
    candidates = _candidates(top, launches, None, MIN_ITERATIONS) or _candidates(
        top, launches, None, FEW_ITERATIONS
    )
    single = len(candidates) == 1 or (
        len(candidates) > 1 and candidates[1][0] < MAX_VARIANTS_SHARE * candidates[0][0]
    )
    if single and (parts := steady(candidates[0][2])) is not None:
        return iteration_region(
            "nvtx-iterations", f"NVTX range '{candidates[0][1]}'", parts, bounds
        )
    annotated = _annotated(top, launches)
    if annotated is None:
        return None
    window, names = annotated
    shown = ", ".join(f"'{n}'" for n in names[:4]) + (", …" if len(names) > 4 else "")
    text = f"the part of the run the NVTX ranges cover ({shown}; no single range repeats as a loop)"
    return Region("nvtx-annotated", text, (window,), *bounds)
