"""How long reading and analysing one report per rank takes for a large distributed run.

Builds a synthetic set of N per-rank nsys SQLite exports (default 256) in a temporary folder,
each a copy of one real rank's report (tests/data/multi_gpu/ddp_straggler_rank1.sqlite.gz, the
two-GPU DDP run) with its rank in the recorded environment (RANK, LOCAL_RANK) and its session
start moved by up to 50 us (ranks never start at the same instant). Synthetic: the copies are
never committed and nothing in them is presented as a measurement. Then times `nsdiag.load` of
all of them (parallel worker processes) and `diagnose` of the merged session, against one file.

    python benchmarks/bench_ranks.py [--ranks 256] [--workers N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.readers import ranks as rank_reader
from nsdiag.readers import reader_for

SOURCE = Path(__file__).resolve().parents[1] / "tests/data/multi_gpu/ddp_straggler_rank1.sqlite.gz"


def build(folder: Path, ranks: int) -> list[Path]:
    """N copies of the source report, rank i's environment saying RANK=i."""
    base = folder / "source.sqlite"
    with gzip.open(SOURCE, "rb") as src, base.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    paths = []
    for i in range(ranks):
        target = folder / f"rep_{i}.sqlite"
        shutil.copy(base, target)
        with sqlite3.connect(target) as con:
            con.execute(
                "UPDATE META_DATA_CAPTURE SET value = ? WHERE value LIKE 'RANK=%'", (f'RANK="{i}"',)
            )
            con.execute(
                "UPDATE META_DATA_CAPTURE SET value = ? WHERE value LIKE 'LOCAL_RANK=%'",
                (f'LOCAL_RANK="{i % 8}"',),
            )
            con.execute(
                "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?",
                ((i * 7919) % 50_000,),
            )
        paths.append(target)
    base.unlink()
    return paths


def timed(label: str, func, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = func(*args, **kwargs)
    seconds = time.perf_counter() - start
    print(f"{label}: {seconds:.2f} s")
    return result, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--workers", type=int, default=None, help="default: the CPU count")
    parser.add_argument("--keep", type=Path, help="build the files here and keep them")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="nsdiag-ranks-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        paths, _ = timed(f"build {args.ranks} rank files in {folder}", build, folder, args.ranks)
        one, read_one = timed("read one rank file", nsdiag.load, paths[0])
        _, diag_one = timed("analyse one rank file", diagnose, one)
        jobs = [(reader_for(p), p) for p in paths]
        sessions, read_s = timed(
            f"read {len(paths)} rank files ({args.workers or os.cpu_count()} workers)",
            rank_reader.read_reports,
            jobs,
            args.workers,
        )
        merged, merge_s = timed(
            "merge them by rank", rank_reader.merge_rank_reports, sessions, paths
        )
        diagnosis, diag_s = timed("analyse the merged session", diagnose, merged)
        total = read_s + merge_s + diag_s
        single = read_one + diag_one
        late = diagnosis.ranks.late_rank if diagnosis.ranks else None
        print(
            f"{len(paths)} ranks: {total:.1f} s to read and analyse ({len(merged.timeline):,} GPU "
            f"activities), {total / single:.0f}x one file ({single:.2f} s); late rank: {late}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
