"""Benchmark: read and diagnose synthetic nsys SQLite exports of 125k to 1M kernel launches.

    python benchmarks/bench_timeline.py [--sizes N,N,...] [--kernels N] [--repeat N] [--keep PATH]
        [--json PATH]

The generated export has the subset of the nsys schema nsdiag reads: StringIds, kernels (tiny
kernels in launch-bound bursts and longer ones, on two streams), a runtime call per launch
plus syncs, pageable and pinned copies, nested NVTX push/pop ranges and TARGET_INFO_GPU.
For each size (default 125k, 250k, 500k and 1M launches) prints the time to read it into a
Session and to run the diagnosis, and both as a ratio of a baseline measured on the same export
in the same run: pandas.read_sql of the whole kernel table (what any tool must at least pay to
get the rows into Python). Then the scaling exponent of each against launches: the slope of a
least-squares line through log(time) against log(launches) (1.0 is linear). `--kernels N`
measures one size only (no fit). `--repeat N` measures each size N times in turn (baseline,
read, diagnose, baseline, ...) and keeps each figure's fastest run: on a shared machine a
single run's figures move by 10-20%.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsdiag.analysis.engine import diagnose
from nsdiag.readers import nsys_sqlite

GLOBAL_TID = (1 << 24 | 4242) << 24 | 4242  # pid 4242, main thread
GLOBAL_PID = (1 << 24 | 4242) << 24
SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
  srcKind INTEGER, dstKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER);
CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, smCount INTEGER, computeMajor INTEGER,
  computeMinor INTEGER);
"""


STRINGS = (
    "tiny_add(float*)",
    "tiny_add",
    "big_gemm(float*, float*)",
    "big_gemm",
    "cudaLaunchKernel_v7000",
    "cudaStreamSynchronize_v3020",
    "cudaMemcpyAsync_v3020",
    "step",
    "burst",
)


def generate(path: Path, n_kernels: int, seed: int = 0) -> None:
    """Write the synthetic export: 100 NVTX 'step' ranges, each with bursts of tiny kernels
    (1-2 us, 5-15 us apart), 1% long kernels (50-200 us) on a second stream, a copy and a sync."""
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(STRINGS)))
    long = rng.random(n_kernels) < 0.01
    duration = np.where(
        long, rng.integers(50_000, 200_000, n_kernels), rng.integers(1_000, 2_000, n_kernels)
    )
    gap = np.where(long, 2_000, rng.integers(5_000, 15_000, n_kernels))
    start = 1_000_000 + np.cumsum(gap + duration) - duration
    start += (
        np.arange(n_kernels) * 100 // n_kernels
    ) * 2_000_000  # 2 ms between steps for the copy
    _kernels(con, start, duration, long)
    steps = np.array_split(np.arange(n_kernels), 100)
    _steps(con, steps, start, duration, n_kernels)
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'Synthetic GPU', 132, 9, 0)")
    con.commit()
    con.close()


def _kernels(
    con: sqlite3.Connection, start: np.ndarray, duration: np.ndarray, long: np.ndarray
) -> None:
    """The kernels (long ones on stream 14) and the runtime call that launched each."""
    n_kernels = len(start)
    corr = np.arange(1, n_kernels + 1)
    stream = np.where(long, 14, 7)
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,1,?,?,?,?,?,?,1,1,256,1,1)",
        zip(
            start.tolist(),
            (start + duration).tolist(),
            stream.tolist(),
            corr.tolist(),
            [GLOBAL_PID] * n_kernels,
            np.where(long, 2, 0).tolist(),
            np.where(long, 3, 1).tolist(),
            np.where(long, 1024, 4).tolist(),
            strict=True,
        ),
    )
    api_start = start - 8_000
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,4,0)",
        zip(
            api_start.tolist(),
            (api_start + 5_000).tolist(),
            [GLOBAL_TID] * n_kernels,
            corr.tolist(),
            strict=True,
        ),
    )


def _steps(
    con: sqlite3.Connection,
    steps: list[np.ndarray],
    start: np.ndarray,
    duration: np.ndarray,
    n: int,
) -> None:
    """Per step: an NVTX range 'step' with ten nested 'burst' ranges over its kernels, then a
    copy (pageable H2D or pinned D2H) and a blocking sync in the 2 ms after them."""
    nvtx, copies, calls = [], [], []
    corr = n + 1
    for i, rows in enumerate(steps):
        t0, last = int(start[rows[0]]) - 20_000, int(start[rows[-1]] + duration[rows[-1]])
        nvtx.append((t0, last + 1_500_000, 59, None, GLOBAL_TID, 7, 0))
        for chunk in np.array_split(rows, 10):
            nvtx.append(
                (
                    int(start[chunk[0]]) - 10_000,
                    int(start[chunk[-1]]) + 1,
                    59,
                    None,
                    GLOBAL_TID,
                    8,
                    0,
                )
            )
        # 8 MiB: alternately a pageable H2D in 1.2 ms and a pinned D2H in 0.4 ms (the reference).
        kind, src, dst, took = (1, 0, 2, 1_200_000) if i % 2 else (2, 2, 1, 400_000)
        copies.append(
            (
                last + 100_000,
                last + 100_000 + took,
                0,
                1,
                7,
                corr,
                GLOBAL_PID,
                8 << 20,
                kind,
                src,
                dst,
            )
        )
        calls.append((last + 90_000, last + 95_000, 0, GLOBAL_TID, corr, 6, 0))
        calls.append((last + 96_000, last + 110_000 + took, 0, GLOBAL_TID, corr + 1, 5, 0))
        corr += 2
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?)", nvtx)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?,?)", copies)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?)", calls)


