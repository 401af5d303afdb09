"""Phase 1's timeline cut to an NVTX range (collect/nvtx_filter.py)."""

from __future__ import annotations

import pandas as pd

from nsdiag.collect import (
    nvtx_filter,
)
from tests.conftest import (
    STEP,
)


def test_nvtx_window_filter() -> None:
    t = STEP.assign(thread_id=7)
    ranges = pd.DataFrame(
        {
            "name": ["step", "other"],
            "start_ns": [1500, 0],
            "end_ns": [3500, 10_000],
            "thread_id": [7, 7],
        }
    )
    kept = nvtx_filter.in_nvtx_range(t, ranges, "dom@step/")
    assert kept["api_start_ns"].tolist() == [2000, 3000]
    assert nvtx_filter.in_nvtx_range(t, ranges, "missing").empty
