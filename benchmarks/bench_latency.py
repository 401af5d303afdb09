"""Benchmark: how long a user waits for `nsdiag explain`, `report` and `diff` on the recordings,
and for `nsdiag rules list` / `rules show`.

    python benchmarks/bench_latency.py [--repeat N] [--kinds explain,report,diff,rules]
                                       [--json PATH]

Each command runs as a user runs it, a fresh `python -m nsdiag` process, and is timed in CPU
seconds of that process (user + system, so a busy machine inflates it less than wall time),
alternating with `nsdiag --help`, the start-up baseline measured in the same run. Prints each
command's median against the baseline's and the slowest of each kind. The recordings are
tools/snapshot_outputs.py's: every session folder and export under tests/data, and its
before/after pairs for diff. `--kinds rules` measures the rule table alone (seconds; it loads
every rule file, checked against the analyses' records, and imports no pandas).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from snapshot_outputs import DATA, DIFF_PAIRS, _inputs, recordings  # noqa: E402

KINDS = ("explain", "report", "diff", "rules")
# The rule table: every rule file loaded and checked (program rules against their analysis's
# record), then printed; one rule's documentation.
RULES_COMMANDS = (["list"], ["show", "NSD404"])


def cpu_seconds(args: list[str]) -> float:
    """CPU time of one `python -m nsdiag ARGS` process (its output discarded)."""
    before = os.times()
    subprocess.run(
        [sys.executable, "-m", "nsdiag", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def measure(args: list[str], repeat: int, baseline: list[float]) -> float:
    times = []
    for _ in range(repeat):
        baseline.append(cpu_seconds(["--help"]))
        times.append(cpu_seconds(args))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help="comma-separated commands to measure (default: %(default)s)",
    )
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    kinds = [k for k in KINDS if k in options.kinds.split(",")]
    baseline: list[float] = []
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in recordings() if {"explain", "report"} & set(kinds) else []:
            name = str(path.relative_to(DATA))
            inputs = _inputs(path)
            if "explain" in kinds:
                seconds = measure(["explain", *inputs], options.repeat, baseline)
                rows.append(("explain", name, seconds))
            if "report" in kinds:
                report = str(Path(tmp) / "report.html")
                cmd = ["report", *inputs, "-o", report]
                rows.append(("report", name, measure(cmd, options.repeat, baseline)))
        for before, after in DIFF_PAIRS if "diff" in kinds else []:
            pair = [str(DATA / before), str(DATA / after)]
            rows.append(("diff", f"{before} -> {after}", measure(["diff", *pair], 1, baseline)))
        for args in RULES_COMMANDS if "rules" in kinds else []:
            seconds = measure(["rules", *args], max(options.repeat, 5), baseline)
            rows.append(("rules", " ".join(args), seconds))
    start = statistics.median(baseline)
    print(f"start-up (nsdiag --help): {start:.2f} s CPU, median of {len(baseline)}")
    print(f"{'command':8s} {'CPU s':>7s} {'x start':>8s}  recording")
    for kind, name, seconds in sorted(rows, key=lambda r: (r[0], -r[2])):
        print(f"{kind:8s} {seconds:7.2f} {seconds / start:8.1f}  {name}")
    for kind in kinds:
        mine = [r for r in rows if r[0] == kind]
        worst = max(mine, key=lambda r: r[2])
        print(f"slowest {kind}: {worst[2]:.2f} s ({worst[2] / start:.1f}x start-up), {worst[1]}")
    if options.json:
        options.json.write_text(
            json.dumps(
                {
                    "startup_s": start,
                    "rows": [
                        dict(zip(("command", "recording", "cpu_s"), r, strict=True)) for r in rows
                    ],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