def timed(fn, *args):
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


def loglog_slope(sizes: list[int], seconds: list[float]) -> float:
    """The least-squares slope of log(seconds) against log(sizes): time ~ size**slope."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def measure(path: Path, n_kernels: int, repeat: int = 1) -> dict[str, Any]:
    """Generate an export of `n_kernels` launches at `path`; time the baseline, read, diagnose
    (`repeat` times, in turn: each figure is its fastest run)."""
    path.unlink(missing_ok=True)
    _, t_gen = timed(generate, path, n_kernels)
    base, read, diag = [], [], []
    session = diagnosis = None
    for _ in range(repeat):
        session = diagnosis = None  # the last run's, freed before the next
        con = sqlite3.connect(path)
        _baseline, t_base = timed(pd.read_sql, "SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL", con)
        con.close()
        del _baseline
        session, t_read = timed(nsys_sqlite.read, path)
        diagnosis, t_diag = timed(diagnose, session)
        base.append(t_base)
        read.append(t_read)
        diag.append(t_diag)
    t_base, t_read, t_diag = min(base), min(read), min(diag)
    return {
        "kernels": n_kernels,
        "timeline_rows": len(session.timeline),
        "api_calls": len(session.api_calls),
        "nvtx_ranges": len(session.nvtx_ranges),
        "generate_s": t_gen,
        "baseline_read_sql_s": t_base,
        "read_s": t_read,
        "diagnose_s": t_diag,
        "total_s": t_read + t_diag,
        "read_ratio": t_read / t_base,
        "total_ratio": (t_read + t_diag) / t_base,
        "findings": [(f.rule, f.range, round(f.impact, 4)) for f in diagnosis.program_findings],
        "runs_s": {"baseline_read_sql": base, "read": read, "diagnose": diag},
    }


def _print_size(f: dict[str, Any]) -> None:
    print(
        f"synthetic export: {f['kernels']:,} kernels, {f['timeline_rows']:,} GPU activities, "
        f"{f['api_calls']:,} API calls, {f['nvtx_ranges']:,} NVTX ranges "
        f"(generated in {f['generate_s']:.1f} s)"
    )
    t_base = f["baseline_read_sql_s"]
    print(f"  baseline  pandas.read_sql(kernel table): {t_base:6.2f} s")
    for label, seconds in (
        ("read      nsys_sqlite.read:             ", f["read_s"]),
        ("diagnose  timeline analyses:            ", f["diagnose_s"]),
        ("total     read + diagnose:              ", f["total_s"]),
    ):
        print(f"  {label} {seconds:6.2f} s  ({seconds / t_base:.2f}x baseline)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="125000,250000,500000,1000000",
        help="comma-separated launch counts to measure and fit (default: %(default)s)",
    )
    parser.add_argument("--kernels", type=int, help="measure this one size only (no fit)")
    parser.add_argument("--keep", type=Path, help="write the largest export here and keep it")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure each size this many times, keeping each figure's fastest run "
        "(a shared machine: default %(default)s)",
    )
    args = parser.parse_args(argv)
    sizes = [args.kernels] if args.kernels else sorted(int(n) for n in args.sizes.split(","))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, n_kernels in enumerate(sizes):
            last = i == len(sizes) - 1
            path = args.keep if args.keep and last else Path(tmp) / f"synthetic-{n_kernels}.sqlite"
            runs.append(measure(path, n_kernels, max(args.repeat, 1)))
            _print_size(runs[-1])
            if not (args.keep and last):
                path.unlink(missing_ok=True)
    for rule, name, impact in runs[-1]["findings"]:
        print(f"  finding {rule} range={name} impact={impact}")
    figures: dict[str, Any] = {**runs[-1], "sizes": runs}
    if len(sizes) >= 2:
        print(
            f"{'launches':>10s} {'read_sql s':>10s} {'read s':>8s} {'diagnose s':>10s} "
            f"{'total s':>8s} {'x read_sql':>10s}"
        )
        for f in runs:
            print(
                f"{f['kernels']:>10,} {f['baseline_read_sql_s']:>10.2f} {f['read_s']:>8.2f} "
                f"{f['diagnose_s']:>10.2f} {f['total_s']:>8.2f} {f['total_ratio']:>10.2f}"
            )
        fit = {
            key: loglog_slope(sizes, [f[f"{key}_s"] for f in runs])
            for key in ("baseline_read_sql", "read", "diagnose", "total")
        }
        figures["exponents"] = fit
        print(
            "scaling exponent (log-log least-squares slope of time against launches): "
            f"read + diagnose {fit['total']:.2f} (read {fit['read']:.2f}, diagnose "
            f"{fit['diagnose']:.2f}); pandas.read_sql {fit['baseline_read_sql']:.2f}"
        )
        print(
            f"ratio to pandas.read_sql: {min(f['total_ratio'] for f in runs):.2f}-"
            f"{max(f['total_ratio'] for f in runs):.2f}x, {runs[-1]['total_ratio']:.2f}x at "
            f"{runs[-1]['kernels']:,} launches"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
