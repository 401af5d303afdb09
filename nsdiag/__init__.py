"""nsdiag: why is my CUDA kernel slow, and what do I change?"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsdiag.errors import NsdiagError
from nsdiag.version import __version__

if TYPE_CHECKING:
    from nsdiag.model.session import Session

__all__ = ["NsdiagError", "Session", "__version__", "load"]


def __getattr__(name: str) -> Any:
    """`nsdiag.Session` on first use: importing nsdiag (and so `nsdiag --help`) loads no pandas."""
    if name == "Session":
        from nsdiag.model.session import Session

        return Session
    raise AttributeError(f"module 'nsdiag' has no attribute {name!r}")


def load(paths: str | Path | Iterable[str | Path], max_input_mb: float | None = None) -> Session:
    """Read one or several profiler outputs (or a session directory) into one Session.

    A `.nsys-rep` report is exported to SQLite with nsys first (nsdiag.collect runs it), unless
    nsys already wrote a fresh export next to it. `max_input_mb` raises (or lowers) the size an
    input may have, uncompressed (default: NSDIAG_MAX_INPUT_MB, else a limit per kind)."""
    from nsdiag.readers import load as read_inputs

    return read_inputs(paths, export_nsys_rep=_export_nsys_rep, max_input_mb=max_input_mb)


def _export_nsys_rep(report: Path, output: Path) -> Path:
    from nsdiag.collect.nsys_export import export_sqlite

    return export_sqlite(report, output)
