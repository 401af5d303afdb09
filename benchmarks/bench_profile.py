"""Benchmark `nsdiag profile` (targeted) against `ncu --set full`, on a GPU.

    python benchmarks/bench_profile.py [--workload tiny_transformer|reference] [--out DIR]
        [--ncu PATH] [--nsys PATH] [--coverage 0.9] [--full-budget-launches N] [--json PATH]
        [-- workload arguments]

Runs, in order:
  1. the workload alone (its wall time T_plain: start-up, warm-up, one step);
  2. `nsdiag profile` on it (timeline with nsys, then the targeted ncu runs, exports, tables):
     the measured wall time T_targeted;
  3. `ncu --set full` with the very filters of step 2's runs (same kernels, full set): the full
     set's cost per launch c = (T - runs x T_plain) / launches, and the verdicts to compare with;
  4. with --full-budget-launches N > 0: `ncu --set full` on the first N launches of the step;
     c is then taken from this run (a typical mix of launches rather than the costliest
     kernels), and when N covers every launch its time is the baseline itself.

The baseline `ncu --set full` on every launch of the step is T_full = T_plain + c x launches,
measured instead when step 4 covered every launch. Exports are not counted in T_full (they are
in T_targeted), so the ratio T_full / T_targeted is, if anything, low. The verdict check
compares bound and limiter of every kernel signature step 2 profiled (those covering
`--coverage` of GPU time) with the full-set diagnosis of the same signature.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsdiag.analysis.engine import diagnose  # noqa: E402
from nsdiag.collect import argv as cmd  # noqa: E402
from nsdiag.collect import runner, session_dir, tools  # noqa: E402
from nsdiag.collect.profile import NullProgress, ProfileOptions, child_env, profile, resolve_program  # noqa: E402

WORKLOADS = {"tiny_transformer": Path(__file__).resolve().parent / "workloads" / "tiny_transformer.py"}


class Printer(NullProgress):
    def phase(self, title: str, total: int | None) -> None:
        print(f"  [{time.strftime('%H:%M:%S')}] {title}" + (f" ({total} launches planned)" if total else ""), flush=True)

    def note(self, text: str) -> None:
        print(f"  note: {text}", flush=True)


def timed(argv: Sequence[str], log: Path) -> runner.RunResult:
    result = runner.run(argv, log, env=child_env())
    error = runner.failure(result, Path(argv[0]).name)
    if error:
        raise SystemExit(f"bench_profile: {error}")
    return result


def full_set_argv(targeted: Sequence[str], output: Path) -> list[str]:
    """A targeted round's command with `--set full` instead of its sections, writing `output`."""
    argv, i = [targeted[0], "--set", "full"], 1
    while i < len(targeted):
        if targeted[i] == "--section":
            i += 2
            continue
        argv.append(str(output) if i > 0 and targeted[i - 1] == "-o" else targeted[i])
        i += 1
    return argv


def export_and_diagnose(ncu: Path, reports: list[Path], logs: Path) -> Any:
    pairs = []
    for report in reports:
        stem = report.name.removesuffix(".ncu-rep")
        raw, details = report.with_name(f"{stem}.raw.csv"), report.with_name(f"{stem}.details.csv")
        runner.run(cmd.ncu_export_raw(ncu, report), logs / f"{stem}-raw.log", stdout_to=raw)
        runner.run(cmd.ncu_export_details(ncu, report), logs / f"{stem}-details.log", stdout_to=details)
        pairs.append((raw, details))
    session = session_dir.assemble(pairs, None, {})
    return diagnose(session) if session is not None else None


