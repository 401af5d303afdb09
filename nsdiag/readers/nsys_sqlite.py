"""Reader for Nsight Systems SQLite exports (`nsys export --type sqlite`), plain or gzipped.

Only the standard library's sqlite3 touches the file. Numeric columns are read in SQL and
string ids are mapped in pandas (StringIds is read once), so a million launches cost one
query per table and no per-row Python. Every table is optional: a missing one is an empty frame.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.intervals import enclosing
from nsdiag.model.meta import SessionMeta, Source
from nsdiag.model.schema import COPY_KINDS, MEMORY_KINDS, SYNC_TYPES, known_labels
from nsdiag.model.session import API_COLUMNS, NVTX_COLUMNS, TIMELINE_COLUMNS, Session, empty_frame
from nsdiag.readers import source as input_source
from nsdiag.readers.validate import intervals

# Fallbacks for exports without the ENUM_* tables (values from CUPTI's headers, stable for years).
# Labels the schema's vocabularies lack (a newer CUPTI's) become 'unknown' in the tables.
MEMCPY_KINDS = {
    0: "unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM_HtoD",
    12: "UVM_DtoH",
    13: "UVM_DtoD",
}
MEM_KINDS = {
    0: "pageable",
    1: "pinned",
    2: "device",
    3: "array",
    4: "managed",
    5: "device_static",
    6: "managed_static",
    7: "unknown",
}
SYNC_TYPE_CODES = {
    0: "unknown",
    1: "event_synchronize",
    2: "stream_wait_event",
    3: "stream_synchronize",
    4: "context_synchronize",
}
NVTX_RANGE_TYPES = {
    59: "NvtxPushPopRange",
    60: "NvtxStartEndRange",
    70: "NvtxtPushPopRange",
    71: "NvtxtStartEndRange",
}
COPY_NAMES = {
    "HtoD": "Host-to-Device",
    "DtoH": "Device-to-Host",
    "DtoD": "Device-to-Device",
    "HtoH": "Host-to-Host",
    "PtoP": "Peer-to-Peer",
}
# Calls that block the calling host thread until GPU work finishes. cudaStreamWaitEvent is not
# one (it orders streams on the GPU); synchronous cudaMemcpy* is (only the *Async ones return
# early).
BLOCKING_SYNC = re.compile(
    r"^(cuda(Device|Stream|Event|Thread|Ctx)Synchronize|cu(Ctx|Stream|Event)Synchronize"
    r"|cudaMemcpy(?!\w*Async)\w*|cuMemcpy(?!\w*Async)\w*)$"
)
_VERSION_SUFFIX = r"_v\d+$"
_TID_BITS = 0xFFFFFF  # nsys serialises ids as hw(8) | vm(8) | pid(24) | tid(24)
# mangled_name: what ncu matches with `--kernel-name-base mangled` (unique per template instance)
_ACTIVITY_COLUMNS = (
    *TIMELINE_COLUMNS,
    "short_name",
    "mangled_name",
    "thread_id",
    "api_start_ns",
    "api_end_ns",
)
Schema = dict[str, dict[str, bool]]  # table -> {column: declared NOT NULL}


def read(path: Path) -> Session:
    # `.gz` exports (told by their first bytes) are decompressed to a file first, bounded
    with input_source.plain_file(path, "sqlite", "export.sqlite") as db_path:
        try:
            con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open {path}: {exc}", "pass an nsys SQLite export") from exc
        con.text_factory = text_of_cell
        budget = _WorkBudget(input_source.limit_rows())
        con.set_progress_handler(budget.step, _STEPS_PER_CHECK)
        try:
            return read_connection(con, source=str(path))
        except _TooManyRows as exc:
            raise input_source.too_many_rows(path, exc.table, exc.limit) from exc
        except sqlite3.OperationalError as exc:
            if budget.spent:
                raise input_source.too_much_work(path, budget.rows) from exc
            raise InputError(
                f"{path} is not a readable SQLite database: {exc}",
                "export it with: nsys export --type sqlite report.nsys-rep",
            ) from exc
        except (sqlite3.DatabaseError, ValueError, OverflowError) as exc:
            # not SQLite, a truncated or damaged file, or text where ids belong
            raise InputError(
                f"{path} is not a readable SQLite database: {exc}",
                "export it with: nsys export --type sqlite report.nsys-rep",
            ) from exc
        finally:
            con.close()


def text_of_cell(data: bytes) -> str:
    """A TEXT cell as str: nsys 2022 wrote binary bytes into some (TARGET_INFO_SYSTEM_ENV), which
    the default decoder refuses; undecodable bytes become U+FFFD."""
    return data.decode("utf-8", errors="replace")


# SQLite's virtual machine runs about 20 steps per row nsdiag reads from a real export; a read
# may take this many per row of the row limit (a view that computes rows costs far more).
_STEPS_PER_ROW = 200
_STEPS_PER_CHECK = 100_000


class _WorkBudget:
    """A progress handler that stops a read past its budget of SQLite steps: the row limit
    bounds rows returned, this bounds the work of producing them (a view over a large join)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.checks_left = rows * _STEPS_PER_ROW // _STEPS_PER_CHECK + 1
        self.spent = False

    def step(self) -> int:
        self.checks_left -= 1
        self.spent = self.checks_left < 0
        return int(self.spent)  # non-zero: SQLite interrupts the statement


