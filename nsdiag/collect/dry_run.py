"""`nsdiag profile --dry-run`: the commands a run would start, without starting any."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nsdiag.collect import argv as cmd
from nsdiag.collect import session_dir, standby, tools
from nsdiag.collect.options import ProfileOptions
from nsdiag.collect.program import profile_from_start, pytorch_ranges, resolve_program

Step = tuple[str, list[str]]  # (title, argv)


def dry_run(args: Sequence[str], options: ProfileOptions) -> tuple[list[Step], list[str]]:
    """The commands a run would start (phase 2 as a template: it depends on phase 1), and notes."""
    program, _ = resolve_program(args)
    start = profile_from_start(options.profile_from_start)
    ncu = tools.find_optional("ncu", options.ncu)
    nsys = tools.find_optional("nsys", options.nsys)
    notes = [
        f"{n} not found here: shown as '{n}'"
        for n, t in (("ncu", ncu), ("nsys", nsys))
        if t is None
    ]
    ncu_path, nsys_path = (ncu.path if ncu else "ncu"), (nsys.path if nsys else "nsys")
    sd = session_dir.SessionDir(options.output or session_dir.default_path(program))
    ranges = pytorch_ranges(nsys.version_tuple if nsys else None, program)
    steps = _phase1_steps(ncu_path, nsys_path, sd, program, start, options, ranges)
    phase2, report = _phase2_step(ncu_path, sd, program, start, options)
    if not options.full and standby.usable(
        program, profile_from_start=start, sequential=options.sequential
    ):
        port = 49152  # the run picks free ports
        launch = cmd.ncu_launch(ncu_path, program, port, standby.CONNECTIONS)
        steps.insert(0, ("phase 2's program, started beside phase 1 and held (ncu)", launch))
        title, argv = phase2
        phase2 = (
            title + ", the first attached to that program",
            cmd.ncu_attach(argv, program, port, standby.CONNECTIONS),
        )
        notes.append(
            "phase 2's program starts beside phase 1 and waits, held by ncu at its first CUDA "
            "call, for the first targeted run to attach (--sequential: start it after phase 1)"
        )
    steps.append(phase2)
    if not options.full:
        notes.append(
            f"phase 2 profiles the kernel signatures covering {options.coverage:.0%} of the "
            f"analysed region's GPU time (at most {options.max_kernels}), chosen from phase 1, "
            "each at a launch inside the region (--launch-skip steps over its warm-up launches)"
        )
    if options.budget_s is not None:
        notes.append(
            f"--budget {options.budget_s:g} s: phase 2 keeps the signatures with the most GPU time "
            "whose estimate (ncu runs x program time + launches x passes x seconds per pass + "
            "exports) fits, and records the others in status.json"
        )
    if options.profile_from_start is None:
        notes.append(
            "phase 2 adds --profile-from-start off when phase 1 sees the program call "
            "cudaProfilerStart (the region is then its profiler range)"
        )
    steps += [
        ("export: raw page", cmd.ncu_export_raw(ncu_path, report)),
        ("export: details page", cmd.ncu_export_details(ncu_path, report)),
    ]
    notes.append(f"session folder: {sd.root}")
    return steps, notes


def _phase1_steps(
    ncu: str | Path,
    nsys: str | Path,
    sd: session_dir.SessionDir,
    program: list[str],
    start: bool,
    options: ProfileOptions,
    pytorch_functions: bool,
) -> list[Step]:
    timeline = cmd.nsys_profile(
        nsys,
        sd.report("timeline"),
        program,
        profile_from_start=start,
        pytorch_functions=pytorch_functions,
    )
    return [
        ("phase 1: timeline (nsys)", timeline),
        (
            "phase 1: export",
            cmd.nsys_export_sqlite(
                nsys, sd.report("timeline.nsys-rep"), sd.report("timeline.sqlite")
            ),
        ),
        (
            "phase 1 without a working nsys: durations (ncu)",
            cmd.ncu_durations(
                ncu,
                sd.report("durations"),
                program,
                profile_from_start=start,
                nvtx=options.nvtx,
            ),
        ),
    ]


def _phase2_step(
    ncu: str | Path,
    sd: session_dir.SessionDir,
    program: list[str],
    start: bool,
    options: ProfileOptions,
) -> tuple[Step, Path]:
    """Phase 2's command (a template for the targeted runs) and the report it writes."""
    if options.full:
        title, name = "phase 2: every launch, full set (ncu)", "full"
        argv = cmd.ncu_full(
            ncu,
            sd.report(name),
            program,
            kernel_regex=options.kernel,
            profile_from_start=start,
            nvtx=options.nvtx,
        )
    else:
        title, name = "phase 2: targeted, one run per plan round (ncu)", "targeted-1"
        argv = cmd.template_targeted(
            ncu,
            sd.report(name),
            program,
            sections=options.sections,
            profile_from_start=start,
            nvtx=options.nvtx,
        )
    return (title, argv), sd.report(f"{name}.ncu-rep")
