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
"""

from __future__ import annotations

import argparse
import json
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

KINDS = ("explain", "report", "diff", "rules")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help="comma-separated commands to measure (default: %(default)s)",
    )
    parser.add_argument("--wall", action="store_true", help="wall seconds instead of CPU")
    parser.add_argument("--compiled", action="store_true", help="modules byte-compiled once")
    parser.add_argument("--checkout", type=Path, help="time DIR/nsdiag instead of this one")
    parser.add_argument("--before", type=Path, help="another run's --json, shown beside")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    kinds = [k for k in KINDS if k in options.kinds.split(",")]
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
