"""Reader for Nsight Systems SQLite exports (`nsys export --type sqlite`), plain or gzipped.

Only the standard library's sqlite3 touches the file, through readers/sqlite_query.py (queries
bounded by the row limit, integer columns into numpy): a million launches cost one query per
table and no per-row Python. readers/nsys_tables.py decodes each table (every one optional),
readers/nsys_attribution.py finds each activity's launching call and NVTX range, and
readers/nsys_environment.py where, when and as which rank the report was recorded; this module
opens the file, checks it is an nsys export and puts the Session together.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from nsdiag.errors import InputError
from nsdiag.model.meta import SessionMeta, Source
from nsdiag.model.session import Session
from nsdiag.readers import source as input_source
from nsdiag.readers.nsys_attribution import attribute, range_names
from nsdiag.readers.nsys_environment import recording
from nsdiag.readers.nsys_tables import activities, api_calls, gpu_devices, nvtx_ranges, string_ids
from nsdiag.readers.sqlite_query import (
    Schema,
    TooManyRows,
    TooMuchWork,
    has_rows,
    schema_of,
    select,
    text_of_cell,
)
from nsdiag.readers.validate import intervals


def read(path: Path) -> Session:
    # `.gz` exports (told by their first bytes) are decompressed to a file first, bounded
    with input_source.plain_file(path, "sqlite", "export.sqlite") as db_path:
        try:
            con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open {path}: {exc}", "pass an nsys SQLite export") from exc
        con.text_factory = text_of_cell
        try:
            return read_connection(con, source=str(path))
        except TooManyRows as exc:
            bound = exc.bound
            raise input_source.too_many_rows(path, exc.table, bound.rows, bound.by_file) from exc
        except TooMuchWork as exc:
            bound = exc.bound
            raise input_source.too_much_work(path, exc.table, bound.rows, bound.by_file) from exc
        except (sqlite3.DatabaseError, ValueError, OverflowError) as exc:
            # not SQLite, a truncated or damaged file, or text where ids belong
            raise InputError(
                f"{path} is not a readable SQLite database: {exc}",
                "export it with: nsys export --type sqlite report.nsys-rep",
            ) from exc
        finally:
            con.close()


def read_connection(con: sqlite3.Connection, source: str = "") -> Session:
    """The Session held by an open nsys export."""
    schema = schema_of(con)
    where = source or "database"
    if not any(
        t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "TARGET_INFO")) for t in schema
    ):
        raise InputError(
            f"{where} has no Nsight Systems tables",
            "export the report with: nsys export --type sqlite report.nsys-rep",
        )
    _check_names_table(con, schema, where)
    strings = string_ids(con, schema)
    api, warnings = intervals(api_calls(con, schema, strings), "CUDA API calls", where)
    nvtx, found = intervals(nvtx_ranges(con, schema, strings), "NVTX ranges", where)
    timeline, more = intervals(activities(con, schema, strings), "GPU activities", where)
    timeline = attribute(timeline, api, nvtx)
    api = api.assign(nvtx_range=range_names(nvtx, api["thread_key"], api["start_ns"]))
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
    if any(has_rows(con, t) for t in named):
        raise InputError(
            f"{source} has no StringIds table, so its kernels and CUDA calls have no names",
            "export the report again with: nsys export --type sqlite report.nsys-rep",
        )


def _meta(con: sqlite3.Connection, schema: Schema, source: str) -> SessionMeta:
    devices = gpu_devices(con, schema)
    info = (
        dict(select(con, "META_DATA_EXPORT", "name, value")) if "META_DATA_EXPORT" in schema else {}
    )
    host, start, rank_env = recording(con, schema)
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
