"""Benchmark: how long a user waits for `nsdiag explain`, `report` and `diff` on the recordings,
and for `nsdiag rules list` / `rules show`.

    python benchmarks/bench_latency.py [--repeat N] [--kinds explain,report,diff,rules]
                                       [--wall] [--compiled] [--checkout DIR] [--before JSON]
                                       [--json PATH]

Each command runs as a user runs it, a fresh `python -m nsdiag` process, and is timed in CPU
seconds of that process (user + system, so a busy machine inflates it less than wall time) or,
with `--wall`, in wall seconds (what `/usr/bin/time -f %e` prints), alternating with `nsdiag
--help`, the start-up baseline measured in the same run. Prints each command's median against
the baseline's, the slowest of each kind, and how many are over issue 30's targets (explain
1.5 s, diff 3 s). The recordings are tools/snapshot_outputs.py's: every session folder and
export under tests/data (the loose console and `nsys stats` CSVs too), and its before/after
pairs for diff. `--kinds rules` measures the rule table alone (seconds; it loads every rule
file, checked against the analyses' records, and imports no pandas).

`--compiled`: modules byte-compiled once (into a temporary PYTHONPYCACHEPREFIX), as in an
installed package; without it a machine that sets PYTHONDONTWRITEBYTECODE (this project's does)
compiles nsdiag's hundred-odd modules from source in every run, about 0.1 s of each.
`--checkout DIR` times the nsdiag package of another copy of the code (DIR/nsdiag with its
rules/ and templates/, on the recordings of this one), say `git archive REV nsdiag rules
templates | tar -x -C DIR`; `--before JSON` prints another run's `--json` beside this one's,
recording by recording.

`--kinds floor` (issue 39): `explain` against the read floor, on every recording under tests/data
that explain reads as one timeline (each session folder, each `.sqlite` / `.sqlite.gz` export).
Both run as a user runs them, fresh processes timed in wall seconds, nothing subtracted, one
after the other in each of `--repeat` rounds: `python -m nsdiag explain REC`, and a Python
process that imports pandas and reads the same tables (a session folder's tables/*.csv.gz with
`pandas.read_csv`; an export decompressed to a temporary file, then the tables nsdiag reads
with `pandas.read_sql_query`). Prints each recording's medians, the median of the rounds'
ratios (explain over the floor run beside it; with `--checkout DIR`, that copy's explain in
the same rounds too, as "before"), its kernel launches and period (launches per steady-state
iteration of the chosen region), then least-squares fits on log-log axes over the recordings
(explain seconds and the ratio against launches, and explain seconds against launches and
period together) and a synthetic sweep of the region's sequence search (in this process: time
against launches at one period, and against the period at one count of launches).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from snapshot_outputs import DATA, DIFF_PAIRS, _inputs, loose_exports, recordings  # noqa: E402

KINDS = ("explain", "report", "diff", "rules", "floor")
TARGET_S = {"explain": 1.5, "diff": 3.0}  # issue 30: what a user waits at most
# The rule table: every rule file loaded and checked (program rules against their analysis's
# record), then printed; one rule's documentation.
RULES_COMMANDS = (["list"], ["show", "NSD404"])


def seconds(
    args: list[str], wall: bool, checkout: Path | None, env: dict[str, str] | None = None
) -> float:
    """CPU (else wall) time of one `python -m nsdiag ARGS` process, its output discarded; run
    in `checkout` (its nsdiag package first on the path) when given."""
    before, start = os.times(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "nsdiag", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        cwd=checkout,
        env=env,
    )
    if done.returncode:  # a command that failed early would look fast
        sys.exit(f"nsdiag {' '.join(args)}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    if wall:
        return time.perf_counter() - start
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def measure(args: list[str], repeat: int, baseline: list[float], clock: dict[str, Any]) -> float:
    times = []
    for _ in range(repeat):
        baseline.append(seconds(["--help"], **clock))
        times.append(seconds(args, **clock))
    return statistics.median(times)


def _report(
    rows: list[tuple[str, str, float]],
    start: float,
    before: dict[tuple[str, str], float],
    unit: str,
) -> None:
    print(f"start-up (nsdiag --help): {start:.2f} {unit}")
    ahead = f" {'before':>7s}" if before else ""
    print(f"{'command':8s} {unit:>7s} {'x start':>8s}{ahead}  recording")
    for kind, name, value in sorted(rows, key=lambda r: (r[0], -r[2])):
        was = before.get((kind, name))
        then = (f" {was:7.2f}" if was is not None else f" {'':7s}") if before else ""
        print(f"{kind:8s} {value:7.2f} {value / start:8.1f}{then}  {name}")
    for kind in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == kind]
        worst = max(mine, key=lambda r: r[2])
        line = (
            f"slowest {kind}: {worst[2]:.2f} {unit} ({worst[2] / start:.1f}x start-up), {worst[1]}"
        )
        median = statistics.median(r[2] for r in mine)
        line += f"; median {median:.2f}"
        if kind in TARGET_S:
            over = sum(r[2] >= TARGET_S[kind] for r in mine)
            line += f"; {over} of {len(mine)} at or over {TARGET_S[kind]} {unit}"
        if before and all((kind, r[1]) in before for r in mine):
            was = [before[(kind, r[1])] for r in mine]
            line += f" (before: slowest {max(was):.2f}, median {statistics.median(was):.2f})"
        print(line)


# --- explain against the read floor (issue 39) ---------------------------------------------

# The nsys tables nsdiag's SQLite reader queries (readers/nsys_tables.py and its neighbours).
SQLITE_TABLES = (
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
    "TARGET_INFO_CUDA_GPU",
    "META_DATA_EXPORT",
)
FLOOR_TABLES = """
import glob, sys
import pandas as pd
for path in sorted(glob.glob(sys.argv[1] + "/tables/*.csv.gz")):
    try:
        pd.read_csv(path, low_memory=False)
    except pd.errors.EmptyDataError:  # a table with no columns (a session without a timeline)
        pass