class _TooManyRows(Exception):
    def __init__(self, table: str, limit: int) -> None:
        super().__init__(table, limit)
        self.table, self.limit = table, limit


def read_connection(con: sqlite3.Connection, source: str = "") -> Session:
    """The Session held by an open nsys export."""
    schema = _schema(con)
    where = source or "database"
    if not any(
        t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "TARGET_INFO")) for t in schema
    ):
        raise InputError(
            f"{where} has no Nsight Systems tables",
            "export the report with: nsys export --type sqlite report.nsys-rep",
        )
    _check_names_table(con, schema, where)
    strings = _strings(con, schema)
    api, warnings = intervals(_api_calls(con, schema, strings), "CUDA API calls", where)
    nvtx, found = intervals(_nvtx(con, schema, strings), "NVTX ranges", where)
    timeline, more = intervals(_activities(con, schema, strings), "GPU activities", where)
    timeline = _attribute(timeline, api, nvtx)
    api = api.assign(nvtx_range=_range_names(nvtx, api["thread_key"], api["start_ns"]))
    missing, missing_warnings = _missing_tables(schema, where)
    meta = replace(
        _meta(con, schema, source),
        missing_tables=tuple(missing) if missing else None,
        warnings=(*missing_warnings, *warnings, *found, *more),
    )
    return Session(
        timeline=timeline,
        api_calls=api.drop(columns=["thread_key"]).reset_index(drop=True),
        nvtx_ranges=nvtx.drop(columns=["thread_key"]).reset_index(drop=True),
        meta=meta,
    )


# What a timeline analysis cannot do without: a table nsys writes whenever CUDA is traced.
CORE_TABLES = {
    "kernels": ("CUPTI_ACTIVITY_KIND_KERNEL",),
    "api_calls": ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"),
}


def _missing_tables(schema: Schema, source: str) -> tuple[list[str], list[str]]:
    """Which of the timeline's core tables the export lacks ('kernels', 'api_calls'), and a
    warning for each: without it, what it would hold is unknown, not absent."""
    missing = [what for what, tables in CORE_TABLES.items() if not any(t in schema for t in tables)]
    words = {
        "kernels": "no kernel table (CUPTI_ACTIVITY_KIND_KERNEL): no kernel ran, or CUDA "
        "kernels were not traced; GPU idle time, overlap and launch analyses are skipped",
        "api_calls": "no CUDA API table (CUPTI_ACTIVITY_KIND_RUNTIME): the host's CUDA calls "
        "are unknown; the synchronisation analysis is skipped",
    }
    return missing, [f"{source} has {words[what]}" for what in missing]


def _check_names_table(con: sqlite3.Connection, schema: Schema, source: str) -> None:
    """Kernel and CUDA call names are ids into StringIds: an export with launches or calls but
    without it has no names, and the analyses that go by name (synchronisations, NCCL, fusion)
    would answer wrongly, so it is refused."""
    if "StringIds" in schema:
        return
    named = [t for t in (*CORE_TABLES["kernels"], *CORE_TABLES["api_calls"]) if t in schema]
    if any(con.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone() for t in named):
        raise InputError(
            f"{source} has no StringIds table, so its kernels and CUDA calls have no names",
            "export the report again with: nsys export --type sqlite report.nsys-rep",
        )


# ---------------------------------------------------------------- generic SQL helpers


