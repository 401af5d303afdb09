"""A corpus of bad, hostile and unusual inputs, built from the real H200 recordings in tests/data
(synthetic: each file is a recording cut, corrupted, edited or re-saved by the function that
names it; no metric value is invented except the edited cell a case is about).

Each case is the command-line arguments of `nsdiag explain` and what must happen: `Refused`
(exit code 2 and one line on stderr naming the file) or `Answered` (exit code 0, a warning that
contains the given words, and a check of the JSON diagnosis).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
REFERENCE_RAW = DATA / "reference/raw.csv.gz"
REFERENCE_DETAILS = DATA / "reference/details.csv.gz"
SMALL_RAW = DATA / "calib_small/raw.csv.gz"
SMALL_REP = DATA / "calib_small/report.ncu-rep.gz"
SYNC_HEAVY = DATA / "nsys/sync_heavy.sqlite.gz"
PIPELINE = DATA / "nsys/pipeline.sqlite.gz"
TRACE = DATA / "nsys/tiny_burst_stats_cuda_gpu_trace.csv.gz"
INCOMPLETE_SESSION = DATA / "programs/train_loader"
COMPLETE_SESSION = DATA / "programs/elementwise"
DURATION = "gpu__time_duration.sum"

Check = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Refused:
    words: str  # in the one line on stderr (the file's name is checked too)
    env: dict[str, str] = field(default_factory=dict)
    isolated: bool = False  # may hang or eat memory on a broken reader: run in a subprocess
    names_file: bool = True  # False: the error is about a setting, not a file


@dataclass(frozen=True)
class Answered:
    warning: str  # in one of the diagnosis' warnings ("" : none expected)
    check: Check | None = None
    env: dict[str, str] = field(default_factory=dict)
    isolated: bool = False


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path], list[str]]  # folder -> explain's arguments (files made there)
    expect: Refused | Answered


# ------------------------------------------------------------------------------ helpers


def text_of(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode()


def rows_of(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text_of(path))))


def write_rows(path: Path, rows: list[list[str]], quoting: int = csv.QUOTE_ALL) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, quoting=quoting, lineterminator="\n").writerows(rows)
    path.write_text(buffer.getvalue())
    return path


def with_cell(path: Path, source: Path, column: str, row: int, value: str) -> Path:
    """`source`'s raw export with one cell of launch row `row` (0-based, after the units row)
    replaced."""
    rows = rows_of(source)
    rows[2 + row][rows[0].index(column)] = value
    return write_rows(path, rows)


def plain_copy(source: Path, target: Path) -> Path:
    target.write_bytes(gzip.decompress(source.read_bytes()))
    return target


def sqlite_copy(source: Path, target: Path, *statements: str) -> Path:
    plain_copy(source, target)
    con = sqlite3.connect(target)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return target


def session_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def reference_total_ns() -> float:
    """Total duration of the reference export's launches, from the file itself."""
    rows = rows_of(REFERENCE_RAW)
    column = rows[0].index(DURATION)
    return sum(float(r[column].replace(",", "")) for r in rows[2:])


def warnings_of(doc: dict[str, Any]) -> list[str]:
    return list(doc.get("warnings", []))


def causes(doc: dict[str, Any]) -> set[str]:
    return {f["cause"] for f in doc["program_findings"]}


# ------------------------------------------------------------------------------ builders


def fifo(tmp: Path) -> list[str]:
    os.mkfifo(tmp / "pipe.csv")
    return [str(tmp / "pipe.csv")]


