"""Open profiler text exports (plain or gzipped) and locate the CSV inside console noise."""

from __future__ import annotations

import gzip
from pathlib import Path

from nsdiag.errors import InputError


def read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}", "check the path and its permissions"
        ) from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(
                f"{path} looks gzipped but cannot be decompressed", "re-export the file"
            ) from exc
    return raw.decode("utf-8", errors="replace")


def csv_block(text: str, header_prefix: str, path: Path, what: str) -> str:
    """The CSV part of `text`: from the header line starting with `header_prefix` to the last
    quoted line. ncu prints ==PROF==/==WARNING== lines and the program's own output around it."""
    start = text.find(header_prefix)
    while start > 0 and text[start - 1] != "\n":
        start = text.find(header_prefix, start + 1)
    if start < 0:
        raise InputError(
            f"{path} is not {what}: no header line starting with {header_prefix}",
            "export with ncu --csv (see `nsdiag --help`)",
        )
    end = len(text)
    # Trim trailing lines that are not CSV rows (profiler or program messages after the table).
    while end > start:
        line_start = text.rfind("\n", start, end - 1) + 1
        line = text[line_start:end].strip()
        if line.startswith('"') or not line:
            if line:
                break
            end = line_start
            continue
        end = line_start
    return text[start:end]
