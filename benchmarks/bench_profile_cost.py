"""What `nsdiag profile` costs against running the program plainly (issues 26 and 38), on a GPU.

    python benchmarks/bench_profile_cost.py run --out DIR [--only NAME ...] [--within SECONDS]
                                                [--no-warm-up]
        for each program of PROGRAMS: the plain run's wall time, then `nsdiag profile -o
        DIR/NAME` of it (its wall time and status.json's breakdown); one JSON per program in DIR.
        With --within, the call ends by then: a program is not started with less than
        MIN_START_S left, and one still running at the end is stopped (SIGTERM: nsdiag keeps its
        partial session) and recorded as such
    python benchmarks/bench_profile_cost.py summary --out DIR [--reference NAME=SESSION ...]
        (anywhere, no GPU) one line per program (ratio, phases, each ncu run and why it ended),
        the median, and, with --reference, whether the bound and limiter of every signature the
        reference session profiled are the same in the new one

Both times are whole wall times of one process each, measured in the same call on the same
machine, so the ratio is what a user weighs: `nsdiag profile prog.py` against `python prog.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
P = "benchmarks/programs"
PROGRAMS: dict[str, list[str]] = {
    "vit_fp32": [f"{P}/vit_train.py"],
    "vit_bf16": [f"{P}/vit_train.py", "--precision", "bf16"],
    "loader_cnn": [f"{P}/train_loader.py"],
    "bert_b1": [f"{P}/bert_serve.py"],
    "bert_graph": [f"{P}/bert_serve.py", "--cuda-graph"],
    "llama": [f"{P}/llama_train.py"],
    # issue 38: launch-heavy and DataLoader-fed programs
    "decode": [f"{P}/decode.py"],  # GPT-2 generate() at batch 1, 12 requests
    "loader_cnn50": [f"{P}/train_loader.py", "--model", "resnet50"],
    "optim_foreach": [f"{P}/optim_step.py"],  # ViT-S, AdamW(foreach=False)
}
MIN_START_S = 30.0  # with --within: a program is not started with less time left
STOP_GRACE_S = 60.0  # a stopped `nsdiag profile` has this long to save its partial session


def _timed(argv: list[str], log: Path, limit_s: float | None = None) -> tuple[float, int, bool]:
    """Wall seconds, exit code and whether it was stopped at `limit_s` (SIGTERM to its process
    group, as a time limit would: nsdiag saves what it recorded; SIGKILL after STOP_GRACE_S)."""
    start = time.monotonic()
    with log.open("w") as f:
        proc = subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=limit_s)
            stopped = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                code = proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
            stopped = True
    return time.monotonic() - start, code, stopped


# Imported once, untimed, before the first program: on a fresh machine the first import of torch
# and the model libraries reads them from disk (the first plain run of a call took 23.6 s where
# the same program took 14.3 s in the next call), which would flatter that program's ratio.
WARM_UP = "import torch, torchvision, timm, transformers"


def run(out: Path, only: list[str], within_s: float | None, warm_up: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    end = time.monotonic() + within_s if within_s is not None else None
    if warm_up:
        warm_s, _, _ = _timed([sys.executable, "-c", WARM_UP], out / "warm_up.log")
        print(f"warm-up imports (untimed in the ratios): {warm_s:.1f} s", flush=True)
    for name, program in PROGRAMS.items():
        if only and name not in only:
            continue
        left = end - time.monotonic() if end is not None else None
        if left is not None and left < MIN_START_S:
            print(f"{name:14s} not started: {left:.0f} s left of --within", flush=True)
            continue
        plain_s, plain_rc, _ = _timed([sys.executable, *program], out / f"{name}.plain.log", left)
        session = out / name
        if session.exists():  # a session of an earlier run here: nsdiag would pick another name
            shutil.rmtree(session)
        left = end - time.monotonic() if end is not None else None
        profile_s, profile_rc, stopped = _timed(
            [sys.executable, "-m", "nsdiag", "profile", "-v", "-o", str(session), *program],
            out / f"{name}.profile.log",
            max(left, 1.0) if left is not None else None,
        )
        status: dict[str, Any] = {}
        if (session / "status.json").is_file():
            status = json.loads((session / "status.json").read_text())
        result = {
            "name": name,
            "program": program,
            "plain_s": round(plain_s, 2),
            "plain_rc": plain_rc,
            "profile_s": round(profile_s, 2),
            "profile_rc": profile_rc,
            "ratio": round(profile_s / plain_s, 2),
            "complete": status.get("complete"),
            "missing": status.get("missing"),
            "breakdown": status.get("breakdown"),
            "estimate": status.get("estimate"),
            "phase2_limit": status.get("phase2_limit"),
            **({"stopped_at_within": True} if stopped else {}),
        }
        (out / f"{name}.json").write_text(json.dumps(result, indent=1))
        print(_line(result), flush=True)


# ncu runs' endings as the summary writes them (collect/watch.py's kinds)
ENDED = {"planned": "plan met", "stalled": "stalled", "limit": "at limit"}


def _line(r: dict[str, Any]) -> str:
    """One program: both wall times, the ratio, phase 1 and 2, each ncu run (wall/profiled,
    how it ended), and whether the session is complete."""
    breakdown = r.get("breakdown") or {}
    phases = breakdown.get("phases_s") or {}
    runs = ", ".join(
        f"{x['wall_s']:.0f} s/{x['launches_profiled']}"
        + (f" {ENDED.get(x.get('ended_by', ''), 'ended early')}" if x.get("ended_early") else "")
        for x in breakdown.get("ncu_runs") or []
    )
    stopped = " STOPPED at --within" if r.get("stopped_at_within") else ""
    return (
        f"{r['name']:14s} {r['plain_s']:6.1f}s {r['profile_s']:7.1f}s {r['ratio']:5.2f}x  "
        f"p1 {phases.get('phase1', 0):.0f} s, p2 {phases.get('phase2', 0):.0f} s "
        f"[{runs or 'no ncu run'}]; complete {r.get('complete')}{stopped}"
    )


def _verdicts(session: Path) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(name, grid, block) -> (bound, limiter) of every profiled signature."""
    sys.path.insert(0, str(ROOT))
    from nsdiag import load
    from nsdiag.analysis.engine import diagnose

    diagnosis = diagnose(load([session]))
    return {
        (k.demangled, k.grid, k.block): (k.bound, str(k.limiter))
        for k in diagnosis.kernels
        if k.bound not in ("unknown", "unprofiled", "")
    }


