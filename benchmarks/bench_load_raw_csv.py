"""Reader speed: a 5,000-launch full-set raw CSV, nsdiag.load() against pandas.read_csv().

Builds the file from a real H200 recording (tests/data/calib/raw.csv.gz: 53 launches, ~2,200
metric columns, base units with thousands separators) by repeating its launch rows with new IDs,
then times both readers on the same file (median of --repeat runs) and prints the ratio.

    python benchmarks/bench_load_raw_csv.py [--launches 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

import nsdiag

RECORDING = Path(__file__).resolve().parents[1] / "tests/data/calib/raw.csv.gz"


def build(target: Path, launches: int) -> None:
    with gzip.open(RECORDING, "rt") as recording:
        lines = recording.read().splitlines()
    header, units, rows = lines[0], lines[1], lines[2:]
    with target.open("w") as out:
        out.write(header + "\n" + units + "\n")
        for i in range(launches):
            row = rows[i % len(rows)]
            out.write(f'"{i}"' + row[row.index(",") :] + "\n")  # a fresh ID per launch


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raw.csv"
        build(path, args.launches)
        size_mb = path.stat().st_size / 1e6
        session = nsdiag.load(path)
        assert len(session.kernels) == args.launches
        baseline = statistics.median(
            timed(lambda: pd.read_csv(path, low_memory=False)) for _ in range(args.repeat)
        )
        ours = statistics.median(timed(lambda: nsdiag.load(path)) for _ in range(args.repeat))
    print(f"file: {args.launches} launches x {session.raw.shape[1]} metrics, {size_mb:.0f} MB")
    print(f"pandas.read_csv (baseline): {baseline:.2f} s")
    print(f"nsdiag.load:                {ours:.2f} s")
    print(f"ratio nsdiag/pandas:        {ours / baseline:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