def _bounded(con: sqlite3.Connection, table: str) -> None:
    """Refuse a table (or a view: it may yield far more rows than the file holds bytes) with
    more rows than nsdiag reads, before reading any."""
    limit = input_source.limit_rows()
    (count,) = con.execute(
        f'SELECT count(*) FROM (SELECT 1 FROM "{table}" LIMIT {limit + 1})'
    ).fetchone()
    if count > limit:
        raise _TooManyRows(table, limit)


def _select(con: sqlite3.Connection, table: str, sql: str, *args: Any) -> sqlite3.Cursor:
    """A query over `table`, after checking its size."""
    _bounded(con, table)
    return con.execute(sql, args)


def _schema(con: sqlite3.Connection) -> Schema:
    tables = [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    ]
    return {t: {r[1]: bool(r[3]) for r in con.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def _query(
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
    rows = _select(con, table, sql).fetchall()
    return pd.DataFrame.from_records(rows, columns=list(columns), coerce_float=False)


def _fetch_ints(
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
        missing = {a: _NO_TIME if a in _TIMES else -1 for a in columns}
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
_NO_TIME = -(1 << 63)
_TIMES = ("start_ns", "end_ns")


def _null_safe(columns: dict[str, str], present: dict[str, bool]) -> dict[str, str]:
    """Every column wrapped in IFNULL: -1 for an id or a size, _NO_TIME for a start or an end."""
    return {
        alias: f"IFNULL({_expr(col, present)}, {_NO_TIME if alias in _TIMES else -1})"
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


def _ints(series: pd.Series, missing: int = -1) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").fillna(missing).to_numpy(dtype="int64")


def _strings(con: sqlite3.Connection, schema: Schema) -> dict[int, str]:
    return (
        dict(_select(con, "StringIds", "SELECT id, value FROM StringIds").fetchall())
        if "StringIds" in schema
        else {}
    )


def _enum(
    con: sqlite3.Connection, schema: Schema, table: str, fallback: dict[int, str]
) -> dict[int, str]:
    """id -> label from an ENUM_* table (CUDA_MEMCPY_KIND_HTOD -> HtoD, ..._KIND_PAGEABLE ->
    pageable, ..._TYPE_STREAM_SYNCHRONIZE -> stream_synchronize), or the CUPTI values when it is
    missing."""
    if "name" not in schema.get(table, {}):
        return dict(fallback)
    out = {}
    for i, name in _select(con, table, f'SELECT id, name FROM "{table}"'):
        label = re.split(r"_(?:KIND|TYPE)_", str(name))[-1]
        out[int(i)] = (
            label.replace("TO", "to")
            if table == "ENUM_CUDA_MEMCPY_OPER" and label != "UNKNOWN"
            else label.lower()
        )
    return out


def _split_ids(global_id: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(process id, thread id) from nsys's serialised global ids."""
    values = _ints(global_id, 0)
    return (values >> 24) & _TID_BITS, values & _TID_BITS


# ---------------------------------------------------------------- tables


def _api_calls(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    columns = {
        "start_ns": "start",
        "end_ns": "end",
        "tid": "globalTid",
        "correlation_id": "correlationId",
        "name_id": "nameId",
    }
    frames = [
        _fetch_ints(con, schema, t, columns)
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
        if t in schema
    ]
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_frame((*API_COLUMNS, "sync_type", "stream", "thread_key", "nvtx_range"))
    raw = pd.concat(frames, ignore_index=True)
    # Names and the sync test are computed once per distinct name id, then spread by index.
    inverse, ids = pd.factorize(raw["name_id"].to_numpy())
    names = pd.Series(_decode(ids, strings, ""), dtype=object).str.replace(
        _VERSION_SUFFIX, "", regex=True
    )
    pid, tid = _split_ids(raw["tid"])
    api = pd.DataFrame(
        {
            "name": names.to_numpy(dtype=object)[inverse],
            "start_ns": raw["start_ns"].to_numpy(),
            "end_ns": raw["end_ns"].to_numpy(),
            "thread_id": tid,
            "process_id": pid,
            "correlation_id": raw["correlation_id"].to_numpy(),
            "thread_key": raw["tid"].to_numpy(),
            "is_sync": names.str.match(BLOCKING_SYNC).to_numpy(dtype=bool)[inverse],
        }
    )
    api["duration_ns"] = api["end_ns"] - api["start_ns"]
    api = _add_sync_records(con, schema, api)
    api = api.iloc[np.argsort(api["start_ns"].to_numpy(), kind="stable")]
    return api[[*API_COLUMNS, "sync_type", "stream", "thread_key"]]


def _add_sync_records(con: sqlite3.Connection, schema: Schema, api: pd.DataFrame) -> pd.DataFrame:
    """What each sync call waited on, from CUPTI's synchronisation records: sync_type and stream.
    Informational only: nsys 2025.3 labels cudaStreamSynchronize 'stream_wait_event' too, and
    cudaDeviceSynchronize has no record, so `is_sync` comes from the API name."""
    sync = _fetch_ints(
        con,
        schema,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        {
            "correlation_id": "correlationId",
            "pid": "globalPid",
            "type": "syncType",
            "stream": "streamId",
        },
    )
    keys = pd.Index(_call_key(_split_ids(sync["pid"])[0], sync["correlation_id"]))
    first = ~keys.duplicated()
    sync, keys = sync[first], keys[first]
    found = keys.get_indexer(_call_key(api["process_id"], api["correlation_id"]))
    types = known_labels(_enum(con, schema, "ENUM_CUPTI_SYNC_TYPE", SYNC_TYPE_CODES), SYNC_TYPES)
    api["sync_type"] = _pick(_decode(sync["type"].to_numpy(), types), found, None)
    api["stream"] = _pick(sync["stream"].to_numpy(), found, -1)
    return api


def _pick(values: np.ndarray, found: np.ndarray, default: object) -> np.ndarray:
    """values[found], with `default` where found is -1 (get_indexer's 'no match')."""
    picked: np.ndarray = np.append(values, np.array([default], dtype=values.dtype))[found]
    return picked


def _call_key(pid: pd.Series | np.ndarray, correlation: pd.Series | np.ndarray) -> np.ndarray:
    """One int64 per (process, correlation id): pids have 24 bits, correlation ids 32 (CUPTI)."""
    return (np.asarray(pid, dtype="int64") << 38) | (
        np.asarray(correlation, dtype="int64") & ((1 << 38) - 1)
    )


def _nvtx(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    """Push/pop and start/end ranges; instant markers (no end) are skipped."""
    columns = {
        "start_ns": "start",
        "end_ns": "end",
        "event_type": "eventType",
        "text": "text",
        "text_id": "textId",
        "tid": "globalTid",
        "domain_id": "domainId",
    }
    types = _range_event_types(con, schema)
    where = f'"end" IS NOT NULL AND eventType IN ({", ".join(map(str, types))})'
    raw = _query(con, schema, "NVTX_EVENTS", columns, where if "NVTX_EVENTS" in schema else "")
    out_columns = [*NVTX_COLUMNS, "thread_key"]
    if not len(raw):
        return empty_frame(tuple(out_columns))
    text = raw["text"].astype("object")
    names = text.where(
        text.notna(), pd.Series(_decode(_ints(raw["text_id"]), strings, ""), dtype=object)
    )
    pid, tid = _split_ids(raw["tid"])
    nvtx = pd.DataFrame(
        {
            "name": names.fillna("").to_numpy(dtype=object),
            "start_ns": _ints(raw["start_ns"]),
            "end_ns": _ints(raw["end_ns"]),
            "thread_id": tid,
            "process_id": pid,
            "domain": _domains(con, schema, raw["domain_id"]),
            "thread_key": _ints(raw["tid"], 0),
        }
    )
    nvtx["duration_ns"] = nvtx["end_ns"] - nvtx["start_ns"]
    nvtx = nvtx.sort_values(
        ["thread_key", "start_ns", "end_ns"], ascending=[True, True, False], kind="stable"
    )
    nvtx["depth"] = _depths(nvtx)
    return nvtx[out_columns]


def _range_event_types(con: sqlite3.Connection, schema: Schema) -> list[int]:
    """Event type ids of NVTX ranges, from ENUM_NSYS_EVENT_TYPE when the export has it."""
    rows = (
        _select(con, "ENUM_NSYS_EVENT_TYPE", "SELECT id, name FROM ENUM_NSYS_EVENT_TYPE").fetchall()
        if "ENUM_NSYS_EVENT_TYPE" in schema
        else []
    )
    return [int(i) for i, n in rows if n in NVTX_RANGE_TYPES.values()] or sorted(NVTX_RANGE_TYPES)


def _domains(con: sqlite3.Connection, schema: Schema, domain_ids: pd.Series) -> np.ndarray:
    """Domain names come from NvtxDomainCreate events (eventType 75); 0 is the default domain."""
    names: dict[int, str] = {}
    if {"domainId", "text"} <= schema.get("NVTX_EVENTS", {}).keys():
        rows = _select(
            con,
            "NVTX_EVENTS",
            "SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75 AND text IS NOT NULL",
        )
        names = {int(d): str(t) for d, t in rows if d is not None}
    return _decode(_ints(domain_ids, 0), names, "")


def _depths(nvtx: pd.DataFrame) -> np.ndarray:
    """Nesting depth: ranges on the same thread open at each range's start (sorted input)."""
    depth = np.zeros(len(nvtx), dtype="int64")
    starts, ends = nvtx["start_ns"].to_numpy(), nvtx["end_ns"].to_numpy()
    for rows in nvtx.groupby("thread_key", sort=False).indices.values():
        # started before it (rows are sorted by start) minus already ended
        depth[rows] = np.maximum(
            np.arange(len(rows)) - np.searchsorted(np.sort(ends[rows]), starts[rows], "right"), 0
        )
    return depth


def _activities(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    frames = [
        f
        for f in (_kernels(con, schema, strings), _copies(con, schema), _memsets(con, schema))
        if len(f)
    ]
    if not frames:
        return empty_frame(_ACTIVITY_COLUMNS)
    timeline = pd.concat(frames, ignore_index=True)
    timeline["duration_ns"] = timeline["end_ns"] - timeline["start_ns"]
    # Stable sort on start (exports are nearly sorted already, which timsort exploits).
    return timeline.iloc[np.argsort(timeline["start_ns"].to_numpy(), kind="stable")].reset_index(
        drop=True
    )


_COMMON = {
    "start_ns": "start",
    "end_ns": "end",
    "device": "deviceId",
    "context": "contextId",
    "stream": "streamId",
    "correlation_id": "correlationId",
    "pid": "globalPid",
}
_PACKED_DIMS = {
    "grid": "(gridX << 32) | (gridY << 16) | gridZ",
    "block": "(blockX << 32) | (blockY << 16) | blockZ",
}


def _common(raw: pd.DataFrame, kind: str) -> pd.DataFrame:
    out = raw[["start_ns", "end_ns", "device", "context", "stream", "correlation_id"]].copy()
    out.insert(0, "kind", kind)
    out["process_id"] = _split_ids(raw["pid"])[0]
    return out


def _decode(values: np.ndarray, mapping: dict[int, str], default: str = "unknown") -> np.ndarray:
    """Map codes to labels once per distinct code."""
    inverse, codes = pd.factorize(values)
    labels = np.array([mapping.get(int(c), default) for c in codes] + [default], dtype=object)
    return labels[inverse] if len(values) else np.empty(0, dtype=object)


def _dims(packed: np.ndarray) -> np.ndarray:
    """'(x, y, z)' text from (x << 32 | y << 16 | z), formatted once per distinct shape."""
    inverse, codes = pd.factorize(packed)
    text = np.array(
        [
            f"({c >> 32}, {(c >> 16) & 0xFFFF}, {c & 0xFFFF})" if c >= 0 else ""
            for c in codes.tolist()
        ]
        + [""],
        dtype=object,
    )
    return text[inverse] if len(packed) else np.empty(0, dtype=object)


def _kernels(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    raw = _fetch_ints(
        con,
        schema,
        "CUPTI_ACTIVITY_KIND_KERNEL",
        {
            **_COMMON,
            "demangled": "demangledName",
            "short": "shortName",
            "mangled": "mangledName",
            **_PACKED_DIMS,
        },
        together=(("device", "context", "stream"), ("demangled", "short")),
    )
    out = _common(raw, "kernel")
    short = _decode(raw["short"].to_numpy(), strings, "")
    name = _decode(raw["demangled"].to_numpy(), strings, "")
    out["name"] = np.where(name == "", short, name)
    out["short_name"] = short
    out["mangled_name"] = _decode(raw["mangled"].to_numpy(), strings, "")
    out["grid"], out["block"] = _dims(raw["grid"].to_numpy()), _dims(raw["block"].to_numpy())
    return out


def _copies(con: sqlite3.Connection, schema: Schema) -> pd.DataFrame:
    raw = _fetch_ints(
        con,
        schema,
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        {**_COMMON, "bytes": "bytes", "copy_kind": "copyKind", "src": "srcKind", "dst": "dstKind"},
    )
    if not len(raw):
        return pd.DataFrame()
    out = _common(raw, "memcpy")
    kinds = _enum(con, schema, "ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS)
    mem = known_labels(_enum(con, schema, "ENUM_CUDA_MEM_KIND", MEM_KINDS), MEMORY_KINDS)
    out["bytes"] = raw["bytes"].to_numpy(dtype="float64")
    out["copy_kind"] = _decode(raw["copy_kind"].to_numpy(), known_labels(kinds, COPY_KINDS))
    out["src_kind"] = _decode(raw["src"].to_numpy(), mem)
    out["dst_kind"] = _decode(raw["dst"].to_numpy(), mem)
    # named by nsys's label, also where the schema calls the direction unknown
    names = {code: f"[CUDA memcpy {COPY_NAMES.get(label, label)}]" for code, label in kinds.items()}
    out["name"] = out["short_name"] = _decode(
        raw["copy_kind"].to_numpy(), names, "[CUDA memcpy unknown]"
    )
    return out


def _memsets(con: sqlite3.Connection, schema: Schema) -> pd.DataFrame:
    raw = _fetch_ints(
        con, schema, "CUPTI_ACTIVITY_KIND_MEMSET", {**_COMMON, "bytes": "bytes", "mem": "memKind"}
    )
    if not len(raw):
        return pd.DataFrame()
    out = _common(raw, "memset")
    out["bytes"] = raw["bytes"].to_numpy(dtype="float64")
    out["dst_kind"] = _decode(
        raw["mem"].to_numpy(),
        known_labels(_enum(con, schema, "ENUM_CUDA_MEM_KIND", MEM_KINDS), MEMORY_KINDS),
    )
    out["name"] = out["short_name"] = "[CUDA memset]"
    return out


# ---------------------------------------------------------------- attribution


def _attribute(timeline: pd.DataFrame, api: pd.DataFrame, nvtx: pd.DataFrame) -> pd.DataFrame:
    """Each activity's launching call (same process and correlation id), and the innermost NVTX
    range open on the launching thread when that call started."""
    if not len(timeline):
        return timeline
    calls = api[api["correlation_id"] > 0]
    keys = pd.Index(_call_key(calls["process_id"], calls["correlation_id"]))
    if not keys.is_unique:  # runtime and driver records of one launch: keep the first (runtime)
        first = ~keys.duplicated()
        calls, keys = calls[first], keys[first]
    found = keys.get_indexer(_call_key(timeline["process_id"], timeline["correlation_id"]))
    for column, source in (
        ("api_start_ns", "start_ns"),
        ("api_end_ns", "end_ns"),
        ("thread_id", "thread_id"),
    ):
        # int64 also when the export has no CUDA calls (an empty table's columns are objects)
        timeline[column] = _pick(calls[source].to_numpy(dtype="int64"), found, -1)
    thread_key = _pick(calls["thread_key"].to_numpy(), found, 0)
    timeline["nvtx_range"] = _range_names(nvtx, thread_key, timeline["api_start_ns"].to_numpy())
    return timeline.reindex(columns=list(_ACTIVITY_COLUMNS))


def _range_names(
    nvtx: pd.DataFrame, thread_keys: np.ndarray | pd.Series, times: np.ndarray | pd.Series
) -> np.ndarray:
    """Name of the innermost NVTX range on `thread_keys[i]` that encloses `times[i]` (NaN if
    none)."""
    out = np.full(len(times), np.nan, dtype=object)
    if not len(nvtx) or not len(times):
        return out
    keys, t = np.asarray(thread_keys, dtype="int64"), np.asarray(times, dtype="int64")
    names = nvtx["name"].to_numpy(dtype=object)
    for key, rows in nvtx.groupby("thread_key", sort=False).indices.items():
        wanted = np.flatnonzero(keys == key)
        if not len(wanted):
            continue
        found = enclosing(
            nvtx["start_ns"].to_numpy()[rows], nvtx["end_ns"].to_numpy()[rows], t[wanted]
        )
        hit = found >= 0
        out[wanted[hit]] = names[rows[found[hit]]]
    return out


# ---------------------------------------------------------------- meta


def _meta(con: sqlite3.Connection, schema: Schema, source: str) -> SessionMeta:
    devices = _devices(con, schema)
    info = (
        dict(
            _select(con, "META_DATA_EXPORT", "SELECT name, value FROM META_DATA_EXPORT").fetchall()
        )
        if "META_DATA_EXPORT" in schema
        else {}
    )
    host, start, rank_env = _recording(con, schema)
    return SessionMeta(
        sources=(Source(source, "nsys-sqlite"),),
        device=devices[0] if devices else None,
        devices=tuple(devices) if devices else None,
        nsys_version=str(info["EXPORT_PRODUCT_VERSION"])
        if info.get("EXPORT_PRODUCT_VERSION")
        else None,
        host=host,
        session_start_utc_ns=start,
        rank_env=rank_env,
    )


# Launcher variables that say which rank a process is (torchrun, SLURM, Open MPI, MPICH/PMI).
RANK_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMIX_RANK",
    "PMI_SIZE",
)
_RANK_DIGITS = 9  # ranks and world sizes below 10^9
_RANK_VARIABLE = re.compile(rf"(?:^|;)({'|'.join(RANK_VARIABLES)})=\"?(\d+)")


def _recording(
    con: sqlite3.Connection, schema: Schema
) -> tuple[str | None, int | None, dict[str, int] | None]:
    """Where and when the report was recorded, for merging one report per rank: the host, the
    session's start (UTC ns: every timestamp counts from it) and the launcher's rank variables
    in the environment of the process nsys started (only those: an environment holds secrets);
    None for what the export does not say."""
    host: str | None = None
    start: int | None = None
    system = (
        dict(
            _select(
                con, "TARGET_INFO_SYSTEM_ENV", "SELECT name, value FROM TARGET_INFO_SYSTEM_ENV"
            ).fetchall()
        )
        if {"name", "value"} <= schema.get("TARGET_INFO_SYSTEM_ENV", {}).keys()
        else {}
    )
    if system.get("Hostname"):
        host = str(system["Hostname"])
    if "utcEpochNs" in schema.get("TARGET_INFO_SESSION_START_TIME", {}):
        row = _select(
            con,
            "TARGET_INFO_SESSION_START_TIME",
            "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME",
        ).fetchone()
        if row and row[0] is not None:
            start = int(row[0])
    captured = (
        [
            str(v)
            for (v,) in _select(
                con,
                "META_DATA_CAPTURE",
                "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE'",
            )
        ]
        if {"name", "value"} <= schema.get("META_DATA_CAPTURE", {}).keys()
        else []
    )
    # nsys's own environment (DeviceEnvironment) when the capture lists none
    texts = captured or [str(system.get("DeviceEnvironment", ""))]
    # a number no launcher gives (RANK=99999999999999999999) is not a rank: left out
    found = {
        m[1]: int(m[2])
        for text in texts
        for m in _RANK_VARIABLE.finditer(text)
        if len(m[2]) <= _RANK_DIGITS
    }
    return host, start, found or None


_GPU_FIELDS = {
    "id": "id",
    "name": "name",
    "sm_count": "smCount",
    "clock_hz": "clockRate",
    "memory_bandwidth_bytes_per_s": "memoryBandwidth",
    "l2_bytes": "l2CacheSize",
    "total_memory_bytes": "totalMemory",
    "bus": "busLocation",
    "chip": "chipName",
    "async_engines": "asyncEngines",
    "cuda_device": "cuDevice",
    "cc_major": "computeMajor",
    "cc_minor": "computeMinor",
}


# nsys 2021 exports name the GPU table TARGET_INFO_CUDA_GPU (the same columns it reads)
GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU")


def _devices(con: sqlite3.Connection, schema: Schema) -> list[dict[str, Any]]:
    table = next((t for t in GPU_TABLES if t in schema), GPU_TABLES[0])
    frame = _query(con, schema, table, _GPU_FIELDS)
    devices = []
    for row in frame.to_dict("records"):
        info = {
            str(k): (v.item() if hasattr(v, "item") else v)
            for k, v in row.items()
            if v is not None and not pd.isna(v)
        }
        if "cc_major" in info:
            info["cc"] = f"{int(info.pop('cc_major'))}.{int(info.pop('cc_minor', 0))}"
        devices.append(info)
    return devices
