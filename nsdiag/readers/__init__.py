"""Readers: one module per input format, each returning a Session; `load` picks by sniffing.

Readers never start a process: a `.nsys-rep` report is read through a SQLite export, made by the
`export_nsys_rep` function the caller passes (`nsdiag.load` passes nsdiag.collect's).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from nsdiag.errors import InputError
from nsdiag.model import store
from nsdiag.model.session import Session, check_session
from nsdiag.readers import source
from nsdiag.readers.csv_table import CsvTable, open_table
from nsdiag.readers.merge import add_warnings, merge_sessions

if TYPE_CHECKING:
    from nsdiag.readers.nsys_rep import SqliteExport


_CSV_NAMES = (".csv", ".csv.gz", ".txt", ".txt.gz", ".log")
NSYS_REPORTS = (".nsys-rep", ".qdrep")  # .qdrep: nsys before 2021.4; both read through nsys export


def _csv_reader(kind: str) -> Callable[[CsvTable], Session]:
    if kind == "nsys-stats":
        from nsdiag.readers import nsys_stats_csv

        return nsys_stats_csv.read_table
    if kind == "ncu-details":
        from nsdiag.readers import ncu_details_csv

        return ncu_details_csv.read_table
    from nsdiag.readers import ncu_raw_csv

    return ncu_raw_csv.read_table


def _sniff_csv(path: Path) -> Callable[[Path], Session]:
    """The reader of a CSV export, told by its header (found in a bounded prefix)."""
    with open_table(path) as table:
        return sys.modules[_csv_reader(table.kind).__module__].read  # type: ignore[no-any-return]


def reader_for(
    path: Path, export_nsys_rep: SqliteExport | None = None
) -> Callable[[Path], Session]:
    name = path.name.lower()
    if store.is_session_dir(path):
        from nsdiag.readers import session_folder

        return session_folder.read
    if path.is_dir():
        from nsdiag.readers import session_folder

        raise session_folder.not_a_session(path)
    if not path.exists():
        raise InputError(f"{path} does not exist", "check the path")
    source.check_file(path, _size_kind(name))
    if name.endswith((".ncu-rep", ".ncu-repz", ".ncu-rep.gz")):
        from nsdiag.readers import ncu_rep

        return ncu_rep.read
    if name.endswith((".sqlite", ".sqlite.gz")):
        from nsdiag.readers import nsys_sqlite

        return nsys_sqlite.read
    if name.endswith(NSYS_REPORTS):
        from nsdiag.readers import nsys_rep

        if export_nsys_rep is None:
            return nsys_rep.read
        return functools.partial(nsys_rep.read, export=export_nsys_rep)
    if name.endswith(_CSV_NAMES):
        return _sniff_csv(path)
    raise InputError(
        f"{path}: unknown input type",
        "nsdiag reads session folders, .ncu-rep files, ncu CSV exports, nsys .sqlite exports, "
        ".nsys-rep and .qdrep reports and nsys stats CSVs",
    )


def load(
    paths: str | Path | Iterable[str | Path],
    export_nsys_rep: SqliteExport | None = None,
    max_input_mb: float | None = None,
    max_input_rows: float | None = None,
) -> Session:
    """Read one or several inputs into one Session. `export_nsys_rep(report, output)` writes a
    `.nsys-rep` report's SQLite export (without it, only reports with a fresh export beside them
    can be read). `max_input_mb`: the largest input accepted, uncompressed (default: the
    environment's NSDIAG_MAX_INPUT_MB, else a limit per kind of input, readers/source.py);
    `max_input_rows`: the most rows read from one table of an export (default: the
    environment's NSDIAG_MAX_INPUT_ROWS, else readers/source.py's)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    from nsdiag.readers import ranks

    with source.input_limit(max_input_mb, max_input_rows):
        unique, repeated = distinct_inputs([Path(p) for p in paths])
        read = functools.partial(_read_one, export_nsys_rep=export_nsys_rep)
        sessions = ranks.read_reports([(read, p) for p in unique])
    if not sessions:
        raise InputError("no input given", "pass a session folder, a .ncu-rep or an ncu CSV export")
    # a merge hands over a Session too: checked as each reader's is
    if ranks.is_rank_set(sessions):  # copies of one report are one rank, not two
        sessions, unique, copies = ranks.distinct_reports(sessions, unique)
        repeated += copies
    if ranks.is_rank_set(sessions):  # one timeline per rank (or per node) of one run
        merged = check_session(
            ranks.merge_rank_reports(sessions, unique), "nsdiag.readers.ranks.merge_rank_reports"
        )
    else:
        sessions = [ranks.assign_ranks(s) if s.meta.ranks is None else s for s in sessions]
        merged = (
            sessions[0]
            if len(sessions) == 1
            else check_session(merge_sessions(sessions), "nsdiag.readers.merge.merge_sessions")
        )
    if repeated:
        add_warnings(merged, repeated)
    return merged


def _read_one(path: Path, export_nsys_rep: SqliteExport | None) -> Session:
    """One input's Session, checked against the schema (model/schema.py) as its reader hands
    it over (a session folder by model/store.py, which reads it)."""
    if path.name.lower().endswith(_CSV_NAMES) and not path.is_dir():
        source.check_file(path)
        # opened once: the header picks the reader, which streams on
        with open_table(path) as table:
            read_table = _csv_reader(table.kind)
            return check_session(read_table(table), f"{_name(read_table)} reading {path}")
    read = reader_for(path, export_nsys_rep)
    if store.is_session_dir(path):
        return read(path)
    return check_session(read(path), f"{_name(read)} reading {path}")


def _name(reader: Callable[..., Session]) -> str:
    """The reader's module (through a functools.partial too)."""
    function = getattr(reader, "func", reader)
    return f"{function.__module__}.{function.__qualname__}"


def _size_kind(name: str) -> str:
    """Which size limit applies to an input, by its name."""
    if name.endswith((".sqlite", ".sqlite.gz", *NSYS_REPORTS)):
        return "sqlite"
    return "ncu-rep" if ".ncu-rep" in name else "text"


def distinct_inputs(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The inputs with each file once (the same file under two names counts once), and a
    warning for each repeat."""
    seen: dict[tuple[int, int], Path] = {}
    unique: list[Path] = []
    warnings: list[str] = []
    for path in paths:
        try:
            info = os.stat(path)
            key = (info.st_dev, info.st_ino)
        except OSError:
            unique.append(path)  # the reader says what is wrong with it
            continue
        if key in seen:
            warnings.append(f"{path} was given more than once (as {seen[key]}); it is read once")
            continue
        seen[key] = path
        unique.append(path)
    return unique, warnings