def link_to_dev_zero(name: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        os.symlink("/dev/zero", tmp / name)
        return [str(tmp / name)]

    return build


def gzip_bomb_of_zeros(tmp: Path) -> list[str]:
    """A valid raw header, then 3 GB of zero bytes in 3 MB of gzip."""
    header = text_of(REFERENCE_RAW).split("\n", 1)[0] + "\n"
    zeros = gzip.compress(bytes(100 << 20), 9)
    path = tmp / "bomb.csv.gz"
    path.write_bytes(gzip.compress(header.encode()) + zeros * 30)
    return [str(path)]


def gzip_one_huge_field(tmp: Path) -> list[str]:
    """'"ID",' and then a single field of 200 MB of '0' (no newline) in 200 KB of gzip: the
    header scan must bound the line and not hand it to the csv module whole."""
    path = tmp / "field.csv.gz"
    path.write_bytes(gzip.compress(b'"ID",' + b"0" * (200 << 20), 9))
    return [str(path)]


def gzip_bomb_of_rows(tmp: Path) -> list[str]:
    """The reference export's header and units row, then its first launch row repeated until it
    inflates past 64 MB (the limit the case sets)."""
    lines = text_of(REFERENCE_RAW).split("\n")
    member = gzip.compress(("\n".join(lines[2:3]) + "\n").encode() * 2000, 9)
    path = tmp / "rows.csv.gz"
    path.write_bytes(gzip.compress(("\n".join(lines[:2]) + "\n").encode()) + member * 3)
    return [str(path)]


def sparse_huge(tmp: Path) -> list[str]:
    path = tmp / "huge.csv"
    with path.open("wb") as handle:
        handle.write(text_of(REFERENCE_RAW).encode())
        handle.truncate(64 << 30)  # 64 GB, no blocks on disk
    return [str(path)]


def truncated_gzip(tmp: Path) -> list[str]:
    path = tmp / "cut.csv.gz"
    path.write_bytes(REFERENCE_RAW.read_bytes()[:40_000])
    return [str(path)]


def corrupted_gzip(tmp: Path) -> list[str]:
    data = bytearray(REFERENCE_RAW.read_bytes())
    for i in range(20_000, 20_400):
        data[i] ^= 0x5A
    path = tmp / "bad.csv.gz"
    path.write_bytes(bytes(data))
    return [str(path)]


def truncated_rep(tmp: Path) -> list[str]:
    data = gzip.decompress(SMALL_REP.read_bytes())
    path = tmp / "cut.ncu-rep"
    path.write_bytes(data[: len(data) // 2])
    return [str(path)]


def corrupted_rep(tmp: Path) -> list[str]:
    data = bytearray(gzip.decompress(SMALL_REP.read_bytes()))
    for i in range(1000, len(data), 997):
        data[i] ^= 0xFF
    path = tmp / "bad.ncu-rep"
    path.write_bytes(bytes(data))
    return [str(path)]


def truncated_sqlite(tmp: Path) -> list[str]:
    data = gzip.decompress(SYNC_HEAVY.read_bytes())
    path = tmp / "cut.sqlite"
    path.write_bytes(data[: len(data) // 3])
    return [str(path)]


def zeroed_sqlite(tmp: Path) -> list[str]:
    data = gzip.decompress(SYNC_HEAVY.read_bytes())
    path = tmp / "zeroed.sqlite"
    path.write_bytes(data[:4096] + bytes(len(data) - 4096))
    return [str(path)]


def truncated_sqlite_gz(tmp: Path) -> list[str]:
    path = tmp / "cut.sqlite.gz"
    path.write_bytes(SYNC_HEAVY.read_bytes()[:100_000])
    return [str(path)]


def session_with_manifest(text: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        folder = session_copy(COMPLETE_SESSION, tmp / "session")
        (folder / "session.json").write_text(text)
        return [str(folder)]

    return build


def session_without_columns(tmp: Path) -> list[str]:
    folder = session_copy(COMPLETE_SESSION, tmp / "session")
    manifest = json.loads((folder / "session.json").read_text())
    del manifest["columns"]
    (folder / "session.json").write_text(json.dumps(manifest))
    return [str(folder)]


def session_with_cut_table(tmp: Path) -> list[str]:
    folder = session_copy(COMPLETE_SESSION, tmp / "session")
    table = folder / "tables/timeline.csv.gz"
    table.write_bytes(table.read_bytes()[:2000])
    return [str(folder)]


def session_with_status(text: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        folder = session_copy(COMPLETE_SESSION, tmp / "session")
        (folder / "status.json").write_text(text)
        return [str(folder)]

    return build


def named(name: str, content: bytes) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        (tmp / name).write_bytes(content)
        return [str(tmp / name)]

    return build


def details_without_rows(tmp: Path) -> list[str]:
    header = text_of(REFERENCE_DETAILS).split("\n", 1)[0]
    return [str(named("details.csv", (header + "\n").encode())(tmp)[0])]


def cell(
    column: str, row: int, value: str, name: str = "edited.csv"
) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [str(with_cell(tmp / name, REFERENCE_RAW, column, row, value))]

    return build


def cut_mid_row(tmp: Path) -> list[str]:
    text = text_of(REFERENCE_RAW)
    lines = text.split("\n")
    kept = "\n".join(lines[:12]) + "\n" + lines[12][: len(lines[12]) // 2]
    path = tmp / "cut.csv"
    path.write_text(kept)
    return [str(path)]


def with_bom(tmp: Path) -> list[str]:
    path = tmp / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + text_of(REFERENCE_RAW).encode())
    return [str(path)]


def minimal_quoting(tmp: Path) -> list[str]:
    import pandas as pd

    frame = pd.read_csv(io.StringIO(text_of(REFERENCE_RAW)), dtype=str, keep_default_na=False)
    path = tmp / "resaved.csv"
    frame.to_csv(path, index=False)  # pandas' default: minimal quoting
    return [str(path)]


def bom_and_minimal_details(tmp: Path) -> list[str]:
    import pandas as pd

    frame = pd.read_csv(
        io.StringIO(text_of(DATA / "calib_small/details.csv.gz")), dtype=str, keep_default_na=False
    )
    path = tmp / "details.csv"
    frame.to_csv(path, index=False, encoding="utf-8-sig")
    return [str(path)]


def with_console_noise(tmp: Path) -> list[str]:
    path = tmp / "console.csv"
    path.write_text(
        "==PROF== Connected to process 1\nstep 1: loss 2.3\n"
        + text_of(REFERENCE_RAW)
        + "==PROF== Disconnected from process 1\ntraining done, 3 epochs\n"
    )
    return [str(path)]


def same_file_twice(tmp: Path) -> list[str]:
    return [str(REFERENCE_RAW), str(REFERENCE_RAW)]


def same_content_twice(tmp: Path) -> list[str]:
    copy = tmp / "copy.csv.gz"
    shutil.copy(REFERENCE_RAW, copy)
    return [str(REFERENCE_RAW), str(copy)]


def raw_and_details(tmp: Path) -> list[str]:
    return [str(REFERENCE_RAW), str(REFERENCE_DETAILS)]


def raw_and_edited_details(tmp: Path) -> list[str]:
    """The details page of the same capture with one launch's duration doubled."""
    rows = rows_of(REFERENCE_DETAILS)
    header = rows[0]
    for row in rows[1:]:
        if (
            len(row) > header.index("Metric Value")
            and row[0] == "0"
            and row[header.index("Metric Name")] == "Duration"
        ):
            row[header.index("Metric Value")] = str(
                2 * float(row[header.index("Metric Value")].replace(",", ""))
            )
    return [str(REFERENCE_RAW), str(write_rows(tmp / "details.csv", rows))]


def different_metric_sets(tmp: Path) -> list[str]:
    return [str(REFERENCE_RAW), str(DATA / "console/duration_raw.csv.gz")]


def rep_and_other_csv(tmp: Path) -> list[str]:
    return [str(SMALL_REP), str(DATA / "console/basic_raw.csv.gz")]


def rep_and_its_csv(tmp: Path) -> list[str]:
    return [str(SMALL_REP), str(SMALL_RAW)]


def nsys_without(table: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [str(sqlite_copy(PIPELINE, tmp / f"no_{table}.sqlite", f"DROP TABLE {table}"))]

    return build


def nsys_reversed_kernel(tmp: Path) -> list[str]:
    statement = (
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 5000 WHERE rowid IN '
        "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 3)"
    )
    return [str(sqlite_copy(SYNC_HEAVY, tmp / "reversed.sqlite", statement))]


def stats_with_bad_durations(tmp: Path) -> list[str]:
    rows = rows_of(TRACE)
    column = rows[0].index("Duration (ns)")
    rows[1][column], rows[2][column], rows[3][column] = "-5000", "-nan", "inf"
    return [str(write_rows(tmp / "trace.csv", rows, csv.QUOTE_MINIMAL))]


# ------------------------------------------------------------------------------ checks


def total_close_to(expected: Callable[[], float], tolerance: float = 0.001) -> Check:
    def check(doc: dict[str, Any]) -> None:
        assert abs(doc["total_gpu_time_ns"] - expected()) <= tolerance * expected(), doc[
            "total_gpu_time_ns"
        ]

    return check


def reference_without_first_launch() -> float:
    rows = rows_of(REFERENCE_RAW)
    column = rows[0].index(DURATION)
    return sum(float(r[column].replace(",", "")) for r in rows[3:])


def durations_positive(doc: dict[str, Any]) -> None:
    assert doc["total_gpu_time_ns"] > 0
    for kernel in doc["kernels"]:
        assert kernel["duration_ns"] is None or kernel["duration_ns"] >= 0, kernel


def launches(n: int) -> Check:
    def check(doc: dict[str, Any]) -> None:
        assert doc["meta"]["kernel_launches"] == n, doc["meta"]["kernel_launches"]

    return check


def no_idle_claim(doc: dict[str, Any]) -> None:
    assert not causes(doc) & {"gpu-idle-gaps", "no-copy-compute-overlap", "launch-overhead"}
    skipped = {s["rule"]: s["reason"] for s in doc["skipped_rules"]}
    assert "no kernel table" in skipped["NSD404"]


def no_sync_claim(doc: dict[str, Any]) -> None:
    assert "sync-heavy" not in causes(doc)
    skipped = {s["rule"]: s["reason"] for s in doc["skipped_rules"]}
    assert "no CUDA API table" in skipped["NSD403"]


def with_ncu_rules(doc: dict[str, Any]) -> None:
    launches(42)(doc)
    assert any(k["ncu_rules"] for k in doc["kernels"])
    total_close_to(reference_total_ns)(doc)


def all_of(*checks: Check) -> Check:
    def check(doc: dict[str, Any]) -> None:
        for c in checks:
            c(doc)

    return check


# ------------------------------------------------------------------------------ the corpus

CASES: tuple[Case, ...] = (
    # not a regular file, or implausibly large: refused before reading
    Case("named pipe", fifo, Refused("named pipe", isolated=True)),
    Case("link to /dev/zero (csv)", link_to_dev_zero("z.csv"), Refused("device", isolated=True)),
    Case(
        "link to /dev/zero (sqlite)", link_to_dev_zero("z.sqlite"), Refused("device", isolated=True)
    ),
    Case(
        "link to /dev/zero (ncu-rep)",
        link_to_dev_zero("z.ncu-rep"),
        Refused("device", isolated=True),
    ),
    Case("gzip bomb of zeros", gzip_bomb_of_zeros, Refused("MB", isolated=True)),
    Case("one 200 MB field", gzip_one_huge_field, Refused("no header line", isolated=True)),
    Case(
        "gzip bomb of rows",
        gzip_bomb_of_rows,
        Refused("decompresses to more", env={"NSDIAG_MAX_INPUT_MB": "64"}, isolated=True),
    ),
    Case("sparse 64 GB file", sparse_huge, Refused("MB", isolated=True)),
    Case(
        "limit lowered by the user",
        lambda t: [str(REFERENCE_RAW), "--max-input-mb", "0.1"],
        Refused("--max-input-mb"),
    ),
    Case(
        "limit not a number",
        lambda t: [str(REFERENCE_RAW)],
        Refused("NSDIAG_MAX_INPUT_MB", env={"NSDIAG_MAX_INPUT_MB": "lots"}, names_file=False),
    ),
    # truncated or corrupted files
    Case("truncated gzip", truncated_gzip, Refused("truncated")),
    Case("corrupted gzip", corrupted_gzip, Refused("gzip")),
    Case("truncated .ncu-rep", truncated_rep, Refused("truncated")),
    Case("corrupted .ncu-rep", corrupted_rep, Refused("Nsight Compute report")),
    Case("truncated .sqlite", truncated_sqlite, Refused("SQLite")),
    Case("zeroed .sqlite", zeroed_sqlite, Refused("SQLite")),
    Case("truncated .sqlite.gz", truncated_sqlite_gz, Refused("truncated")),
    Case("empty .csv", named("empty.csv", b""), Refused("empty")),
    Case("binary .csv", named("junk.csv", bytes(range(256)) * 64), Refused('starts with "ID"')),
    Case("details header, no rows", details_without_rows, Refused("no rows")),
    Case("session.json not JSON", session_with_manifest("{not json"), Refused("unreadable")),
    Case("session.json a list", session_with_manifest("[]"), Refused("incompatible")),
    Case("session.json without columns", session_without_columns, Refused("malformed")),
    Case("session table cut", session_with_cut_table, Refused("unreadable")),
    # right answers, with a warning where something was wrong
    Case(
        "-nan in a duration cell",
        cell(DURATION, 0, "-nan"),
        Answered(f"column {DURATION}", total_close_to(reference_without_first_launch)),
    ),
    Case(
        "inf in a duration cell",
        cell(DURATION, 0, "inf"),
        Answered("impossible", total_close_to(reference_without_first_launch)),
    ),
    Case(
        "negative duration",
        cell(DURATION, 0, "-5000"),
        Answered(
            "-5000 ns", all_of(durations_positive, total_close_to(reference_without_first_launch))
        ),
    ),
    Case(
        "n/a text in a throughput cell",
        cell("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 3, "garbage"),
        Answered("row 4", total_close_to(reference_total_ns)),
    ),
    Case("CSV cut mid-row", cut_mid_row, Answered("middle of a row", launches(10))),
    Case("UTF-8 byte-order mark", with_bom, Answered("", total_close_to(reference_total_ns))),
    Case(
        "minimal quoting (pandas)",
        minimal_quoting,
        Answered("", total_close_to(reference_total_ns)),
    ),
    Case(
        "details page, BOM and minimal quoting", bom_and_minimal_details, Answered("", launches(2))
    ),
    Case(
        "console noise around the table",
        with_console_noise,
        Answered("", total_close_to(reference_total_ns)),
    ),
    Case(
        "same file twice",
        same_file_twice,
        Answered("more than once", all_of(launches(42), total_close_to(reference_total_ns))),
    ),
    Case(
        "same content twice",
        same_content_twice,
        Answered("counted once", all_of(launches(42), total_close_to(reference_total_ns))),
    ),
    Case("raw and details of one capture", raw_and_details, Answered("", with_ncu_rules)),
    Case(
        "raw and details that disagree",
        raw_and_edited_details,
        Answered("disagree", with_ncu_rules),
    ),
    Case("different metric sets", different_metric_sets, Answered("lacks metrics")),
    Case(".ncu-rep with another capture's CSV", rep_and_other_csv, Answered("lacks metrics")),
    Case(".ncu-rep with its own CSV", rep_and_its_csv, Answered("", launches(2))),
    Case(
        "nsys without kernel table",
        nsys_without("CUPTI_ACTIVITY_KIND_KERNEL"),
        Answered("no kernel table", no_idle_claim),
    ),
    Case(
        "nsys without runtime table",
        nsys_without("CUPTI_ACTIVITY_KIND_RUNTIME"),
        Answered("no CUDA API table", no_sync_claim),
    ),
    Case("nsys reversed intervals", nsys_reversed_kernel, Answered("3 GPU activities")),
    Case("nsys stats bad durations", stats_with_bad_durations, Answered("3 GPU activities")),
    Case("incomplete profile", lambda t: [str(INCOMPLETE_SESSION)], Answered("incomplete")),
    Case("status.json not JSON", session_with_status("{oops"), Answered("unreadable")),
    Case("status.json a list", session_with_status("[1]"), Answered("not a status")),
)

# the wild-input cases of issue 27, one module per side (imported late: they use the helpers above)
from tests import bad_input_corpus_csv, bad_input_corpus_nsys  # noqa: E402

CASES = CASES + bad_input_corpus_nsys.CASES + bad_input_corpus_csv.CASES
