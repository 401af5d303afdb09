"""Readers: one module per input format, each returning a Session; `load` picks by sniffing.

Readers never start a process: a `.nsys-rep` report is read through a SQLite export, made by the
`export_nsys_rep` function the caller passes (`nsdiag.load` passes nsdiag.collect's).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from nsdiag.errors import InputError
from nsdiag.model import store
from nsdiag.model.session import Session
from nsdiag.readers.merge import merge_sessions
from nsdiag.readers.text_input import read_text

if TYPE_CHECKING:
    from nsdiag.readers.nsys_rep import SqliteExport


def _sniff_csv(path: Path) -> Callable[[Path], Session]:
    head = read_text(path)[:200_000]
    from nsdiag.readers import nsys_stats_csv

    if nsys_stats_csv.sniff(head):
        return nsys_stats_csv.read
    if '"Section Name"' in head and '"Metric Name"' in head:
        from nsdiag.readers import ncu_details_csv

        return ncu_details_csv.read
    if '"ID",' in head:
        from nsdiag.readers import ncu_raw_csv

        return ncu_raw_csv.read
    raise InputError(
        f"{path} is not a CSV export nsdiag knows",
        "expected ncu --csv --page raw or --page details output, or nsys stats -f csv reports",
    )


def reader_for(
    path: Path, export_nsys_rep: SqliteExport | None = None
) -> Callable[[Path], Session]:
    name = path.name.lower()
    if store.is_session_dir(path):
        return store.load
    if path.is_dir():
        raise InputError(
            f"{path} is a folder but not an nsdiag session (no session.json)",
            "pass the session folder nsdiag profile wrote, or the report files themselves",
        )
    if not path.exists():
        raise InputError(f"{path} does not exist", "check the path")
    if name.endswith((".ncu-rep", ".ncu-repz", ".ncu-rep.gz")):
        from nsdiag.readers import ncu_rep

        return ncu_rep.read
    if name.endswith((".sqlite", ".sqlite.gz")):
        from nsdiag.readers import nsys_sqlite

        return nsys_sqlite.read
    if name.endswith(".nsys-rep"):
        from nsdiag.readers import nsys_rep

        if export_nsys_rep is None:
            return nsys_rep.read
        return functools.partial(nsys_rep.read, export=export_nsys_rep)
    if name.endswith((".csv", ".csv.gz", ".txt", ".txt.gz", ".log")):
        return _sniff_csv(path)
    raise InputError(
        f"{path}: unknown input type",
        "nsdiag reads session folders, .ncu-rep files, ncu CSV exports, nsys .sqlite exports, "
        ".nsys-rep reports and nsys stats CSVs",
    )


def load(
    paths: str | Path | Iterable[str | Path], export_nsys_rep: SqliteExport | None = None
) -> Session:
    """Read one or several inputs into one Session. `export_nsys_rep(report, output)` writes a
    `.nsys-rep` report's SQLite export (without it, only reports with a fresh export beside them
    can be read)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    from nsdiag.readers import ranks

    files = [Path(p) for p in paths]
    sessions = ranks.read_reports([(reader_for(p, export_nsys_rep), p) for p in files])
    if not sessions:
        raise InputError("no input given", "pass a session folder, a .ncu-rep or an ncu CSV export")
    if ranks.is_rank_set(sessions):  # one timeline per rank (or per node) of one run
        return ranks.merge_rank_reports(sessions, files)
    sessions = [ranks.assign_ranks(s) if "ranks" not in s.meta else s for s in sessions]
    return sessions[0] if len(sessions) == 1 else merge_sessions(sessions)
