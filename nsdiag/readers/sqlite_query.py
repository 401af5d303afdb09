"""SQL plumbing for reading a database input (an nsys SQLite export): its schema, queries bounded
by the row limit, and integer columns streamed from SQLite into numpy without per-row Python.

Every query goes through `select`, `query` or `fetch_ints`, which refuse a table (or a view)
holding more rows than nsdiag reads; `WorkBudget`, installed as the connection's progress
handler, stops a statement that works far longer than reading that many rows would.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.readers import source as input_source

Schema = dict[str, dict[str, bool]]  # table -> {column: declared NOT NULL}


def text_of_cell(data: bytes) -> str:
    """A TEXT cell as str: nsys 2022 wrote binary bytes into some (TARGET_INFO_SYSTEM_ENV), which
    the default decoder refuses; undecodable bytes become U+FFFD."""
    return data.decode("utf-8", errors="replace")


# SQLite's virtual machine runs about 20 steps per row nsdiag reads from a real export; a read
# may take this many per row of the row limit (a view that computes rows costs far more).
_STEPS_PER_ROW = 200
STEPS_PER_CHECK = 100_000


class WorkBudget:
    """A progress handler that stops a read past its budget of SQLite steps: the row limit
    bounds rows returned, this bounds the work of producing them (a view over a large join)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.checks_left = rows * _STEPS_PER_ROW // STEPS_PER_CHECK + 1
        self.spent = False

    def step(self) -> int:
        self.checks_left -= 1
        self.spent = self.checks_left < 0
        return int(self.spent)  # non-zero: SQLite interrupts the statement


class TooManyRows(Exception):
    def __init__(self, table: str, limit: int) -> None:
        super().__init__(table, limit)
        self.table, self.limit = table, limit


def _bounded(con: sqlite3.Connection, table: str) -> None:
    """Refuse a table (or a view: it may yield far more rows than the file holds bytes) with
    more rows than nsdiag reads, before reading any."""
    limit = input_source.limit_rows()
    (count,) = con.execute(
        f'SELECT count(*) FROM (SELECT 1 FROM "{table}" LIMIT {limit + 1})'
    ).fetchone()
    if count > limit:
        raise TooManyRows(table, limit)


def select(con: sqlite3.Connection, table: str, sql: str, *args: Any) -> sqlite3.Cursor:
    """A query over `table`, after checking its size."""
    _bounded(con, table)
    return con.execute(sql, args)


def schema_of(con: sqlite3.Connection) -> Schema:
    tables = [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    ]
    return {t: {r[1]: bool(r[3]) for r in con.execute(f'PRAGMA table_info("{t}")')} for t in tables}


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
    sql = f'SELECT {", ".join(exprs)} FROM "{table}"' + (f" WHERE {where}" if where else "")
    rows = select(con, table, sql).fetchall()
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
    _bounded(con, table)
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
    sql = f'SELECT {", ".join(selected)} FROM "{table}"' + (f" WHERE {where}" if where else "")
    rows = itertools.chain.from_iterable(con.execute(sql))
    data = np.fromiter(rows, dtype="int64").reshape(-1, len(selected))
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
