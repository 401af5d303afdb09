"""Small synthetic nsys SQLite exports of older schemas, made from a current recording.

`nsys export` of a fresh report writes today's schema only, so the older ones are rebuilt from
an H200 recording (tests/data/nsys/*.sqlite.gz, nsys 2025.3) by renaming and dropping what the
older schema did not have, as NVIDIA's exporter documentation describes it ("SQLite Export
Schema Reference", Nsight Systems 2021.5: every column declared NOT NULL, a default value
exported where the value is missing). No recorded value is changed except where a schema had
no room for it (a NULL becomes the exporter's default, 0) and the one binary cell of the 2022.2
case. docs/recording-versions.md lists what each schema changes.
"""

from __future__ import annotations

import gzip
import sqlite3
from collections.abc import Callable
from pathlib import Path

# Kernel-table columns of today's exports that the 2021 and 2022.2 tables lack: the raw mangled
# name (ncu's --kernel-name-base mangled), green contexts (CUDA 12.4), the shared-memory limit.
LATER_KERNEL_COLUMNS = ["mangledName", "greenContextId", "sharedMemoryLimitConfig"]
# The bytes of the one cell of TARGET_INFO_SYSTEM_ENV that made a 2022.2.1 export unreadable:
# a CPU description as the kernel reported it, with bytes that are not UTF-8.
BINARY_CPU_TEXT = b"Intel(R) Xeon(R) \xff\xfe\x80 CPU @ 2.20GHz"
CORE_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)


def _tables(con: sqlite3.Connection, prefix: str = "") -> list[str]:
    rows = con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?", (prefix + "%",)
    )
    return [r[0] for r in rows]


def _columns(con: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    return [(r[1], r[2] or "INTEGER") for r in con.execute(f'PRAGMA table_info("{table}")')]


def drop_columns(con: sqlite3.Connection, table: str, columns: list[str]) -> None:
    present = {c for c, _ in _columns(con, table)}
    for column in columns:
        if column in present:
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')


def all_not_null(con: sqlite3.Connection, table: str) -> None:
    """The table rebuilt with every column NOT NULL and NULLs as the exporter's default (0 for
    numbers, '' for text), as nsys 2021 wrote it."""
    columns = _columns(con, table)
    if not columns:
        return
    declared = ", ".join(f'"{c}" {t} NOT NULL' for c, t in columns)
    values = ", ".join(
        f'IFNULL("{c}", {"0" if "INT" in t.upper() or "REAL" in t.upper() else chr(39) * 2})'
        for c, t in columns
    )
    con.execute(f'CREATE TABLE "{table}_old" ({declared})')
    con.execute(f'INSERT INTO "{table}_old" SELECT {values} FROM "{table}"')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE "{table}_old" RENAME TO "{table}"')


def nsys_2021(con: sqlite3.Connection) -> None:
    """nsys 2021.x: no mangledName (nor the later kernel columns), the GPU table named
    TARGET_INFO_CUDA_GPU, no ENUM_* tables (readers fall back to CUPTI's codes), no
    META_DATA_CAPTURE, and every column of the activity tables NOT NULL."""
    drop_columns(con, "CUPTI_ACTIVITY_KIND_KERNEL", LATER_KERNEL_COLUMNS)
    if "TARGET_INFO_GPU" in _tables(con, "TARGET_INFO_GPU"):
        con.execute("ALTER TABLE TARGET_INFO_GPU RENAME TO TARGET_INFO_CUDA_GPU")
    for table in [*_tables(con, "ENUM_"), *_tables(con, "META_DATA_CAPTURE")]:
        con.execute(f'DROP TABLE "{table}"')
    for table in CORE_TABLES:
        if table in _tables(con, table):
            all_not_null(con, table)


def nsys_2022_2(con: sqlite3.Connection) -> None:
    """nsys 2022.2: no mangledName (nor the later kernel columns), and binary bytes in a TEXT
    cell of TARGET_INFO_SYSTEM_ENV (the 2022.2.1 export a user could not read)."""
    drop_columns(con, "CUPTI_ACTIVITY_KIND_KERNEL", LATER_KERNEL_COLUMNS)
    con.execute(
        "UPDATE TARGET_INFO_SYSTEM_ENV SET value = CAST(? AS TEXT) WHERE name = 'CpuDescription'",
        (BINARY_CPU_TEXT,),
    )


def nsys_2023(con: sqlite3.Connection) -> None:
    """nsys 2023.x: mangledName is there, green contexts are not."""
    drop_columns(con, "CUPTI_ACTIVITY_KIND_KERNEL", ["greenContextId"])


SCHEMAS: dict[str, Callable[[sqlite3.Connection], None]] = {
    "2021": nsys_2021,
    "2022.2": nsys_2022_2,
    "2023": nsys_2023,
}


def old_schema_export(recording: Path, target: Path, schema: str) -> Path:
    """`recording` (a gzipped current export) rewritten as nsys `schema` exported it."""
    target.write_bytes(gzip.decompress(recording.read_bytes()))
    con = sqlite3.connect(target)
    try:
        SCHEMAS[schema](con)
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    return target
