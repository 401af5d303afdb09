"""Write a rendered report without losing what was there: a new file, or a replaced old report."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nsdiag.errors import NsdiagError


def write_report(path: Path, text: str) -> Path:
    """Write atomically (temporary file, then rename) so a failed write never leaves half a
    report where a good one was; refuse to write over a folder."""
    if path.is_dir():
        raise NsdiagError(f"{path} is a folder", "give a file name, e.g. -o report.html")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise NsdiagError(
            f"cannot write {path}: folder {parent} does not exist", "create it or choose another -o"
        )
    try:
        handle, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise NsdiagError(
            f"cannot write {path}: {exc.strerror}", "check the folder's permissions and free space"
        ) from exc
    return path
