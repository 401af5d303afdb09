"""Issue 30, the timeline's other hot spots at a million launches: signature keys numbered by
hashing each column once, the busy time per group with a loop over a few groups instead of a
groupby, and the region search taking the kernels' rows only where it reads them; each gives
what its definition gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsdiag.analysis.region.windows import kernels_in_launch_order, launch_times
from nsdiag.model import intervals
from nsdiag.model.signature import SEPARATOR, _spellings, signature_codes, signature_keys


def _keys_by_row(frame: pd.DataFrame) -> list[str]:
    """Each row's key text, one row at a time (model/signature.py's definition)."""
    out = []
    for name, grid, block in zip(frame["name"], frame["grid"], frame["block"], strict=True):
        bare, spelled = _spellings(str(name))
        out.append(SEPARATOR.join((bare, str(grid), str(block), spelled)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_signature_codes_number_the_keys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = np.array(
        ["void at::f<float>(int)", "void at::f<float>(int) ", "k(int)", "at::g<c10::Half>", "k"],
        dtype=object,
    )
    frame = pd.DataFrame(
        {
            "name": names[rng.integers(0, len(names), 500)],
            "grid": rng.choice(["(1, 1, 1)", "(8, 1, 1)"], 500),
            "block": rng.choice(["(128, 1, 1)", "(256, 1, 1)"], 500),
        }
    )
    codes, texts = signature_codes(frame)
    assert [texts[c] for c in codes] == _keys_by_row(frame)
    assert signature_keys(frame).tolist() == _keys_by_row(frame)
    # one number per distinct (name, grid, block), numbered in order of first appearance
    distinct = frame.drop_duplicates()
    assert len(texts) == len(distinct)
    assert codes[distinct.index.to_numpy()].tolist() == list(range(len(distinct)))


@pytest.mark.parametrize("seed", range(20))
def test_busy_time_per_group_without_a_groupby(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 3000)), int(rng.integers(1, 60))
    codes = rng.integers(0, k, n)
    starts = rng.integers(0, 10**6, n)
    ends = starts + rng.integers(0, 10**4, n)
    looped = intervals.union_ns_by_group(codes, starts, ends, k)
    monkeypatch.setattr(intervals, "_FEW_GROUPS", 0)  # the groupby
    assert np.array_equal(looped, intervals.union_ns_by_group(codes, starts, ends, k))


def test_kernels_in_launch_order_are_row_positions() -> None:
    timeline = pd.DataFrame(
        {
            "kind": ["kernel", "memcpy", "kernel", "kernel", None],
            "start_ns": [50, 10, 40, 60, 5],
            "api_start_ns": [-1, 0, 30, 45, 1],
        },
        index=[7, 8, 9, 10, 11],
    )
    rows, launches = kernels_in_launch_order(timeline)
    kernels = timeline[timeline["kind"] == "kernel"]
    order = np.argsort(launch_times(kernels), kind="stable")
    pd.testing.assert_frame_equal(timeline.iloc[rows], kernels.iloc[order])
    assert launches.tolist() == [30, 45, 50]
