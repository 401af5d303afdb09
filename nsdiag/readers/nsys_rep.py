"""Reader for `.nsys-rep` reports: exported to SQLite by nsys (collect/), then read as such."""

from __future__ import annotations

import tempfile
from pathlib import Path

from nsdiag.collect.nsys_export import export_sqlite
from nsdiag.model.session import Session
from nsdiag.readers import nsys_sqlite


def _fresh_export(report: Path) -> Path | None:
    """An export nsys already wrote next to the report (report.sqlite), if newer than it."""
    sibling = report.with_suffix(".sqlite")
    if sibling.is_file() and sibling.stat().st_mtime >= report.stat().st_mtime:
        return sibling
    return None


def read(path: Path) -> Session:
    existing = _fresh_export(path) if path.is_file() else None
    if existing is not None:
        session = nsys_sqlite.read(existing)
    else:
        # Export to a temporary folder: the report's own folder may be read-only.
        with tempfile.TemporaryDirectory(prefix="nsdiag-nsys-") as tmp:
            session = nsys_sqlite.read(export_sqlite(path, Path(tmp) / "export.sqlite"))
    session.meta["sources"] = [{"path": str(path), "format": "nsys-rep"}]
    return session
