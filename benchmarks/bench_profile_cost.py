"""What `nsdiag profile` costs against running the program plainly (issue 26), on a GPU.

    python benchmarks/bench_profile_cost.py run --out DIR [--only NAME ...]
        for each program of PROGRAMS: the plain run's wall time, then `nsdiag profile -o
        DIR/NAME` of it (its wall time and status.json's breakdown); one JSON per program in DIR
    python benchmarks/bench_profile_cost.py summary --out DIR [--reference NAME=SESSION ...]
        (anywhere, no GPU) the ratio per program, the median, each run's breakdown, and, with
        --reference, whether the bound and limiter of every signature the reference session
        profiled are the same in the new one

Both times are whole wall times of one process each, measured in the same call on the same
machine, so the ratio is what a user weighs: `nsdiag profile prog.py` against `python prog.py`.
"""

from __future__ import annotations

import argparse
import json
import shutil
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
}


def _timed(argv: list[str], log: Path) -> tuple[float, int]:
    start = time.monotonic()
    with log.open("w") as f:
        code = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    return time.monotonic() - start, code


# Imported once, untimed, before the first program: on a fresh machine the first import of torch
# and the model libraries reads them from disk (the first plain run of a call took 23.6 s where
# the same program took 14.3 s in the next call), which would flatter that program's ratio.
WARM_UP = "import torch, torchvision, timm, transformers"


def run(out: Path, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    warm_s, _ = _timed([sys.executable, "-c", WARM_UP], out / "warm_up.log")
    print(f"warm-up imports (untimed in the ratios): {warm_s:.1f} s", flush=True)
    for name, program in PROGRAMS.items():
        if only and name not in only:
            continue
        plain_s, plain_rc = _timed([sys.executable, *program], out / f"{name}.plain.log")
        session = out / name
        if session.exists():  # a session of an earlier run here: nsdiag would pick another name
            shutil.rmtree(session)
        profile_s, profile_rc = _timed(
            [sys.executable, "-m", "nsdiag", "profile", "-v", "-o", str(session), *program],
            out / f"{name}.profile.log",
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
        }
        (out / f"{name}.json").write_text(json.dumps(result, indent=1))
        print(
            f"{name:12s} plain {plain_s:6.1f} s  profile {profile_s:6.1f} s  "
            f"ratio {profile_s / plain_s:5.2f}x  complete {status.get('complete')}",
            flush=True,
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
        f"{'program':12s} {'plain':>7s} {'profile':>8s} {'ratio':>6s}  ncu runs (wall s, launches)"
    )
    for r in results:
        runs = (r.get("breakdown") or {}).get("ncu_runs") or []
        desc = ", ".join(
            f"{x['wall_s']:.0f} s/{x['launches_profiled']}"
            + (" ended early" if x.get("ended_early") else "")
            for x in runs
        )
        phases = (r.get("breakdown") or {}).get("phases_s") or {}
        print(
            f"{r['name']:12s} {r['plain_s']:6.1f}s {r['profile_s']:7.1f}s {r['ratio']:5.2f}x  "
            f"{desc}; phases {phases}; complete {r['complete']}"
        )
    if results:
        ratios = [r["ratio"] for r in results]
        print(f"median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x over {len(ratios)}")
    for pair in references:
        name, _, reference = pair.partition("=")
        old, new = _verdicts(Path(reference)), _verdicts(out / name)
        both = sorted(set(old) & set(new))
        same = [k for k in both if old[k] == new[k]]
        print(
            f"{name}: bound and limiter equal on {len(same)} of {len(both)} signatures both "
            f"profiled ({len(old)} in the reference, {len(new)} now)"
        )
        for k in both:
            if old[k] != new[k]:
                print(f"   differs: {k[0][:70]} {k[1]} {k[2]}: was {old[k]}, now {new[k]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("run", "summary"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--reference", action="append", default=[], metavar="NAME=SESSION")
    args = parser.parse_args()
    if args.stage == "run":
        run(args.out, args.only)
    else:
        summary(args.out, args.reference)


if __name__ == "__main__":
    main()
