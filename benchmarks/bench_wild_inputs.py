"""Growth of the work on pathological inputs (issue 27): kernel names and CSV rows, ten times
larger each step, should take about ten times longer (linear), not a hundred (quadratic).

- names: a real kernel name (tests/data/reference/raw.csv.gz) whose function identifier is
  repeated to 10k, 100k, 1M characters, through the name forms nsdiag computes for each kernel
  (normalized, function_name, short_name); a 100,000-character name took 216 s when normalized()
  was quadratic. Baseline: re.sub(r"\\s+", "", name), one linear pass over the same text.
- rows: a raw page of 10k, 100k, 1M launches, synthetic from the same recording (its identity
  columns and three metrics; launch rows repeated with fresh IDs), read by nsdiag.load.
  Baseline: pandas.read_csv of the same file.

For each size: the time, nsdiag's time over the baseline's, and the growth over the size ten
times smaller (~10 is linear). Ranks: benchmarks/bench_ranks.py.

    python benchmarks/bench_wild_inputs.py [--quick]   # --quick: sizes 1k, 10k, 100k
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

import nsdiag
from nsdiag.model.names import function_name, normalized, short_name

RECORDING = Path(__file__).resolve().parents[1] / "tests/data/reference/raw.csv.gz"
IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream")
IDENTITY += ("Block Size", "Grid Size", "Device", "CC")
METRICS = (
    "gpu__time_duration.sum",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
)


def timed(fn: Callable[[], object], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def recording_rows() -> list[list[str]]:
    with gzip.open(RECORDING, "rt") as handle:
        rows = list(csv.reader(io.StringIO(handle.read())))
    keep = [rows[0].index(c) for c in (*IDENTITY, *METRICS)]
    return [[row[i] for i in keep] for row in rows]


def long_name(name: str, length: int) -> str:
    cut = min(i for i in (name.find("<"), name.find("("), len(name)) if i >= 0)
    start = max(name[:cut].rfind(" "), name[:cut].rfind(":")) + 1
    ident = name[start:cut]
    return name[:start] + (ident * (length // len(ident) + 1))[:length] + name[cut:]


def bench_names(sizes: list[int], name: str) -> list[tuple[int, float, float]]:
    out = []
    for size in sizes:
        text = long_name(name, size)
        ours = timed(lambda t=text: (normalized(t), function_name(t), short_name(t)), repeat=3)
        base = timed(lambda t=text: re.sub(r"\s+", "", t), repeat=3)
        out.append((size, ours, base))
    return out


def write_raw(path: Path, rows: list[list[str]], launches: int) -> None:
    body = rows[2:]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerows(rows[:2])
        for i in range(launches):
            writer.writerow([str(i), *body[i % len(body)][1:]])


def bench_rows(
    sizes: list[int], rows: list[list[str]], tmp: Path
) -> list[tuple[int, float, float]]:
    out = []
    for size in sizes:
        path = tmp / f"raw_{size}.csv"
        write_raw(path, rows, size)
        session = nsdiag.load(path)
        assert len(session.kernels) == size, len(session.kernels)
        ours = timed(lambda p=path: nsdiag.load(p))
        base = timed(lambda p=path: pd.read_csv(p, skiprows=[1], thousands=","))
        out.append((size, ours, base))
        path.unlink()
    return out


def table(title: str, unit: str, results: list[tuple[int, float, float]]) -> None:
    print(f"\n{title}")
    print(f"{unit:>12} {'nsdiag s':>10} {'baseline s':>11} {'/baseline':>10} {'x per 10x':>10}")
    previous = None
    for size, ours, base in results:
        growth = f"{ours / previous:10.1f}" if previous else f"{'':>10}"
        print(f"{size:>12,} {ours:10.4f} {base:11.4f} {ours / base:10.1f} {growth}")
        previous = ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 1k, 10k, 100k")
    args = parser.parse_args()
    sizes = [1_000, 10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    rows = recording_rows()
    name = rows[2][IDENTITY.index("Kernel Name")]
    table("kernel names (characters)", "chars", bench_names(sizes, name))
    with tempfile.TemporaryDirectory() as tmp:
        table("raw CSV rows (launches)", "launches", bench_rows(sizes, rows, Path(tmp)))


if __name__ == "__main__":
    main()