def summary(out: Path, references: list[str]) -> None:
    results = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    results = [r for r in results if "ratio" in r]
    print(
        f"{'program':14s} {'plain':>7s} {'profile':>8s} {'ratio':>6s}  phases [ncu runs s/launches]"
    )
    for r in results:
        print(_line(r))
    if results:
        ratios = [r["ratio"] for r in results]
        print(f"median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x over {len(ratios)}")
    for pair in references:
        name, _, reference = pair.partition("=")
        old, new = _verdicts(Path(reference)), _verdicts(out / name)
        both = sorted(set(old) & set(new))
        differ = [k for k in both if old[k] != new[k]]
        print(
            f"{name}: bound and limiter equal on {len(both) - len(differ)} of {len(both)} "
            f"signatures both profiled ({len(old)} in the reference, {len(new)} now)"
        )
        for k in differ[:MAX_DIFFERENCES]:
            print(f"   differs: {k[0][:70]} {k[1]} {k[2]}: was {old[k]}, now {new[k]}")
        if len(differ) > MAX_DIFFERENCES:
            print(f"   and {len(differ) - MAX_DIFFERENCES} more")


MAX_DIFFERENCES = 5  # per reference, in the summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("run", "summary"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--reference", action="append", default=[], metavar="NAME=SESSION")
    parser.add_argument("--within", type=float, metavar="SECONDS", help="end the call by then")
    parser.add_argument("--no-warm-up", action="store_true", help="imports already warmed")
    args = parser.parse_args()
    if args.stage == "run":
        run(args.out, args.only, args.within, warm_up=not args.no_warm_up)
    else:
        summary(args.out, args.reference)


if __name__ == "__main__":
    main()
