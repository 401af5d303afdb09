"""Phase 1's timeline cut to an NVTX range (`nsdiag profile --nvtx`), as ncu's `--nvtx-include`
cuts phase 2: the launches made while the range was open on the launching thread."""

from __future__ import annotations

import pandas as pd


def in_nvtx_range(
    timeline: pd.DataFrame, nvtx_ranges: pd.DataFrame, expression: str
) -> pd.DataFrame:
    """Timeline rows launched while an NVTX range named like `expression` (ncu syntax: 'name',
    'name/', 'domain@name', 'outer/inner/') was open on the launching thread."""
    parts = [p for p in expression.split("/") if p]
    name = parts[-1].split("@")[-1] if parts else expression
    if "api_start_ns" not in timeline or "name" not in nvtx_ranges:
        return timeline.iloc[0:0]
    ranges = nvtx_ranges[nvtx_ranges["name"].astype(str) == name]
    same_thread = "thread_id" in timeline and "thread_id" in ranges
    keep = pd.Series(False, index=timeline.index)
    for r in ranges.itertuples():
        inside = (timeline["api_start_ns"] >= r.start_ns) & (timeline["api_start_ns"] <= r.end_ns)
        if same_thread:
            inside &= timeline["thread_id"] == r.thread_id
        keep |= inside
    return timeline[keep]
