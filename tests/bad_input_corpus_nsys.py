"""Wild-input cases (issue 27) for the nsys side, added to tests/bad_input_corpus.CASES.

Same contract as tests/bad_input_corpus.py: each case is built from a real H200 recording
(cut, edited or re-saved by the function that names it), or is a small synthetic file made from
the documented format. Older nsys schemas come from tests/nsys_old_schemas.py.
"""

from __future__ import annotations

import gzip
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bad_input_corpus import (
    DATA,
    PIPELINE,
    REFERENCE_RAW,
    SYNC_HEAVY,
    TRACE,
    Answered,
    Case,
    Refused,
    all_of,
    launches,
    plain_copy,
    rows_of,
    sqlite_copy,
)
from tests.nsys_old_schemas import old_schema_export

DDP = DATA / "multi_gpu/ddp_balanced.sqlite.gz"  # one trace holding both ranks' processes
RANK0 = DATA / "multi_gpu/ddp_straggler_rank0.sqlite.gz"
RANK1 = DATA / "multi_gpu/ddp_straggler_rank1.sqlite.gz"
OTHER_RANK0 = DATA / "multi_gpu/verify2/ddp_balanced_rank0.sqlite.gz"  # another run's rank 0
KERN_SUM = DATA / "nsys/sync_heavy_stats_cuda_gpu_kern_sum.csv.gz"
API_SUM = DATA / "nsys/sync_heavy_stats_cuda_api_sum.csv.gz"
OTHER_TRACE = DATA / "nsys/sync_heavy_stats_cuda_gpu_trace.csv.gz"  # another program's


# ------------------------------------------------------------------------------ builders


def old_schema(schema: str, recording: Path = SYNC_HEAVY) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [str(old_schema_export(recording, tmp / f"nsys_{schema}.sqlite", schema))]

    return build


def qdrep(tmp: Path) -> list[str]:
    """A report under its pre-2021.4 name (its bytes do not matter: it cannot be read without
    nsys, and nsys is what turns it into an export)."""
    path = tmp / "old report.qdrep"
    path.write_bytes(b"QDREP stand-in")
    return [str(path)]


def two_processes_without_nccl(tmp: Path) -> list[str]:
    """The two-rank DDP trace with its NCCL kernels deleted: two GPU processes that never
    communicate (two independent jobs under one nsys)."""
    statement = (
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE shortName IN "
        "(SELECT id FROM StringIds WHERE value LIKE 'nccl%')"
    )
    return [str(sqlite_copy(DDP, tmp / "two_jobs.sqlite", statement))]


def copies_of_one_report(tmp: Path) -> list[str]:
    copy = tmp / "copy_of_pipeline.sqlite.gz"
    copy.write_bytes(PIPELINE.read_bytes())
    return [str(PIPELINE), str(copy)]


def two_rank_zeros(tmp: Path) -> list[str]:
    """Rank 0 of the straggler run and rank 0 of another run: both say RANK=0."""
    return [
        str(plain_copy(RANK0, tmp / "a.sqlite")),
        str(plain_copy(OTHER_RANK0, tmp / "b.sqlite")),
    ]


def huge_rank(tmp: Path) -> list[str]:
    """The straggler run's two per-rank reports, rank 1's RANK variable edited to 10^23."""
    first = plain_copy(RANK0, tmp / "rep_rank0.sqlite")
    second = sqlite_copy(
        RANK1,
        tmp / "rep_rank1.sqlite",
        "UPDATE META_DATA_CAPTURE SET value = 'RANK=\"99999999999999999999999\"' "
        "WHERE value LIKE 'RANK=%'",
    )
    return [str(first), str(second)]


def null_in_not_null(tmp: Path) -> list[str]:
    """Two kernels' start left NULL although the schema says NOT NULL (the declaration edited
    away and back, as a damaged or hand-edited file has it)."""
    path = plain_copy(PIPELINE, tmp / "null_start.sqlite")
    con = sqlite3.connect(path)
    (table_sql,) = con.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
    ).fetchone()
    con.execute("PRAGMA writable_schema = ON")
    con.execute(
        "UPDATE sqlite_master SET sql = ? WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'",
        (table_sql.replace("NOT NULL", ""),),
    )
    con.commit()
    con.close()
    con = sqlite3.connect(path)
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL WHERE rowid IN "
        "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 2)"
    )
    con.execute("PRAGMA writable_schema = ON")
    con.execute(
        "UPDATE sqlite_master SET sql = ? WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'", (table_sql,)
    )
    con.commit()
    con.close()
    return [str(path)]


def view_of_a_billion_rows(tmp: Path) -> list[str]:
    """The kernel table replaced by a view that repeats its rows to 10^9 (the file stays small:
    the size limit counts bytes, the view computes rows)."""
    path = plain_copy(PIPELINE, tmp / "view.sqlite")
    con = sqlite3.connect(path)
    (rows,) = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO KERNEL_ROWS")
    con.execute(
        "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
        f"SELECT i + 1 FROM n WHERE i < {10**9 // rows}) SELECT k.* FROM KERNEL_ROWS AS k, n"
    )
    con.commit()
    con.close()
    return [str(path)]


