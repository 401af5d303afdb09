"""Reader for `.nsys-rep` reports (and `.qdrep`, their name before nsys 2021.4): read through
their SQLite export.

Readers never start a process: the export comes from nsys next to the report (`x.sqlite`, newer
than `x.nsys-rep`), or from the `export` function the caller passes in. `nsdiag.load` passes
nsdiag.collect's, which runs `nsys export` into a temporary folder.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from nsdiag.errors import InputError
from nsdiag.model.meta import Source
from nsdiag.model.session import Session
from nsdiag.readers import nsys_sqlite

# (report, output) -> the SQLite database written at `output`
SqliteExport = Callable[[Path, Path], Path]

NO_EXPORT_HINT = (
    "read it with nsdiag.load or the nsdiag command line (they run nsys export), or export it "
    "yourself: nsys export --type sqlite report.nsys-rep (writes report.sqlite), then pass the "
    ".sqlite file"
)


def _fresh_export(report: Path) -> Path | None:
    """An export nsys already wrote next to the report (report.sqlite), if newer than it."""
    sibling = report.with_suffix(".sqlite")
    if sibling.is_file() and sibling.stat().st_mtime >= report.stat().st_mtime:
        return sibling
    return None


def read(path: Path, export: SqliteExport | None = None) -> Session:
    existing = _fresh_export(path) if path.is_file() else None
    if existing is not None:
        session = nsys_sqlite.read(existing)
    elif export is None:
        command = shlex.join(
            [
                "nsys",
                "export",
                "--type",
                "sqlite",
                "-o",
                str(path.with_suffix(".sqlite")),
                str(path),
            ]
        )
        raise InputError(
            f"{path} has no SQLite export next to it, and reading it needs nsys to make one: "
            f"run {command}",
            NO_EXPORT_HINT,
        )
    else:
        # Export to a temporary folder: the report's own folder may be read-only.
        with tempfile.TemporaryDirectory(prefix="nsdiag-nsys-") as tmp:
            session = nsys_sqlite.read(export(path, Path(tmp) / "export.sqlite"))
    kind = "qdrep" if path.name.lower().endswith(".qdrep") else "nsys-rep"
    session.meta = replace(session.meta, sources=(Source(str(path), kind),))
    return session
