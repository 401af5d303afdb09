"""Write a rendered report without losing what was there: a new file, or a replaced old report
(nsdiag/safe_write.py: never a link, a folder or a device; atomic; the old file's mode kept)."""

from __future__ import annotations

from pathlib import Path

from nsdiag.safe_write import write_atomically


def write_report(path: Path, text: str) -> Path:
    return write_atomically(path, text.encode("utf-8"))
