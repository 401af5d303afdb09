"""Benchmark `nsdiag profile` (targeted) against `ncu --set full` on every launch, on a GPU.

The stages run separately, because `--set full` on a few hundred launches outlasts a 10-minute
slot on the test machine; each writes JSON into --out, and `summary` (anywhere, no GPU) reads it:

    python benchmarks/bench_profile.py targeted --out DIR [-- workload arguments]
        1. the workload alone: T_plain (start-up, warm-up, one step);
        2. `nsdiag profile` on it (nsys timeline, plan, targeted ncu, exports, tables): T_targeted.
    python benchmarks/bench_profile.py full --out DIR --skip S --count C [-- workload arguments]
        `ncu --set full` on launches S .. S+C-1 of the profiled step (every launch, in slices);
        its raw CSV export is kept for the verdict check; --count 0 means to the end.
    python benchmarks/bench_profile.py summary --out DIR [--full-from DIR] [--json PATH]
        T_full = sum of the slices' wall times - (slices - 1) x T_plain (each slice also ran
        the program once, the real single run would too); ratio T_full / T_targeted; and, for
        every kernel signature the targeted session profiled, whether its verdict (bound and
        limiter) equals the full-set verdict of the same signature (kernel name, grid, block).

Exports are not counted in T_full (they are in T_targeted), so the ratio is, if anything, low.
The workload defaults to benchmarks/workloads/tiny_transformer.py; `--workload reference` is the
bundled reference kernels.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsdiag.analysis.engine import diagnose
from nsdiag.collect import argv as cmd
from nsdiag.collect import breakdown, runner, session_dir, tools
from nsdiag.collect.options import NullProgress, ProfileOptions
from nsdiag.collect.profile import profile
from nsdiag.collect.program import child_env, resolve_program
from nsdiag.model.names import normalized
from nsdiag.readers.session_folder import read_status

WORKLOADS = {
    "tiny_transformer": Path(__file__).resolve().parent / "workloads" / "tiny_transformer.py"
}


class Printer(NullProgress):
    def phase(self, title: str, total: int | None) -> None:
        print(
            f"  [{time.strftime('%H:%M:%S')}] {title}"
            + (f" ({total} launches planned)" if total else ""),
            flush=True,
        )

    def note(self, text: str) -> None:
        print(f"  note: {text}", flush=True)


def program_args(args: argparse.Namespace) -> list[str]:
    return (
        [] if args.workload == "reference" else [str(WORKLOADS[args.workload]), *args.workload_args]
    )


def write(out: Path, name: str, figures: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(figures, indent=1, default=str))
    print(json.dumps(figures, default=str)[:2000], flush=True)


def stage_targeted(args: argparse.Namespace) -> int:
    argv = program_args(args)
    program, _ = resolve_program(argv)
    print(f"1. plain run: {' '.join(program)}", flush=True)
    start = time.monotonic()
    subprocess.run(program, check=True, env=child_env())
    t_plain = time.monotonic() - start
    print(f"2. nsdiag profile (targeted, sections: {args.sections})", flush=True)
    start = time.monotonic()
    result = profile(
        argv,
        ProfileOptions(
            output=args.out / args.name,
            ncu=args.ncu,
            nsys=args.nsys,
            coverage=args.coverage,
            profile_from_start=False,
            sections=args.sections,
        ),
        Printer(),
    )
    t_targeted = time.monotonic() - start
    plan = result.plan
    assert plan is not None
    write(
        args.out,
        f"{args.name}.json",
        {
            "workload": args.workload,
            "program": program,
            "plain_s": t_plain,
            "targeted_s": t_targeted,
            "sections": args.sections,
            "steps_s": {k: round(v, 2) for k, v in result.timings.items()},
            "launches": plan.total_launches,
            "signatures_chosen": len(plan.signatures),
            "name_base": plan.name_base,
            "planned_share": plan.planned_share,
            "runs": len(plan.rounds),
            "planned_launches": plan.launches,
            "profiled": result.profiled,
            "missing": list(result.missing),
            "session": str(result.session_dir),
            "breakdown": _breakdown(result.session_dir),
        },
    )
    return 0


def _breakdown(session_path: Path) -> dict[str, Any]:
    """Where the run's time went (status.json's breakdown, collect/breakdown.py)."""
    status = read_status(session_path)
    return breakdown.of_status(status) if status is not None else {}


def stage_full(args: argparse.Namespace) -> int:
    program, _ = resolve_program(program_args(args))
    ncu = tools.find_tool("ncu", args.ncu)
    name = f"full-{args.skip:04d}"
    report = args.out / name
    argv = cmd.ncu_full(ncu.path, report, program, profile_from_start=False)
    window = ["--launch-skip", str(args.skip)] + (
        ["--launch-count", str(args.count)] if args.count else []
    )
    argv = argv[:1] + window + argv[1:]
    print(
        f"full set on launches {args.skip}..{args.skip + args.count - 1 if args.count else 'end'}",
        flush=True,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    run = runner.run(argv, args.out / f"{name}.log", env=child_env())
    error = runner.failure(run, "ncu --set full")
    rep = report.with_name(name + ".ncu-rep")
    raw = args.out / f"{name}.raw.csv"
    exported = (
        runner.run(
            cmd.ncu_export_raw(ncu.path, rep), args.out / f"{name}-export.log", stdout_to=raw
        )
        if rep.is_file()
        else None
    )
    write(
        args.out,
        f"{name}.json",
        {
            "skip": args.skip,
            "count": args.count,
            "wall_s": run.wall_s,
            "profiled": run.profiled,
            "returncode": run.returncode,
            "error": str(error) if error else None,
            "raw_csv": raw.name if exported is not None and exported.ok else None,
        },
    )
    return 0 if error is None else 1


def verdicts(session: Any) -> dict[tuple[str, str, str], tuple[str, str, bool]]:
    """Bound, limiter and whether nsdiag called it close, by signature; names normalised, as ncu
    spells namespaces differently from run to run (`at::<unnamed>::f` in one, `native::<unnamed>::f`
    in another)."""
    diagnosis = diagnose(session)
    return {
        (normalized(k.name), str(k.grid), str(k.block)): (k.bound, str(k.limiter), k.close_call)
        for k in diagnosis.kernels
    }


def planned_keys(session_path: Path) -> set[tuple[str, str, str]]:
    """The signatures the plan chose for coverage (status.json), as opposed to the other shapes of
    the same kernels ncu profiled on the way."""
    status = read_status(session_path)
    plan = (status.plan or {}) if status is not None else {}
    return {
        (normalized(s["name"]), str(s["grid"]), str(s["block"])) for s in plan.get("signatures", [])
    }


def _existing(path: Path) -> Path:
    """The export as recorded, or gzipped as tools/bench_profile_h200.sh brings it back."""
    gz = path.with_name(path.name + ".gz")
    return gz if not path.exists() and gz.exists() else path


def stage_summary(args: argparse.Namespace) -> int:
    targeted = json.loads((args.out / f"{args.name}.json").read_text())
    full_dir = args.full_from or args.out
    slices = sorted(
        (json.loads(p.read_text()) for p in full_dir.glob("full-*.json")), key=lambda s: s["skip"]
    )
    if not slices:
        raise SystemExit(f"bench_profile: no full-*.json in {full_dir}: run the `full` stage first")
    t_plain, t_targeted = targeted["plain_s"], targeted["targeted_s"]
    t_full = sum(s["wall_s"] for s in slices) - (len(slices) - 1) * t_plain
    session_path = Path(args.session) if args.session else args.out / args.name
    from nsdiag import load
    from nsdiag.readers.merge import merge_sessions

    mine = verdicts(load(session_path))
    full_sessions = [
        session_dir.load_ncu_report(_existing(full_dir / s["raw_csv"]), None)
        for s in slices
        if s.get("raw_csv")
    ]
    full_launches = sum(
        len(f.kernels) for f in full_sessions
    )  # the exports, not the progress lines
    theirs = verdicts(
        full_sessions[0] if len(full_sessions) == 1 else merge_sessions(full_sessions)
    )
    chosen = planned_keys(session_path)
    rows = [
        {
            "kernel": key[0],
            "grid": key[1],
            "block": key[2],
            "targeted": "/".join(v[:2]),
            "full": "/".join(theirs[key][:2]),
            "agree": v[:2] == theirs[key][:2],
            "bound_agrees": v[0] == theirs[key][0],
            "planned": key in chosen,
            "close_call": {"targeted": v[2], "full": theirs[key][2]},
        }
        for key, v in mine.items()
        if key in theirs
    ]
    planned_rows = [r for r in rows if r["planned"]]
    figures = {
        **targeted,
        "full_slices": slices,
        "full_s": t_full,
        "full_launches": full_launches,
        "full_s_per_launch": (t_full - t_plain) / max(full_launches, 1),
        "ratio": t_full / t_targeted,
        "compared": len(rows),
        "agree": sum(r["agree"] for r in rows),
        "targeted_signatures": len(mine),
        "bound_agree": sum(r["bound_agrees"] for r in rows),
        "planned_compared": len(planned_rows),
        "planned_agree": sum(r["agree"] for r in planned_rows),
        "differences": [r for r in rows if not r["agree"]],
    }
    print(
        f"workload {targeted['workload']}: {targeted['launches']} kernel launches "
        "in the profiled step"
    )
    print(
        f"plan: {targeted['signatures_chosen']} signatures chosen, "
        f"{targeted['planned_launches']} launches planned "
        f"({targeted['planned_share']:.1%} of GPU time), {targeted['runs']} ncu run(s), "
        f"{targeted['profiled']} profiled"
    )
    print(f"plain run                       {t_plain:8.1f} s")
    print(f"nsdiag profile (targeted)       {t_targeted:8.1f} s   steps: {targeted['steps_s']}")
    if isinstance(targeted.get("breakdown"), dict):  # recordings before it have none
        from nsdiag.cli.breakdown import lines

        print("\n".join(lines(targeted["breakdown"])))
    print(
        f"ncu --set full, every launch    {t_full:8.1f} s   "
        f"({full_launches} launches in {len(slices)} slice(s), "
        f"{figures['full_s_per_launch']:.2f} s per launch)"
    )
    print(f"ratio full / targeted           {figures['ratio']:8.1f} x")
    print(
        f"verdicts (bound/limiter) agree for {figures['agree']} of {figures['compared']} "
        "signatures compared "
        f"({figures['targeted_signatures']} in the targeted session)"
    )
    print(
        f"  of the {figures['planned_compared']} signatures the plan chose for coverage: "
        f"{figures['planned_agree']} agree; "
        f"bound alone agrees for {figures['bound_agree']} of {figures['compared']}"
    )
    for d in figures["differences"]:
        flagged = [side for side, close in d["close_call"].items() if close]
        print(
            f"  differs{' (planned)' if d['planned'] else ''}: "
            f"{d['kernel'][:90]} {d['grid']} {d['block']}: "
            f"targeted {d['targeted']}, full {d['full']}; "
            + (
                f"called a close call by {' and '.join(flagged)}"
                if flagged
                else "not called a close call"
            )
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stage", choices=("targeted", "full", "summary"))
    p.add_argument("--workload", choices=(*WORKLOADS, "reference"), default="tiny_transformer")
    p.add_argument("--out", type=Path, default=Path("/tmp/nsdiag-bench-profile"))
    p.add_argument("--name", default="targeted", help="the targeted session's name under --out")
    p.add_argument("--ncu"), p.add_argument("--nsys")
    p.add_argument("--coverage", type=float, default=0.9)
    p.add_argument("--sections", choices=cmd.SECTION_SETS, default="rules")
    p.add_argument("--skip", type=int, default=0), p.add_argument("--count", type=int, default=0)
    p.add_argument("--session", help="summary: the targeted session folder (default OUT/NAME)")
    p.add_argument(
        "--full-from",
        type=Path,
        help="summary: the full-set slices' folder (default OUT; the recorded "
        "ones are in tests/data/profile)",
    )
    p.add_argument("--json", type=Path)
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    args.workload_args = argv[cut + 1 :]
    return {"targeted": stage_targeted, "full": stage_full, "summary": stage_summary}[args.stage](
        args
    )


if __name__ == "__main__":
    sys.exit(main())
