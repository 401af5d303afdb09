"""`nsdiag profile`: thin click glue over nsdiag.collect (registered on the main group in app.py).
Errors become one line and an exit code (errors.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape

from nsdiag.cli.errors import CONTEXT, one_line_errors
from nsdiag.cli.help import examples
from nsdiag.cli.progress import RichProgress
from nsdiag.cli.rules import active_rules, rules_option

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nsdiag.analysis.rules.spec import RuleSpec
    from nsdiag.collect.options import ProfileResult


@click.command(
    "profile",
    context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Profile a program and say why its kernels are slow.",
    epilog=examples(
        "nsdiag profile train.py --epochs 1    # a script and its arguments",
        "nsdiag profile --nvtx step -- ./my_app --size 4096",
        "nsdiag profile --dry-run infer.py    # the commands it would run",
        "nsdiag profile    # the bundled reference kernels",
    ),
)
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="session folder (default nsdiag-sessions/<program>-<time>; an existing non-empty one "
    "gets a suffix)",
)
@click.option("--ncu", "ncu", metavar="PATH", help="the ncu to use (default: newest found)")
@click.option("--nsys", "nsys", metavar="PATH", help="the nsys to use (default: newest found)")
@click.option(
    "--full",
    is_flag=True,
    help="profile every launch with the full section set (slow: ~2 s per launch on an H200)",
)
@click.option(
    "--coverage",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.9,
    show_default=True,
    help="profile the kernel signatures that make up this share of GPU time",
)
@click.option(
    "--max-kernels",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="at most this many kernel signatures profiled (kernel + grid + block; the other shapes "
    "of a chosen kernel count too)",
)
@click.option(
    "-k",
    "--kernel",
    metavar="REGEX",
    help="only kernels whose name matches (Python regex on the demangled or "
    "function name; with --full, ncu's regex on the function name)",
)
@click.option(
    "--nvtx",
    metavar="RANGE",
    help="only kernels launched inside this NVTX push/pop range "
    "(or an ncu --nvtx-include expression with '/' or '@')",
)
@click.option(
    "--profile-from-start",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="auto: record the whole run, and profile kernels between cudaProfilerStart and "
    "cudaProfilerStop when the program calls them; on: from the start; off: only between them",
)
@click.option(
    "--region",
    default="auto",
    show_default=True,
    metavar="auto|all|nvtx:NAME|START:END",
    help="the part of the run to analyse and pick phase 2's launches from: auto (the profiler "
    "range, else the steady-state iterations, else the NVTX-annotated part), all, the instances "
    "of an NVTX range, or START:END in ms from the trace's first event",
)
@click.option(
    "--sections",
    type=click.Choice(["rules", "sections", "full"]),
    default="rules",
    show_default=True,
    help="what the targeted runs collect: the metrics nsdiag's rules read (fastest), the ncu "
    "sections holding them (adds ncu's own hints for each, ~4x slower), or ncu's full set",
)
@click.option(
    "--rank",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="a distributed run (torchrun, mpirun, srun under nsdiag): the rank whose kernels phase "
    "2 profiles with ncu (phase 1 records every rank)",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="phase 2 (ncu runs and exports) estimated at most this long: the signatures with the "
    "least GPU time are left out until it fits, and the session says which; also phase 2's "
    "limit: its runs end by then, keeping what they profiled (default limit: 5x phase 1's run, "
    "at least 30 s)",
)
@click.option(
    "--run-to-end",
    is_flag=True,
    help="let the program run to its end under ncu (default: each ncu run ends the program once "
    "its planned launches are profiled, once they stop coming, or at phase 2's limit; use this "
    "for programs that must not be stopped half-way: only an explicit --budget then stops them)",
)
@click.option(
    "--sequential",
    is_flag=True,
    help="start phase 2's program only after phase 1 (default for a Python script: ncu starts "
    "it beside phase 1 and holds it at its first CUDA call until the plan is made, so its "
    "start-up is not paid twice; use this when two copies must not start at once)",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="print where the time went (status.json's breakdown)"
)
@rules_option
@click.option("--dry-run", is_flag=True, help="print the commands that would run, and exit")
@click.option(
    "--json-lines",
    is_flag=True,
    help="for a program that drives nsdiag (nsdiag mcp): progress, the program's output and "
    "the result (the session folder, what it lacks) as one JSON object a line on stdout, "
    "instead of the progress bars and the summary",
)
@one_line_errors
def profile(
    program: tuple[str, ...],
    output: Path | None,
    ncu: str | None,
    nsys: str | None,
    full: bool,
    coverage: float,
    max_kernels: int,
    kernel: str | None,
    nvtx: str | None,
    profile_from_start: str,
    region: str,
    sections: str,
    rank: int,
    budget: float | None,
    run_to_end: bool,
    sequential: bool,
    verbose: bool,
    rule_dirs: tuple[Path, ...],
    dry_run: bool,
    json_lines: bool,
) -> None:
    """Profile a program and say why its kernels are slow.

    PROGRAM is a Python script with its arguments (run with this Python), or any command after
    `--`. Without one, the bundled reference kernels are profiled. Phase 1 records a timeline
    (nsys), phase 2 profiles one launch of each kernel signature that matters, and of each
    duration group of a signature that did different work under one grid (ncu, the metrics the
    rules read).
    """
    from nsdiag.cli.signals import interrupts_as_keyboard
    from nsdiag.collect.dry_run import dry_run as plan_commands
    from nsdiag.collect.options import ProfileOptions
    from nsdiag.collect.profile import profile as run_profile
    from nsdiag.collect.progress_lines import LineProgress, result_line

    if program and program[0].startswith("-"):
        raise click.UsageError(
            f"unknown option {program[0]!r} (nsdiag's options go before the program; "
            "a program whose name starts with '-' goes after --: nsdiag profile -- ./-app)"
        )
    if kernel:
        _check_regex(kernel)
    if budget is not None and full:
        raise click.UsageError("--budget leaves out kernel signatures; --full profiles them all")
    rules = active_rules(rule_dirs).rules  # a bad rule fails now, not after the profiling
    options = ProfileOptions(
        output=output,
        ncu=ncu,
        nsys=nsys,
        full=full,
        coverage=coverage,
        max_kernels=max_kernels,
        kernel=kernel,
        nvtx=nvtx,
        sections=sections,
        profile_from_start=None if profile_from_start == "auto" else profile_from_start == "on",
        region=region,
        rank=rank,
        budget_s=budget,
        run_to_end=run_to_end,
        sequential=sequential,
    )
    if dry_run:
        steps, notes = plan_commands(program, options)
        for title, argv in steps:
            click.echo(f"# {title}\n{shlex.join(argv)}\n")
        for note in notes:
            click.echo(f"# {note}")
        return
    console = Console(highlight=False)
    progress = LineProgress(click.echo) if json_lines else RichProgress(console)
    # SIGTERM (a time limit, a cancelled `nsdiag mcp` call) takes Ctrl-C's path: children
    # stopped, partial session saved
    with interrupts_as_keyboard(), progress:
        result = run_profile(program, options, progress, nsdiag_argv=sys.argv)
    if json_lines:
        click.echo(result_line(result))
        return
    _summary(console, result, region, rules)
    if verbose:
        _breakdown(console, result.session_dir)


def _breakdown(console: Console, session_dir: Path) -> None:
    from nsdiag.cli.breakdown import lines
    from nsdiag.collect.breakdown import of_status
    from nsdiag.errors import InputError
    from nsdiag.readers.session_folder import read_status

    try:
        status = read_status(session_dir)
    except InputError:  # the run wrote it: unreadable only when something else changed it
        return
    if status is None:
        return
    for line in lines(of_status(status), status.estimate):
        console.print(escape(line), soft_wrap=True, highlight=False)


def _check_regex(pattern: str) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        raise click.BadParameter(
            f"{pattern!r} is not a valid regular expression: {exc}", param_hint="--kernel"
        ) from exc


def _summary(
    console: Console, result: ProfileResult, region: str, rules: Sequence[RuleSpec]
) -> None:
    from nsdiag.analysis.engine import diagnose
    from nsdiag.render import RenderOptions, render

    if result.session is not None and len(result.session.kernels):
        # already laid out; the three findings per kernel of a first look
        diagnosis = diagnose(result.session, rules, region=region)
        text = render(diagnosis, result.session, "text", RenderOptions(text_findings=3))
        click.echo(text, nl=False)
    plan = result.plan
    spent = sum(result.timings.values())
    if plan is not None:
        console.print(
            f"ncu profiled {result.profiled} launches ({plan.total_launches} kernel launches in "
            f"the profiled run) in {len(plan.rounds)} run(s), planned to cover "
            f"{plan.planned_share:.0%} of the analysed region's GPU time; "
            f"{spent:.0f} s in all, against about {plan.full_estimated_s:.0f} s for --set full on "
            "every launch",
            soft_wrap=True,
        )
    elif result.profiled:
        console.print(
            f"ncu profiled {result.profiled} launches; {spent:.0f} s in all", soft_wrap=True
        )
    for item in result.missing:
        console.print(f"[yellow]missing:[/] {escape(item)}", soft_wrap=True)
    root = shlex.quote(str(result.session_dir))
    report = shlex.quote(str(result.session_dir / "report.html"))
    console.print(
        f"session: {escape(str(result.session_dir))}\n  nsdiag explain {escape(root)}\n"
        f"  nsdiag report {escape(root)} -o {escape(report)}",
        soft_wrap=True,
    )