"""
FLOOR_SQLITE = """
import gzip, shutil, sqlite3, sys, tempfile
import pandas as pd
with tempfile.TemporaryDirectory() as tmp:
    db = sys.argv[1]
    if db.endswith(".gz"):
        with gzip.open(db, "rb") as src, open(tmp + "/export.sqlite", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        db = tmp + "/export.sqlite"
    con = sqlite3.connect(db)
    present = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    for table in sys.argv[2:]:
        if table in present:
            pd.read_sql_query(f'SELECT * FROM "{table}"', con)
    con.close()
"""


def timeline_recordings() -> list[Path]:
    """Every session folder and nsys SQLite export under tests/data (logs left out)."""
    return [
        p
        for p in recordings()
        if (p / "session.json").exists() or p.name.endswith((".sqlite", ".sqlite.gz"))
    ]


def floor_command(path: Path) -> list[str]:
    if path.is_dir():
        return [sys.executable, "-c", FLOOR_TABLES, str(path)]
    return [sys.executable, "-c", FLOOR_SQLITE, str(path), *SQLITE_TABLES]


def wall(command: list[str], env: dict[str, str] | None, cwd: Path | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=env, cwd=cwd
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{' '.join(command[:4])}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    return seconds


def shape(path: Path) -> tuple[int, float | None]:
    """The recording's kernel launches, and its period: the median launches per steady-state
    iteration of the region explain chooses (None where the region has no iterations)."""
    import nsdiag
    from nsdiag.analysis.region.choose import choose_region

    session = nsdiag.load(path)
    timeline = session.timeline
    launches = int((timeline["kind"] == "kernel").sum()) if "kind" in timeline else 0
    if not session.has_timeline():
        return len(session.kernels), None
    region = choose_region(timeline, session.api_calls, session.nvtx_ranges)
    counts = [i.kernels for i in region.iterations]
    return launches, (float(statistics.median(counts)) if counts else None)


def fit(xs: list[list[float]], ys: list[float]) -> tuple[list[float], float]:
    """Least squares of log(y) on log(x...) with an intercept: the exponents (intercept first)
    and R^2."""
    import numpy as np

    a = np.column_stack([np.ones(len(ys)), *[np.log(np.asarray(x)) for x in xs]])
    b = np.log(np.asarray(ys))
    coef, *_ = np.linalg.lstsq(a, b, rcond=None)
    residual = b - a @ coef
    total = float(((b - b.mean()) ** 2).sum())
    return [float(c) for c in coef], (1 - float((residual**2).sum()) / total if total else 1.0)


def sweep() -> list[tuple[str, int, int, float]]:
    """The sequence search on synthetic launches: `reps` repetitions of `period` distinct
    kernels, timed in this process (median of 3)."""
    import numpy as np
    import pandas as pd

    from nsdiag.analysis.region.sequence import sequence_iterations

    rows = []
    cases = [("launches", n, 100) for n in (2_000, 8_000, 32_000, 128_000)]
    cases += [("period", 64_000, p) for p in (10, 100, 1_000, 8_000)]
    for axis, n, period in cases:
        reps = n // period
        names = [f"k{i}" for i in range(period)] * reps
        launches = np.arange(len(names), dtype="int64") * 1_000
        kernels = pd.DataFrame(
            {
                "name": names,
                "grid": "(1, 1, 1)",
                "block": "(128, 1, 1)",
                "end_ns": launches + 500,
            }
        )
        synced = np.zeros(len(names), dtype=bool)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            sequence_iterations(kernels, synced, launches)
            times.append(time.perf_counter() - start)
        rows.append((axis, len(names), period, statistics.median(times)))
    return rows


def measure_floor(
    repeat: int, env: dict[str, str] | None, checkout: Path | None
) -> list[dict[str, Any]]:
    out = []
    for path in timeline_recordings():
        explain_cmd = [sys.executable, "-m", "nsdiag", "explain", str(path)]
        explained, floors, before = [], [], []
        for _ in range(repeat):  # one after the other: a busy moment weighs on each
            if checkout is not None:  # `python -m` finds the checkout's nsdiag first
                before.append(wall(explain_cmd, env, checkout))
            explained.append(wall(explain_cmd, env, ROOT))
            floors.append(wall(floor_command(path), env))
        launches, period = shape(path)
        explain_s, floor_s = statistics.median(explained), statistics.median(floors)
        # each round's runs side by side: a shared machine's load comes and goes
        ratio = statistics.median(e / f for e, f in zip(explained, floors, strict=True))
        row = {
            "recording": str(path.relative_to(DATA)),
            "explain_s": explain_s,
            "floor_s": floor_s,
            "ratio": ratio,
            "launches": launches,
            "period": period,
        }
        was = ""
        if before:
            row["before_s"] = statistics.median(before)
            row["before_ratio"] = statistics.median(
                b / f for b, f in zip(before, floors, strict=True)
            )
            was = f" {row['before_s']:7.2f} {row['before_ratio']:6.2f}"
        out.append(row)
        print(
            f"{explain_s:7.2f} {floor_s:7.2f} {ratio:6.2f}{was} {launches:8d} "
            f"{period if period is not None else '-':>7}  {row['recording']}",
            flush=True,
        )
    return out


def report_floor(rows: list[dict[str, Any]]) -> None:
    if all("before_ratio" in r for r in rows):
        was = max(rows, key=lambda r: r["before_ratio"])
        over = sum(r["before_ratio"] > 2.0 for r in rows)
        print(
            f"before (--checkout): median {statistics.median(r['before_ratio'] for r in rows):.2f}"
            f", worst {was['before_ratio']:.2f} ({was['recording']}); {over} of {len(rows)} over 2x"
        )
    worst = max(rows, key=lambda r: r["ratio"])
    over = [r for r in rows if r["ratio"] > 2.0]
    print(
        f"ratio explain / read floor: median {statistics.median(r['ratio'] for r in rows):.2f}, "
        f"worst {worst['ratio']:.2f} ({worst['recording']}); {len(over)} of {len(rows)} over 2x"
        + (": " + ", ".join(r["recording"] for r in over) if over else "")
    )
    many = [r for r in rows if r["launches"] > 0]
    (c, b), r2 = fit([[r["launches"] for r in many]], [r["explain_s"] for r in many])
    print(f"fit explain_s = {math.exp(c):.3f} * launches^{b:.3f}  (R^2 {r2:.2f}, {len(many)} recs)")
    (c, b), r2 = fit([[r["launches"] for r in many]], [r["ratio"] for r in many])
    print(f"fit ratio     = {math.exp(c):.3f} * launches^{b:.3f}  (R^2 {r2:.2f})")
    timed = [r for r in many if r["period"]]
    if len(timed) > 3:
        xs = [[r["launches"] for r in timed], [r["period"] for r in timed]]
        (c, b, p), r2 = fit(xs, [r["explain_s"] for r in timed])
        print(
            f"fit explain_s = {math.exp(c):.3f} * launches^{b:.3f} * period^{p:.3f}  "
            f"(R^2 {r2:.2f}, {len(timed)} recordings with a period)"
        )
    swept = sweep()
    print("synthetic sequence search (region/sequence.py, in process):")
    for axis in ("launches", "period"):
        mine = [s for s in swept if s[0] == axis]
        for _, n, period, seconds in mine:
            print(f"  launches {n:7d} period {period:5d}: {seconds * 1e3:8.1f} ms")
        xs = [float(s[1] if axis == "launches" else s[2]) for s in mine]
        (_, b), r2 = fit([xs], [s[3] for s in mine])
        print(f"  grows as {axis}^{b:.2f} (R^2 {r2:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS[:4]),
        help="comma-separated commands to measure (default: %(default)s; or floor)",
    )
    parser.add_argument("--wall", action="store_true", help="wall seconds instead of CPU")
    parser.add_argument("--compiled", action="store_true", help="modules byte-compiled once")
    parser.add_argument("--checkout", type=Path, help="time DIR/nsdiag instead of this one")
    parser.add_argument("--before", type=Path, help="another run's --json, shown beside")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    kinds = [k for k in KINDS if k in options.kinds.split(",")]
    if "floor" in kinds:  # wall seconds, against the read floor: its own table
        with tempfile.TemporaryDirectory() as tmp:
            env = None
            if options.compiled:
                plain = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
                env = {**plain, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
                # every module compiled into the cache once: explain's, and both floors'
                warm = DATA / "programs/infer_cnn"
                wall([sys.executable, "-m", "nsdiag", "explain", str(warm)], env, ROOT)
                if options.checkout:
                    wall(
                        [sys.executable, "-m", "nsdiag", "explain", str(warm)],
                        env,
                        options.checkout,
                    )
                wall(floor_command(warm), env)
                wall(floor_command(DATA / "nsys/pipeline.sqlite.gz"), env)
            checkout = options.checkout.resolve() if options.checkout else None
            before = f" {'before':>7s} {'ratio':>6s}" if checkout else ""
            print(
                f"{'explain':>7s} {'floor':>7s} {'ratio':>6s}{before} {'launches':>8s} "
                f"{'period':>7s}  recording (wall s, median of {options.repeat})"
            )
            rows = measure_floor(options.repeat, env, checkout)
            report_floor(rows)
            load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
            print(f"{os.cpu_count()} cores, load average at the end {load}")
            if options.json:
                options.json.write_text(
                    json.dumps(
                        {"compiled": options.compiled, "repeat": options.repeat, "rows": rows},
                        indent=1,
                    )
                )
        return
    clock: dict[str, Any] = {"wall": options.wall, "checkout": options.checkout}
    unit = "wall s" if options.wall else "CPU s"
    baseline: list[float] = []
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        if options.compiled:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            clock["env"] = {**env, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
            warm_up = ["explain", str(DATA / "programs/infer_cnn")]  # imports all it needs
            seconds(warm_up, **clock)
        found = recordings() + loose_exports() if {"explain", "report"} & set(kinds) else []
        for path in found:
            name = str(path.relative_to(DATA))
            inputs = _inputs(path)
            if "explain" in kinds:
                value = measure(["explain", *inputs], options.repeat, baseline, clock)
                rows.append(("explain", name, value))
            if "report" in kinds:
                report = str(Path(tmp) / "report.html")
                cmd = ["report", *inputs, "-o", report]
                rows.append(("report", name, measure(cmd, options.repeat, baseline, clock)))
        for before, after in DIFF_PAIRS if "diff" in kinds else []:
            pair = [str(DATA / before), str(DATA / after)]
            value = measure(["diff", *pair], options.repeat, baseline, clock)
            rows.append(("diff", f"{before} -> {after}", value))
        for args in RULES_COMMANDS if "rules" in kinds else []:
            value = measure(["rules", *args], max(options.repeat, 5), baseline, clock)
            rows.append(("rules", " ".join(args), value))
    start = statistics.median(baseline)
    earlier: dict[tuple[str, str], float] = {}
    if options.before:
        for row in json.loads(options.before.read_text())["rows"]:
            earlier[(row["command"], row["recording"])] = row.get("seconds", row.get("cpu_s"))
    _report(rows, start, earlier, unit)
    if options.json:
        fields = ("command", "recording", "seconds")
        options.json.write_text(
            json.dumps(
                {
                    "clock": "wall" if options.wall else "cpu",
                    "compiled": options.compiled,
                    "repeat": options.repeat,
                    "startup_s": start,
                    "rows": [dict(zip(fields, r, strict=True)) for r in rows],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
