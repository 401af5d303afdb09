"""nsdiag: why is my CUDA kernel slow, and what do I change?"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from nsdiag.errors import NsdiagError
from nsdiag.model.session import Session

__version__ = "0.1.0"
__all__ = ["NsdiagError", "Session", "__version__", "load"]


def load(paths: str | Path | Iterable[str | Path]) -> Session:
    """Read one or several profiler outputs (or a session directory) into one Session.

    A `.nsys-rep` report is exported to SQLite with nsys first (nsdiag.collect runs it), unless
    nsys already wrote a fresh export next to it."""
    from nsdiag.readers import load as read_inputs

    return read_inputs(paths, export_nsys_rep=_export_nsys_rep)


def _export_nsys_rep(report: Path, output: Path) -> Path:
    from nsdiag.collect.nsys_export import export_sqlite

    return export_sqlite(report, output)
