"""Reader memory: peak memory of nsdiag.load() on a large raw CSV export, against its size.

Builds the file from a real H200 recording (tests/data/calib/raw.csv.gz: 53 launches, ~2,200
metric columns, base units) by repeating its launch rows with new IDs, to about --mb MB
uncompressed (in a temporary folder, deleted afterwards; --gzip also reads it gzipped), then
reads it in a fresh Python process and prints that process's peak resident memory (ru_maxrss)
above what the same process holds after importing nsdiag and pandas, as a ratio to the file's
uncompressed size. Target: at most 2x.

    python benchmarks/bench_input_memory.py [--mb 400] [--gzip] [--keep PATH]

Measured 2026-11-30 (26,431 launches, 400 MB): 1.67x plain, 1.68x gzipped; the readers before
the streaming reading layer (issue 16) peaked at 8.2x on the same file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "tests/data/calib/raw.csv.gz"
# Run in a child: ru_maxrss is the process's high-water mark, so each reading needs its own.
CHILD = """
import json, resource, sys
import nsdiag, nsdiag.readers.ncu_raw_csv, pandas
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
session = nsdiag.load(sys.argv[1])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kb": before, "peak_kb": after, "launches": len(session.kernels),
                  "metrics": session.raw.shape[1], "warnings": list(session.meta.warnings)}))
"""


def build(target: Path, megabytes: float) -> int:
    """Write the export; returns the launches written."""
    with gzip.open(RECORDING, "rt") as recording:
        lines = recording.read().splitlines()
    header, units, rows = lines[0], lines[1], lines[2:]
    budget = megabytes * 1e6
    written = 0
    with target.open("w") as out:
        out.write(header + "\n" + units + "\n")
        size = len(header) + len(units) + 2
        while size < budget:
            row = rows[written % len(rows)]
            line = f'"{written}"' + row[row.index(",") :] + "\n"  # a fresh ID per launch
            out.write(line)
            size += len(line)
            written += 1
    return written


def measure(path: Path) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=400, help="uncompressed size to build")
    parser.add_argument("--gzip", action="store_true", help="also read the file gzipped")
    parser.add_argument("--keep", type=Path, help="copy the built file here (never committed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nsdiag-bench-") as tmp:
        path = Path(tmp) / "raw.csv"
        launches = build(path, args.mb)
        size = path.stat().st_size
        inputs = [path]
        if args.gzip:
            packed = path.with_suffix(".csv.gz")
            with path.open("rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            inputs.append(packed)
        if args.keep:
            shutil.copy(path, args.keep)
        print(f"file: {launches:,} launches, {size / 1e6:,.0f} MB uncompressed")
        for item in inputs:
            figures = measure(item)
            above = (figures["peak_kb"] - figures["before_kb"]) * 1024
            print(
                f"{item.name}: peak {figures['peak_kb'] / 1024:,.0f} MiB "
                f"({figures['before_kb'] / 1024:,.0f} MiB after imports); read: "
                f"{above / 1e6:,.0f} MB = {above / size:.2f}x the uncompressed size "
                f"({figures['launches']:,} launches, {figures['metrics']:,} metrics)"
            )


if __name__ == "__main__":
    main()
