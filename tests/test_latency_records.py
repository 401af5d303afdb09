"""Issue 39, item 2: `model/tables.records` builds rows column by column (pandas' `to_dict`
steps through string columns element by element, most of explain's time on a wide aggregated
table). The rows must be `to_dict("records")`'s: same keys, values and Python types."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.kernel.signatures import aggregate
from nsdiag.model.tables import records

DATA = Path(__file__).parent / "data"


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _assert_as_to_dict(frame: pd.DataFrame) -> None:
    got, want = records(frame), frame.to_dict("records")
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w)
        assert all(_same(g[k], w[k]) for k in w), (g, w)


def test_every_kind_of_column() -> None:
    frame = pd.DataFrame(
        {
            "name": pd.Series(["a", None, "c"], dtype="str"),
            "count": np.array([1, 2, 3], dtype="int64"),
            "ns": [1.5, np.nan, 3.0],
            "flag": [True, False, True],
            "ids": [[1, 2], [3], []],
            "mixed": pd.Series([np.int64(4), "x", np.float64(2.5)], dtype=object),
            "nullable": pd.array([1, None, 3], dtype="Int64"),
        }
    )
    _assert_as_to_dict(frame)
    assert type(records(frame)[0]["mixed"]) is int  # boxed as to_dict boxes object columns


def test_empty_and_columnless_frames() -> None:
    _assert_as_to_dict(pd.DataFrame({"a": pd.Series([], dtype="float64")}))
    _assert_as_to_dict(pd.DataFrame(index=range(2)))


@pytest.mark.parametrize("name", ["profile/layers8/session", "multi_gpu/verify2/ddp_straggler"])
def test_recorded_tables_and_their_aggregate(name: str) -> None:
    session = nsdiag.load([str(DATA / name)])
    for frame in (session.kernels, session.timeline.head(2000), aggregate(session.kernels)):
        assert len(frame)
        _assert_as_to_dict(frame)
