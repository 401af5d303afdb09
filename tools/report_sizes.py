"""List the largest HTML reports of a tools/snapshot_outputs.py folder, or of two side by side.

    python tools/report_sizes.py SNAPSHOT_DIR [AFTER_DIR] [--top N] [--limit MB]

A report's size is the one its .report.html.log states (the file as `nsdiag report` wrote it,
plotly.js included); a snapshot written before the log stated it gets the stored file's size
with the bundle added back. Prints the N largest (of the first folder, or of the second when
there are two), how many exceed the limit (1.5 MB, as the CLI counts MB: 10^6 bytes) and the
largest and smallest of each folder; exits 1 when a report of the last folder exceeds it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from nsdiag.render.plotly_js import plotly_js

SUFFIX = ".report.html"
_SIZE = re.compile(r"^size (\d+) bytes$", re.M)
_STUB = "<script>PLOTLY</script>"


def sizes(folder: Path) -> dict[str, int]:
    """Recording name -> its HTML report's size in bytes."""
    bundle = len(f"<script>\n{plotly_js()}\n</script>".encode())
    found: dict[str, int] = {}
    for report in sorted(folder.glob(f"*{SUFFIX}")):
        name = report.name.removesuffix(SUFFIX)
        log = report.with_name(report.name + ".log")
        stated = _SIZE.search(log.read_text()) if log.exists() else None
        if stated:
            found[name] = int(stated.group(1))
        else:
            stored = report.read_bytes()
            found[name] = len(stored) + (bundle - len(_STUB) if _STUB.encode() in stored else 0)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, metavar="SNAPSHOT_DIR")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--limit", type=float, default=1.5, help="MB (default: %(default)s)")
    options = parser.parse_args()
    if len(options.folders) > 2:
        parser.error("one or two snapshot folders")
    tables = [sizes(folder) for folder in options.folders]
    last = tables[-1]
    limit = options.limit * 1e6
    heads = [f.name for f in options.folders]
    print(f"{'report':60s} " + " ".join(f"{h[-14:]:>14s}" for h in heads))
    for name in sorted(last, key=lambda n: -last[n])[: options.top]:
        cells = [f"{t[name]:>14,}" if name in t else f"{'-':>14s}" for t in tables]
        print(f"{name:60s} " + " ".join(cells))
    for folder, table in zip(heads, tables, strict=True):
        over = sum(size > limit for size in table.values())
        largest = max(table, key=lambda n: table[n])
        print(
            f"{folder}: {len(table)} reports, {min(table.values()):,}-{table[largest]:,} bytes "
            f"(largest {largest}), {over} over {options.limit} MB"
        )
    return 1 if any(size > limit for size in last.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
