"""Every read of an nsys export is bounded (readers/sqlite_query.py): by the row limit
(NSDIAG_MAX_INPUT_ROWS) and by the rows a file of its size can hold, views and joins included,
in rows returned and in SQLite's work, without a second pass over any table."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import tests.bad_input_corpus  # noqa: F401  (the corpus modules import each other in this order)
from nsdiag.errors import InputError
from nsdiag.readers import nsys_sqlite, source
from nsdiag.readers.sqlite_query import MIN_ROW_BYTES, TooManyRows, row_bound, select
from tests.bad_input_corpus import SYNC_HEAVY, plain_copy
from tests.bad_input_corpus_nsys import TINY_KERNELS, VIEWS, tiny_export

# which bound stops each view of the corpus: the rows it yields, or the work before them
STOPPED_BY = {
    "cross join": "yields more than",
    "sorted cross join": "takes more work than",
    "filtered cross join": "takes more work than",
    "grouped cross join": "takes more work than",
}


@pytest.mark.parametrize("shape", VIEWS)
def test_a_view_over_a_billion_rows_is_stopped_at_what_the_file_can_hold(
    shape: str, tmp_path: Path
) -> None:
    path = tiny_export(tmp_path / "tiny.sqlite", VIEWS[shape])
    held = path.stat().st_size // MIN_ROW_BYTES
    with pytest.raises(InputError) as refused:
        nsys_sqlite.read(path)
    message = refused.value.message
    assert message.startswith(f"{path}: ") and "CUPTI_ACTIVITY_KIND_KERNEL" in message
    assert STOPPED_BY[shape] in message and f"{held:,} rows" in message, message
    assert "file this size" in message and refused.value.hint == source.COMPUTED_ROWS_HINT


def test_the_same_export_with_a_table_reads(tmp_path: Path) -> None:
    session = nsys_sqlite.read(tiny_export(tmp_path / "tiny.sqlite"))
    assert len(session.timeline) == TINY_KERNELS
    assert set(session.timeline["name"]) == {"elementwise_kernel"}


def test_the_row_limit_is_exact_and_says_how_to_raise_it(tmp_path: Path) -> None:
    path = tiny_export(tmp_path / "tiny.sqlite")
    with source.input_limit(None, TINY_KERNELS):
        assert len(nsys_sqlite.read(path).timeline) == TINY_KERNELS
    with source.input_limit(None, TINY_KERNELS - 1), pytest.raises(InputError) as refused:
        nsys_sqlite.read(path)
    assert f"holds more than {TINY_KERNELS - 1:,} rows" in refused.value.message
    assert source.ENV_ROWS in refused.value.hint


def test_the_bound_is_the_smaller_of_the_limit_and_the_file(tmp_path: Path) -> None:
    con = sqlite3.connect(tiny_export(tmp_path / "tiny.sqlite"))
    held = (tmp_path / "tiny.sqlite").stat().st_size // MIN_ROW_BYTES
    assert row_bound(con).rows == held and row_bound(con).by_file
    with source.input_limit(None, 10):
        assert (row_bound(con).rows, row_bound(con).by_file) == (10, False)
        with pytest.raises(TooManyRows):
            select(con, "CUPTI_ACTIVITY_KIND_KERNEL", "start")
        assert len(select(con, "CUPTI_ACTIVITY_KIND_KERNEL", "start", "start < 100000")) == 10


def test_a_real_export_is_read_in_one_pass_per_table(tmp_path: Path) -> None:
    """The bounds are in the statements themselves (LIMIT, the progress handler): no table is
    counted before it is read, and each one nsdiag needs is selected once."""
    con = sqlite3.connect(plain_copy(SYNC_HEAVY, tmp_path / "sync_heavy.sqlite"))
    statements: list[str] = []
    con.set_trace_callback(statements.append)
    session = nsys_sqlite.read_connection(con, "sync_heavy")
    assert len(session.timeline) and len(session.api_calls)
    selects = [s for s in statements if s.startswith("SELECT") and "sqlite_master" not in s]
    assert not [s for s in statements if "count(" in s.lower()]
    assert all(re.search(r" LIMIT \d+$", s) for s in selects), selects
    tables = Counter(table for s in selects for table in re.findall(r'FROM "(\w+)"', s))
    assert tables["CUPTI_ACTIVITY_KIND_KERNEL"] == 1 and tables["CUPTI_ACTIVITY_KIND_RUNTIME"] == 1
    assert tables["StringIds"] == 1