# A tiny export from the documented schema (the columns nsdiag reads of StringIds and the
# kernel table): TINY_KERNELS launches of one kernel, in back-to-back bursts on one stream.
TINY_KERNELS = 1000
_TINY_SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE KERNEL_ROWS (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL);
"""
_TINY_PID = (1 << 24 | 4242) << 24
# Views that stand in for the kernel table, each over a cross join of KERNEL_ROWS with itself
# (10^9 rows): rows cheap to yield; a sort that needs them all first; a filter that keeps none;
# a group per row.
CROSS_JOIN = "KERNEL_ROWS AS a, KERNEL_ROWS AS b, KERNEL_ROWS AS c"
JOIN = f"FROM {CROSS_JOIN}"
VIEWS = {
    "cross join": f"SELECT a.* {JOIN}",
    "sorted cross join": f"SELECT a.* {JOIN} ORDER BY b.start DESC, c.start",
    "filtered cross join": f"SELECT a.* {JOIN} WHERE a.start + b.start + c.start < 0",
    "grouped cross join": f"SELECT a.* {JOIN} GROUP BY c.rowid",
}


def tiny_export(path: Path, kernel_view: str | None = None, strings_view: bool = False) -> Path:
    """A ~50 kB export; `kernel_view`: CUPTI_ACTIVITY_KIND_KERNEL is that view over KERNEL_ROWS
    (else the table itself); `strings_view`: StringIds a cross join repeating its rows."""
    con = sqlite3.connect(path)
    con.executescript(_TINY_SCHEMA)
    con.execute("INSERT INTO StringIds VALUES (1, 'elementwise_kernel'), (2, 'elementwise')")
    con.executemany(
        "INSERT INTO KERNEL_ROWS VALUES (?, ?, 0, 1, 7, ?, ?, 1, 2, 256, 1, 1, 128, 1, 1)",
        [(10_000 * i, 10_000 * i + 2_000, i + 1, _TINY_PID) for i in range(TINY_KERNELS)],
    )
    kernels = kernel_view or "SELECT * FROM KERNEL_ROWS"
    con.execute(f"CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS {kernels}")
    if strings_view:
        con.execute("ALTER TABLE StringIds RENAME TO STRINGS")
        con.execute(f"CREATE VIEW StringIds AS SELECT s.* FROM STRINGS AS s, {CROSS_JOIN}")
    con.commit()
    con.close()
    return path


def view_of(shape: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [str(tiny_export(tmp / f"{shape.replace(' ', '_')}.sqlite", VIEWS[shape]))]


def strings_cross_join(tmp: Path) -> list[str]:
    return [str(tiny_export(tmp / "strings_view.sqlite", strings_view=True))]


def header_only_trace(tmp: Path) -> list[str]:
    path = tmp / "header_only_cuda_gpu_trace.csv"
    path.write_text(gzip.decompress(TRACE.read_bytes()).decode().split("\n", 1)[0] + "\n")
    return [str(path)]


def traces_of_two_programs(tmp: Path) -> list[str]:
    return [str(TRACE), str(OTHER_TRACE)]


def kernel_filter(source: Path, pattern: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [str(source), "--kernel", pattern]


# ------------------------------------------------------------------------------ checks


def _summary_rows() -> list[list[str]]:
    return rows_of(KERN_SUM)


def like_the_current_export(doc: dict[str, Any]) -> None:
    """The older schema reads as the recording it was made from does: the H200, every
    activity, the same findings."""
    assert doc["device"]["name"] == "NVIDIA H200", doc["device"]
    assert doc["meta"]["timeline"]["activities"] == {"kernel": 1042, "memcpy": 1}, doc["meta"]
    assert {f["cause"] for f in doc["program_findings"]} == {"launch-bound", "sync-heavy"}


def two_ranks_no_collectives(doc: dict[str, Any]) -> None:
    ranks = doc["ranks"]
    assert len(ranks["ranks"]) == 2 and ranks["collectives"] == 0, ranks
    assert ranks["late_rank"] is None
    assert all(r["communication_ns"] == 0 for r in ranks["ranks"])


def _kernel_rows(recording: Path) -> int:
    con = sqlite3.connect(":memory:")
    con.deserialize(gzip.decompress(recording.read_bytes()))
    (count,) = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    con.close()
    return int(count)


def one_rank(doc: dict[str, Any]) -> None:
    """The copy counted once: one process, each kernel once."""
    assert not doc.get("ranks"), doc.get("ranks")
    assert doc["meta"]["timeline"]["activities"]["kernel"] == _kernel_rows(PIPELINE)


def ranks_by_file_name(doc: dict[str, Any]) -> None:
    """RANK=10^23 is no rank: both reports are numbered by their names (rep_rank0, rep_rank1)."""
    ranks = [(r["rank"], r["rank_from"]) for r in doc["ranks"]["ranks"]]
    assert ranks == [(0, "file-name"), (1, "file-name")], ranks


def summary_kernel_table(doc: dict[str, Any]) -> None:
    """One kernel per summary row, by total time, with its instances and share."""
    rows = _summary_rows()
    header = rows[0]
    total, count = header.index("Total Time (ns)"), header.index("Instances")
    expected = [(float(r[total]), int(r[count])) for r in rows[1:]]
    got = [(k["duration_ns"], k["launches"]) for k in doc["kernels"]]
    assert got == expected, got
    assert abs(doc["total_gpu_time_ns"] - sum(t for t, _ in expected)) < 1
    assert abs(doc["kernels"][0]["time_share"] - 0.978) < 0.001, doc["kernels"][0]


def program_findings_kept(doc: dict[str, Any]) -> None:
    assert {f["cause"] for f in doc["program_findings"]} == {"launch-bound", "sync-heavy"}


def two_ranks(doc: dict[str, Any]) -> None:
    assert len(doc["ranks"]["ranks"]) == 2, doc.get("ranks")


def _api_sum_first_name() -> str:
    rows = rows_of(API_SUM)
    return rows[1][rows[0].index("Name")]


def names_top_call(doc: dict[str, Any]) -> None:
    assert any(_api_sum_first_name() in w for w in doc["warnings"]), doc["warnings"]


# ------------------------------------------------------------------------------ the cases

CASES: tuple[Case, ...] = (
    # exports of older schemas (tests/nsys_old_schemas.py)
    Case(
        "nsys 2022.2 binary TEXT cell", old_schema("2022.2"), Answered("", like_the_current_export)
    ),
    Case("nsys 2021 schema", old_schema("2021"), Answered("", like_the_current_export)),
    Case(".qdrep without an export", qdrep, Refused("nsys export")),
    # distributed traces and per-rank reports
    Case(
        "two processes, no NCCL kernels",
        two_processes_without_nccl,
        Answered("", two_ranks_no_collectives),
    ),
    Case("two copies of one nsys report", copies_of_one_report, Answered("same trace", one_rank)),
    Case("two reports say rank 0", two_rank_zeros, Answered("rank 0", two_ranks)),
    Case("huge RANK", huge_rank, Answered("", ranks_by_file_name)),
    # damaged exports
    Case("NULL in a NOT NULL column", null_in_not_null, Answered("no valid interval")),
    Case(
        "nsys without StringIds",
        lambda t: [str(sqlite_copy(PIPELINE, t / "no_strings.sqlite", "DROP TABLE StringIds"))],
        Refused("StringIds"),
    ),
    Case("view of 10^9 kernel rows", view_of_a_billion_rows, Refused("rows", isolated=True)),
    # a tiny export whose kernel table (or StringIds) is a view over a 10^9-row cross join:
    # stopped at the rows or the work a file of its size can hold, whatever the view does
    *(
        Case(f"tiny export, kernels a {shape}", view_of(shape), Refused("rows", isolated=True))
        for shape in VIEWS
    ),
    Case("tiny export, StringIds a cross join", strings_cross_join, Refused("rows", isolated=True)),
    Case(
        "tiny export, a cross join under a lowered row limit",
        view_of("cross join"),
        Refused("NSDIAG_MAX_INPUT_ROWS", env={"NSDIAG_MAX_INPUT_ROWS": "100"}, isolated=True),
    ),
    Case(
        "row limit lowered by the user",
        lambda t: [str(SYNC_HEAVY)],
        Refused("NSDIAG_MAX_INPUT_ROWS", env={"NSDIAG_MAX_INPUT_ROWS": "1000"}),
    ),
    Case(
        "row limit not a number",
        lambda t: [str(SYNC_HEAVY)],
        Refused("NSDIAG_MAX_INPUT_ROWS", env={"NSDIAG_MAX_INPUT_ROWS": "many"}, names_file=False),
    ),
    # nsys stats CSVs
    Case("nsys stats trace, header only", header_only_trace, Refused("no rows")),
    Case("nsys stats traces of two programs", traces_of_two_programs, Answered("no start time")),
    Case(
        "nsys stats kernel summary",
        lambda t: [str(KERN_SUM)],
        Answered("no per-launch metrics", summary_kernel_table),
    ),
    Case(
        "nsys stats API summary",
        lambda t: [str(API_SUM)],
        Answered("most time", all_of(names_top_call, launches(0))),
    ),
    # --kernel
    Case(
        "--kernel on an nsys export",
        kernel_filter(SYNC_HEAVY, "ELEMENTWISE"),
        Answered("matched 1042 of 1042", program_findings_kept),
    ),
    Case(
        "--kernel ignores case", kernel_filter(REFERENCE_RAW, "NSDIAG::"), Answered("", launches(3))
    ),
)
