"""SQL plumbing for reading a database input (an nsys SQLite export): its schema, queries bounded
by the row limit and the file's size, and integer columns streamed from SQLite into numpy
without per-row Python.

Every statement is bounded (`_bounded`): it may return the rows the row limit allows
(NSDIAG_MAX_INPUT_ROWS), and no more than the file can hold in a table, asked for in the
statement itself (LIMIT one more: no second scan to count them); and SQLite's progress handler
stops it past STEPS_PER_ROW steps per such row, so a view or a join that computes far more
rows than it returns (a sort, a filter, a group over a cross join) is stopped too.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.readers import source as input_source

Schema = dict[str, dict[str, bool]]  # table -> {column: declared NOT NULL}


def text_of_cell(data: bytes) -> str:
    """A TEXT cell as str: nsys 2022 wrote binary bytes into some (TARGET_INFO_SYSTEM_ENV), which
    the default decoder refuses; undecodable bytes become U+FFFD."""
    return data.decode("utf-8", errors="replace")


# SQLite's virtual machine runs 20 to 40 steps per row nsdiag reads from a real export (the
# nsys recordings of tests/data: at most 0.54 steps per byte of the file for a whole read); a
# statement may take this many per row it may return. A view that computes rows costs more.
STEPS_PER_ROW = 200
_STEPS_PER_CHECK = 100_000
# No table row takes fewer bytes of the file than this (its cell pointer, sizes, rowid and
# header): a file holds at most its size / MIN_ROW_BYTES rows in any table; only a view or a
# join over tables yields more.
MIN_ROW_BYTES = 4


@dataclass(frozen=True)
class RowBound:
    """The most rows one statement may return, and whether the file's size sets it (a file that
    small holds fewer rows than the row limit allows)."""

    rows: int
    by_file: bool


def row_bound(con: sqlite3.Connection) -> RowBound:
    limit = input_source.limit_rows()
    (pages,) = con.execute("PRAGMA page_count").fetchone()
    (page_bytes,) = con.execute("PRAGMA page_size").fetchone()
    held = max(int(pages) * int(page_bytes) // MIN_ROW_BYTES, 1)
    return RowBound(min(limit, held), held < limit)


class TooManyRows(Exception):
    """A statement over `table` would return more than `bound.rows` rows."""

    def __init__(self, table: str, bound: RowBound) -> None:
        super().__init__(table, bound)
        self.table, self.bound = table, bound


class TooMuchWork(Exception):
    """A statement over `table` took more steps than returning `bound.rows` rows would."""

    def __init__(self, table: str, bound: RowBound) -> None:
        super().__init__(table, bound)
        self.table, self.bound = table, bound


@contextlib.contextmanager
def _bounded(con: sqlite3.Connection, table: str) -> Iterator[RowBound]:
    """Statements over `table` run inside may return `bound.rows` rows (the caller selects one
    more with LIMIT and checks, so nothing is counted twice) and take STEPS_PER_ROW steps per
    row of it: past that SQLite interrupts them (its progress handler) and TooMuchWork says so."""
    bound = row_bound(con)
    checks_left = bound.rows * STEPS_PER_ROW // _STEPS_PER_CHECK + 1

    def step() -> int:
        nonlocal checks_left
        checks_left -= 1
        return int(checks_left < 0)  # non-zero: SQLite interrupts the statement

    con.set_progress_handler(step, _STEPS_PER_CHECK)
    try:
        yield bound
    except sqlite3.OperationalError as exc:
        if checks_left < 0:
            raise TooMuchWork(table, bound) from exc
        raise
    finally:
        con.set_progress_handler(None, _STEPS_PER_CHECK)


def _select_sql(columns: str, table: str, where: str, bound: RowBound) -> str:
    return (
        f'SELECT {columns} FROM "{table}"'
        + (f" WHERE {where}" if where else "")
        + f" LIMIT {bound.rows + 1}"
    )


def _check_count(count: int, table: str, bound: RowBound) -> None:
    if count > bound.rows:
        raise TooManyRows(table, bound)


def select(
    con: sqlite3.Connection, table: str, columns: str, where: str = ""
) -> list[tuple[Any, ...]]:
    """The rows of `SELECT columns FROM table [WHERE where]`, bounded (`_bounded`)."""
    with _bounded(con, table) as bound:
        rows = con.execute(_select_sql(columns, table, where, bound)).fetchall()
    _check_count(len(rows), table, bound)
    return rows


def has_rows(con: sqlite3.Connection, table: str) -> bool:
    with _bounded(con, table):
        return con.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None


def schema_of(con: sqlite3.Connection) -> Schema:
    """Each table's and view's columns (a view's are its SELECT's: nothing is run)."""
    with _bounded(con, "sqlite_master"):
        tables = [
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        ]
        return {
            t: {r[1]: bool(r[3]) for r in con.execute(f'PRAGMA table_info("{t}")')} for t in tables
        }


def query(
    con: sqlite3.Connection, schema: Schema, table: str, columns: dict[str, str], where: str = ""
) -> pd.DataFrame:
    """SELECT the wanted columns (alias -> source column) that exist; missing ones are NULL."""
    present = schema.get(table, {})
    if not present:
        return pd.DataFrame({alias: pd.Series(dtype="float64") for alias in columns})
    exprs = [
        f'"{col}" AS {alias}' if col in present else f"NULL AS {alias}"
        for alias, col in columns.items()
    ]
    rows = select(con, table, ", ".join(exprs), where)
    return pd.DataFrame.from_records(rows, columns=list(columns), coerce_float=False)


def fetch_ints(
    con: sqlite3.Connection,
    schema: Schema,
    table: str,
    columns: dict[str, str],
    where: str = "",
    together: Sequence[tuple[str, ...]] = (),
) -> pd.DataFrame:
    """Integer columns (alias -> SQL column or expression over present columns), NULL -> -1.

    Streams the cursor into one numpy array (no per-row tuples kept, no object columns): the
    fastest way the standard library offers to get millions of rows out of SQLite. Each group
    of aliases in `together` (small ids: device, context, stream) is read as one integer where
    all its columns are NOT NULL: SQLite packs them, numpy unpacks them, and Python makes one
    object per group and row instead of one per value (most of a fetch's time).
    """
    present = schema.get(table, {})
    if not present:
        return pd.DataFrame({alias: np.empty(0, dtype="int64") for alias in columns})
    # A column the table lacks reads as one constant on every row: not fetched (a tenth of
    # the kernel table's fetch), filled in below.
    fetched = {a: c for a, c in columns.items() if _expr(c, present) != "NULL"} or columns
    # NOT NULL columns are read bare: IFNULL costs ~20% of the fetch.
    bare = {
        alias: f'"{col}"' if present.get(col) else f"IFNULL({_expr(col, present)}, -1)"
        for alias, col in fetched.items()
    }
    groups = [g for g in together if all(present.get(fetched.get(a, "")) for a in g)]
    # packed where a group is NOT NULL (a value too large for its bits: read again unpacked)
    data = _rows_or_none(con, table, bare, where, groups) if groups else None
    if data is None:
        data = _rows_or_none(con, table, bare, where)
    missing = dict.fromkeys(columns, -1)
    if data is None:  # a NULL where the schema says NOT NULL (a damaged or edited file)
        data = _int_rows(con, table, _null_safe(fetched, present), where)
        missing = {a: NO_TIME if a in _TIMES else -1 for a in columns}
    at = {alias: i for i, alias in enumerate(fetched)}
    return pd.DataFrame(
        {
            alias: data[:, at[alias]]
            if alias in at
            else np.full(len(data), missing[alias], dtype="int64")
            for alias in columns
        }
    )


# A time the export left NULL: far outside any timestamp, so `validate.intervals` drops its row.
NO_TIME = -(1 << 63)
_TIMES = ("start_ns", "end_ns")


def _null_safe(columns: dict[str, str], present: dict[str, bool]) -> dict[str, str]:
    """Every column wrapped in IFNULL: -1 for an id or a size, NO_TIME for a start or an end."""
    return {
        alias: f"IFNULL({_expr(col, present)}, {NO_TIME if alias in _TIMES else -1})"
        for alias, col in columns.items()
    }


def _rows_or_none(
    con: sqlite3.Connection,
    table: str,
    exprs: dict[str, str],
    where: str,
    groups: Sequence[tuple[str, ...]] = (),
) -> np.ndarray | None:
    """_int_rows, or None where a value is NULL."""
    try:
        return _int_rows(con, table, exprs, where, groups)
    except TypeError:  # numpy meets None
        return None


def _int_rows(
    con: sqlite3.Connection,
    table: str,
    exprs: dict[str, str],
    where: str,
    groups: Sequence[tuple[str, ...]] = (),
) -> np.ndarray:
    """One int64 column per expression (alias -> SQL), in their order. Each group's values are
    selected as one integer, each value in 62 // len(group) bits, or NULL where one does not
    fit (the caller reads the table again unpacked)."""
    packed = {alias for group in groups for alias in group}
    selected: list[str] = [e for a, e in exprs.items() if a not in packed]
    for group in groups:
        bits, parts = 62 // len(group), [exprs[a] for a in group]
        fits = " AND ".join(f"{e} BETWEEN 0 AND {(1 << bits) - 1}" for e in parts)
        shifted = " | ".join(f"({e} << {bits * (len(group) - 1 - i)})" for i, e in enumerate(parts))
        selected.append(f"CASE WHEN {fits} THEN {shifted} END")
    with _bounded(con, table) as bound:
        rows = con.execute(_select_sql(", ".join(selected), table, where, bound))
        data = np.fromiter(itertools.chain.from_iterable(rows), dtype="int64")
    data = data.reshape(-1, len(selected))
    _check_count(len(data), table, bound)
    if not groups:
        return data
    out = np.empty((len(data), len(exprs)), dtype="int64")
    position = {a: i for i, a in enumerate(exprs)}
    for i, alias in enumerate(a for a in exprs if a not in packed):
        out[:, position[alias]] = data[:, i]
    for g, group in enumerate(groups, start=len(exprs) - len(packed)):
        bits = 62 // len(group)
        for i, alias in enumerate(group):
            out[:, position[alias]] = (data[:, g] >> (bits * (len(group) - 1 - i))) & (
                (1 << bits) - 1
            )
    return out


def _expr(column: str, present: dict[str, bool]) -> str:
    """A column name if present, NULL if not; expressions (packing several columns) pass through
    when every identifier in them is present."""
    if column in present:
        return f'"{column}"'
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", column)
    return column if names and all(n in present for n in names) else "NULL"


def ints(series: pd.Series, missing: int = -1) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").fillna(missing).to_numpy(dtype="int64")
