"""Issue 30, reading an ncu export: the value checks copy a table only where a cell was fixed.
Under pandas 3 every `frame[column]` is a new Series, so "is this still the column I read?" by
identity was always no, and each export's ~1,500 metric columns were assigned back (calib's
three exports: 1.70 -> 1.42 s of explain).

Reading an nsys export: the kernel table's small ids (device, context, stream; the two name ids)
are fetched as one integer per group and unpacked with numpy, and a column the table lacks is
not fetched (1M launches: the kernel fetch 1.4 -> 0.9 s); the values are those of reading each
column, also where an id does not fit its bits or a NOT NULL column holds a NULL."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nsdiag.readers import sqlite_query
from nsdiag.readers.validate import numeric_metrics


def test_a_clean_table_is_not_copied() -> None:
    raw = pd.DataFrame(
        {
            "Kernel Name": ["k_bad", "k_good"],
            "gpu__time_duration.sum": [1504.0, 812.0],
            "dram__bytes_read.sum": [2.0e8, 1.0e8],
        }
    )
    checked, warnings = numeric_metrics(raw, {"gpu__time_duration.sum": "ns"}, "raw.csv")
    assert checked is raw and warnings == []


def test_only_fixed_columns_change() -> None:
    raw = pd.DataFrame(
        {
            "Kernel Name": ["k_bad", "k_good"],
            "gpu__time_duration.sum": [1504.0, -1.0],  # a negative time: left out
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": ["12.5", "n/a"],
            "dram__bytes_read.sum": [2.0e8, 1.0e8],
        }
    )
    checked, warnings = numeric_metrics(raw, {"gpu__time_duration.sum": "ns"}, "raw.csv")
    assert checked is not raw and len(warnings) == 1
    assert np.isnan(checked["gpu__time_duration.sum"].iloc[1])
    assert checked["sm__throughput.avg.pct_of_peak_sustained_elapsed"].tolist()[0] == 12.5
    assert checked["dram__bytes_read.sum"].tolist() == [2.0e8, 1.0e8]
    assert checked["Kernel Name"].tolist() == ["k_bad", "k_good"]


# --- nsys SQLite: small ids read packed, missing columns not read ----------------------------

_KERNELS = """CREATE TABLE K (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL)"""
_COLUMNS = {
    "start_ns": "start",
    "end_ns": "end",
    "device": "deviceId",
    "context": "contextId",
    "stream": "streamId",
    "correlation_id": "correlationId",
    "demangled": "demangledName",
    "short": "shortName",
    "mangled": "mangledName",  # not in the table: -1 on every row
}
_GROUPS = (("device", "context", "stream"), ("demangled", "short"))


def _table(rows: list[tuple[object, ...]]) -> tuple[sqlite3.Connection, dict[str, Any]]:
    con = sqlite3.connect(":memory:")
    con.execute(_KERNELS)
    con.executemany("INSERT INTO K VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return con, sqlite_query.schema_of(con)


def _plain(con: sqlite3.Connection, no_time: int = -1) -> pd.DataFrame:
    """What the reader gives by definition: each column as SQLite has it, NULL -> -1 (a time
    -> `no_time`), a missing column -1."""
    rows = con.execute(
        "SELECT start, end, deviceId, contextId, streamId, correlationId, demangledName, "
        "shortName FROM K"
    ).fetchall()
    frame = pd.DataFrame(rows, columns=list(_COLUMNS)[:-1], dtype=object)
    for alias in frame:
        fill = no_time if alias in ("start_ns", "end_ns") else -1
        frame[alias] = frame[alias].where(frame[alias].notna(), fill).astype("int64")
    frame["mangled"] = np.int64(-1)
    return frame


@pytest.mark.parametrize(
    "rows",
    [
        [(10, 20, 0, 1, 7, 5, 2, 3), (30, 45, 3, 1, 14, None, 4, 1)],  # small ids: packed
        [(10, 20, 0, 1, (1 << 20) + 5, 5, 2, 3)],  # a stream id over its 20 bits
        [(10, 20, 0, 1, 7, 5, 1 << 40, 3)],  # a name id over its 31 bits
        [(10, 20, -1, 1, 7, 5, 2, 3)],  # a negative id
        [(10, 20, 0, 1, 7, 5, 2, 3)] * 3 + [(30, 40, 0, 2, 9, 6, 2 << 30, (1 << 31) - 1)],
    ],
)
def test_packed_ids_read_as_unpacked(rows: list[tuple[object, ...]]) -> None:
    con, schema = _table(rows)
    got = sqlite_query.fetch_ints(con, schema, "K", _COLUMNS, together=_GROUPS)
    pd.testing.assert_frame_equal(got, _plain(con))


def test_a_null_in_a_not_null_column_still_reads() -> None:
    """A damaged file: a NULL stream (NOT NULL in the schema) reads as -1, a NULL time as the
    no-time mark that validation drops."""
    con = sqlite3.connect(":memory:")
    con.execute(_KERNELS.replace("NOT NULL", ""))
    con.executemany(
        "INSERT INTO K VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(10, None, 0, 1, None, 5, 2, 3), (30, 40, 0, 1, 7, 6, 2, 3)],
    )
    schema = sqlite_query.schema_of(con)
    schema["K"] = dict.fromkeys(schema["K"], True)  # as the schema said NOT NULL
    got = sqlite_query.fetch_ints(con, schema, "K", _COLUMNS, together=_GROUPS)
    pd.testing.assert_frame_equal(got, _plain(con, no_time=sqlite_query.NO_TIME))