def compare(targeted: Any, full: Any) -> dict[str, Any]:
    theirs = {(k.name, k.grid, k.block): k for k in full.kernels} if full else {}
    rows = []
    for k in targeted.kernels:
        other = theirs.get((k.name, k.grid, k.block))
        if other is not None:
            rows.append({"name": k.name, "grid": k.grid, "block": k.block, "targeted": f"{k.bound}/{k.limiter}",
                         "full": f"{other.bound}/{other.limiter}",
                         "agree": (k.bound, k.limiter) == (other.bound, other.limiter)})
    return {"compared": len(rows), "agree": sum(r["agree"] for r in rows), "targeted_signatures": len(targeted.kernels),
            "differences": [r for r in rows if not r["agree"]]}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=(*WORKLOADS, "reference"), default="tiny_transformer")
    p.add_argument("--out", type=Path, default=Path("/tmp/nsdiag-bench-profile"))
    p.add_argument("--ncu"), p.add_argument("--nsys")
    p.add_argument("--coverage", type=float, default=0.9)
    p.add_argument("--full-budget-launches", type=int, default=0, metavar="N",
                   help="also run --set full on the first N launches (0: skip; >= the step's launches: the real baseline)")
    p.add_argument("--json", type=Path)
    p.add_argument("workload_args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    extra = [a for a in args.workload_args if a != "--"]
    program_args = [] if args.workload == "reference" else [str(WORKLOADS[args.workload]), *extra]
    program, _ = resolve_program(program_args)
    ncu = tools.find_tool("ncu", args.ncu)
    args.out.mkdir(parents=True, exist_ok=True)
    logs = args.out / "logs"
    figures: dict[str, Any] = {"workload": args.workload, "program": program, "ncu": ncu.version}

    print(f"1. plain run: {' '.join(program)}", flush=True)
    start = time.monotonic()
    subprocess.run(program, check=True, env=child_env())
    t_plain = figures["plain_s"] = time.monotonic() - start

    print("2. nsdiag profile (targeted)", flush=True)
    start = time.monotonic()
    result = profile(program_args, ProfileOptions(output=args.out / "targeted", ncu=args.ncu, nsys=args.nsys,
                                                  coverage=args.coverage, profile_from_start=False), Printer())
    t_targeted = figures["targeted_s"] = time.monotonic() - start
    plan = result.plan
    assert plan is not None and result.session is not None
    figures.update(targeted_steps_s={k: round(v, 1) for k, v in result.timings.items()}, launches=plan.total_launches,
                   signatures_planned=len(plan.signatures), planned_share=plan.planned_share,
                   targeted_runs=len(plan.rounds), targeted_profiled=result.profiled, missing=list(result.missing))
    targeted_diag = diagnose(result.session)

    print("3. ncu --set full on the same kernels", flush=True)
    reports, t_same, profiled = [], 0.0, 0
    for i, r in enumerate(plan.rounds, start=1):
        out = args.out / "full-same" / f"round-{i}"
        out.parent.mkdir(parents=True, exist_ok=True)
        run = timed(full_set_argv(r.argv, out), logs / f"full-same-{i}.log")
        t_same, profiled = t_same + run.wall_s, profiled + run.profiled
        reports.append(out.with_name(out.name + ".ncu-rep"))
    per_launch = (t_same - len(plan.rounds) * t_plain) / max(profiled, 1)
    figures.update(full_same_s=t_same, full_same_launches=profiled, full_s_per_launch=per_launch)
    full_diag = export_and_diagnose(ncu.path, reports, logs)
    t_full, how = t_plain + per_launch * plan.total_launches, "estimated from the same-kernel run"

    if args.full_budget_launches > 0:
        n = args.full_budget_launches
        print(f"4. ncu --set full on the first {n} launches", flush=True)
        out = args.out / "full-first"
        argv = cmd.ncu_full(ncu.path, out, program, profile_from_start=False)
        run = timed(argv[:1] + ["--launch-count", str(n)] + argv[1:], logs / "full-first.log")
        figures.update(full_first_s=run.wall_s, full_first_launches=run.profiled)
        if run.profiled >= plan.total_launches:
            t_full, how = run.wall_s, "measured"
        else:
            per_launch = (run.wall_s - t_plain) / max(run.profiled, 1)
            t_full, how = t_plain + per_launch * plan.total_launches, f"estimated from the first {run.profiled} launches"
    figures.update(full_every_launch_s=t_full, full_every_launch_basis=how, ratio=t_full / t_targeted,
                   verdicts=compare(targeted_diag, full_diag))

    v = figures["verdicts"]
    print(f"\nworkload {args.workload}: {plan.total_launches} kernel launches in the profiled step; plan: "
          f"{len(plan.signatures)} signatures covering {plan.planned_share:.1%} of GPU time, {len(plan.rounds)} ncu run(s), "
          f"{result.profiled} launches profiled")
    print(f"plain run                       {t_plain:8.1f} s")
    print(f"nsdiag profile (targeted)       {t_targeted:8.1f} s   steps: {figures['targeted_steps_s']}")
    print(f"ncu --set full, same kernels    {t_same:8.1f} s   ({profiled} launches, {per_launch:.2f} s per launch)")
    print(f"ncu --set full, every launch    {t_full:8.1f} s   ({how})")
    print(f"ratio full / targeted           {t_full / t_targeted:8.1f} x")
    print(f"verdicts (bound + limiter) agree for {v['agree']} of {v['compared']} signatures compared "
          f"({v['targeted_signatures']} profiled by the targeted run)")
    for d in v["differences"]:
        print(f"  differs: {d['name'][:90]} {d['grid']} {d['block']}: targeted {d['targeted']}, full {d['full']}")
    if result.missing:
        print("targeted session lacks: " + "; ".join(result.missing))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
