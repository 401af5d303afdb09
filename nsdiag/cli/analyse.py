"""`nsdiag load`, `explain` and `report`: recorded profiler outputs in, a diagnosis out."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from nsdiag.cli.help import examples
from nsdiag.cli.progress import Steps
from nsdiag.cli.rules import active_rules, rules_option
from nsdiag.cli.terminal import color_option, use_color, width
from nsdiag.errors import NsdiagError
from nsdiag.render.registry import formats

if TYPE_CHECKING:
    from nsdiag.analysis.records.diagnosis import Diagnosis
    from nsdiag.model.session import Session


def _count(option: str) -> Callable[[click.Context, click.Parameter, int], int]:
    """A callback refusing a negative count in one line (click's own error is three)."""

    def check(ctx: click.Context, param: click.Parameter, value: int) -> int:
        if value < 0:
            raise NsdiagError(f"{option} {value}: a count, 0 or more", f"e.g. {option} 5")
        return value

    return check


def _megabytes(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise NsdiagError(
            f"--max-input-mb {value:g}: the largest input must be a positive, finite number of MB",
            "e.g. --max-input-mb 8192",
        )
    return value


INPUT_HELP = (
    "session folder, .ncu-rep, ncu CSV export (raw or details page), nsys .nsys-rep/.qdrep or "
    "its SQLite export, nsys stats CSV; several may be given"
)
inputs_argument = click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
kernel_option = click.option(
    "-k",
    "--kernel",
    "kernel",
    metavar="PATTERN",
    help="only kernels whose name matches this regular expression",
)
max_input_option = click.option(
    "--max-input-mb",
    "max_input_mb",
    type=float,
    default=None,
    callback=_megabytes,
    metavar="MB",
    help="largest input accepted, uncompressed (default: $NSDIAG_MAX_INPUT_MB, else 4096 for "
    "CSV exports and .ncu-rep files, 32768 for nsys SQLite exports)",
)
region_option = click.option(
    "--region",
    "region",
    default="auto",
    show_default=True,
    metavar="auto|all|nvtx:NAME|START:END",
    help="the part of the timeline to analyse: auto (the cudaProfilerStart/Stop range, else the "
    "steady-state iterations, else the NVTX-annotated part), all, the instances of an NVTX "
    "range, or START:END in ms from the trace's first event",
)


@click.command(
    short_help="Read profiler outputs into a session folder to re-read later.",
    epilog=examples(
        "nsdiag load run.ncu-rep trace.nsys-rep -o my-session",
        "nsdiag explain my-session    # read again without parsing the reports",
    ),
)
@inputs_argument
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(path_type=Path),
    required=True,
    help="session folder to write (created; existing files in it are kept; one that already "
    "holds a session is refused)",
)
@max_input_option
def load(inputs: tuple[Path, ...], output: Path, max_input_mb: float | None) -> None:
    """Read profiler outputs into a session folder that later commands can re-read."""
    from nsdiag import load as load_inputs
    from nsdiag.model import store

    session = load_inputs(inputs, max_input_mb=max_input_mb)
    store.save(session, output, replace=False)
    click.echo(f"{len(session.kernels)} kernel launches from {len(inputs)} input(s) -> {output}")


def diagnose_inputs(
    inputs: tuple[Path, ...],
    kernel: str | None = None,
    region: str = "auto",
    rule_dirs: tuple[Path, ...] = (),
    max_input_mb: float | None = None,
    steps: Steps | None = None,
) -> tuple[Session, Diagnosis]:
    """The inputs read and diagnosed as `explain` and `report` do (and `nsdiag mcp`'s tools)."""
    from nsdiag import load as load_inputs
    from nsdiag.analysis.engine import diagnose
    from nsdiag.analysis.filters import keep_kernels

    rules = active_rules(rule_dirs).rules  # before reading: a bad rule fails fast
    _one_program(inputs)
    if steps is not None:
        steps.step(
            f"reading {inputs[0].name}"
            + (f" and {len(inputs) - 1} more" if len(inputs) > 1 else "")
        )
    session = load_inputs(inputs, max_input_mb=max_input_mb)
    if kernel and not session.has_kernels():  # a timeline alone: kept whole, with a warning
        session = keep_kernels(session, kernel)
    if steps is not None:
        profiled, traced = len(session.kernels), len(session.timeline)
        what = f"{profiled:,} profiled launches" if profiled else f"{traced:,} GPU activities"
        steps.step(f"analysing {what}")
    diagnosis = diagnose(session, rules, region=region)
    if kernel and session.has_kernels():
        diagnosis = kernels_only(diagnosis, session, kernel)
    return session, diagnosis


def kernels_only(diagnosis: Diagnosis, session: Session, pattern: str) -> Diagnosis:
    """`--kernel PATTERN`: the diagnosis of the whole program with only the matching kernel
    signatures listed (name or demangled name, a regular expression, case ignored) and the
    changes that touch one of them or the program (a range, the timeline). The program's
    analyses (its timeline, launch sequence, fusion chains) ran on every kernel: their
    findings stay as they are."""
    import re
    from dataclasses import replace

    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise NsdiagError(
            f"--kernel {pattern!r} is not a valid regular expression: {exc}",
            "e.g. --kernel 'gemm|conv'",
        ) from exc
    kept = [k for k in diagnosis.kernels if regex.search(k.name) or regex.search(k.demangled or "")]
    if not kept:
        raise NsdiagError(
            f"no kernel matches --kernel {pattern!r}", "run without --kernel to list the kernels"
        )
    ids = {k.id for k in kept}
    changes = tuple(
        c
        for c in diagnosis.changes
        if any(t.kind != "kernel" or t.kernel_id in ids for t in c.touches)
    )
    # the profiled launches listed (as keep_kernels counted them)
    names = session.kernels["name"].astype(str)
    demangled = session.kernels.get("demangled", names).fillna("").astype(str)
    launches = int((names.str.contains(regex) | demangled.str.contains(regex)).sum())
    return replace(
        diagnosis,
        kernels=kept,
        changes=changes,
        total_gpu_time_ns=sum(k.total_duration_ns or 0.0 for k in kept),
        meta={**diagnosis.meta, "kernel_launches": launches},
    )


def _one_program(inputs: tuple[Path, ...]) -> None:
    """Refuse session folders of different programs (other scripts, other GPUs) given
    together: their merge would be one diagnosis of two programs. The ranks of one run are one
    folder (nsdiag profile records a launcher's ranks together) or one report per rank, which
    carry no command line: readers/ranks.py merges those and warns when their kernels differ.
    Two recordings of one program are compared with `nsdiag diff`, not merged."""
    from nsdiag.model import store

    folders = [p for p in inputs if store.is_session_dir(p)]
    if len(folders) < 2:
        return
    from nsdiag.analysis.diff.sameness import script_of  # the diff package: only when needed

    known = [(p, *store.recorded_program(p)) for p in folders]
    scripts = {p: s for p, c, _ in known if (s := script_of(c))}
    gpus = {p: g for p, _, g in known if g}
    for what, seen in (("ran", scripts), ("was recorded on", gpus)):
        first: dict[str, Path] = {}  # each program's (GPU's) first folder
        for path, value in seen.items():
            first.setdefault(value, path)
        if len(first) > 1:
            (x, a), (y, b) = list(first.items())[:2]
            raise NsdiagError(
                f"{a} {what} {x} and {b} {what} {y}: different programs, not one to explain",
                f"explain each alone, or compare them: nsdiag diff {a} {b}",
            )


verbose_option = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="everything the short view leaves out: every change and what it touches, the program "
    "findings, each kernel's verdict and findings with their evidence, tools and timeline",
)


@click.command(
    help="Say what limits each kernel, why, and what to change, ranked by the time a fix would "
    "save. INPUTS: " + INPUT_HELP + ".",
    short_help="Say what limits each kernel and what to change, ranked by saving.",
    epilog=examples(
        "nsdiag explain nsdiag-sessions/train-20260412-093000",
        "nsdiag explain run.ncu-rep trace.sqlite -k gemm -v",
        "nsdiag explain my-session --region nvtx:step --json > diagnosis.json",
    ),
)
@inputs_argument
@kernel_option
@region_option
@rules_option
@click.option(
    "--changes",
    "changes",
    default=5,
    show_default=True,
    callback=_count("--changes"),
    metavar="N",
    help="changes listed under 'What to change first', largest saving first (--verbose: all)",
)
@click.option(
    "--top",
    default=3,
    show_default=True,
    callback=_count("--top"),
    metavar="N",
    help="findings shown per kernel in --verbose's kernel blocks (the short view's kernel "
    "table shows each kernel's change)",
)
@click.option(
    "--top-kernels",
    default=10,
    show_default=True,
    callback=_count("--top-kernels"),
    help="kernel signatures shown",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="print the diagnosis as one JSON document (schema nsdiag.diagnosis/4)",
)
@max_input_option
@verbose_option
@color_option
def explain(
    inputs: tuple[Path, ...],
    kernel: str | None,
    region: str,
    rule_dirs: tuple[Path, ...],
    changes: int,
    top: int,
    top_kernels: int,
    as_json: bool,
    max_input_mb: float | None,
    verbose: bool,
    color: str,
) -> None:
    from nsdiag.render import render
    from nsdiag.render.text import render_text

    colored = use_color(color) and not as_json
    with Steps() as steps:
        session, diagnosis = diagnose_inputs(inputs, kernel, region, rule_dirs, max_input_mb, steps)
        steps.step("writing")
        if as_json:
            text = render(diagnosis, session, "json")
        else:
            text = render_text(
                diagnosis,
                top,
                top_kernels,
                verbose=verbose,
                color=colored,
                width=width(),
                changes=changes,
            )
    click.echo(text, nl=False, color=colored)


@click.command(
    help="Write a report: self-contained interactive HTML (default), JSON, Markdown or text. "
    "INPUTS: " + INPUT_HELP + ".",
    short_help="Write a report: self-contained HTML, JSON, Markdown or text.",
    epilog=examples(
        "nsdiag report my-session    # nsdiag-report.html, opens offline",
        "nsdiag report run.ncu-rep trace.sqlite -o report.md",
        "nsdiag report my-session --format json -o - | jq '.kernels[0]'",
    ),
)
@inputs_argument
@click.option(
    "-o",
    "--output",
    "output",
    default="nsdiag-report.html",
    show_default=True,
    help="file to write (the extension picks the format); '-' writes to stdout",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(formats("report")),
    help="output format (default: from the -o extension; html for '-')",
)
@kernel_option
@region_option
@rules_option
@click.option(
    "--cards",
    default=10,
    show_default=True,
    callback=_count("--cards"),
    help="kernels that get a detailed card (the table lists all)",
)
@max_input_option
def report(
    inputs: tuple[Path, ...],
    output: str,
    fmt: str | None,
    kernel: str | None,
    region: str,
    rule_dirs: tuple[Path, ...],
    cards: int,
    max_input_mb: float | None,
) -> None:
    from nsdiag.render import RenderOptions, render

    if output != "-":
        with Steps() as steps:
            line = report_to_file(
                inputs, Path(output), fmt, kernel, region, rule_dirs, cards, max_input_mb, steps
            )
        click.echo(line)
        return
    fmt = fmt or "html"
    with Steps() as steps:
        session, diagnosis = diagnose_inputs(inputs, kernel, region, rule_dirs, max_input_mb, steps)
        steps.step(f"writing the {fmt} report")
        text = render(diagnosis, session, fmt, RenderOptions(cards=cards))
    click.echo(text, nl=False)


def report_to_file(
    inputs: tuple[Path, ...],
    output: Path,
    fmt: str | None = None,
    kernel: str | None = None,
    region: str = "auto",
    rule_dirs: tuple[Path, ...] = (),
    cards: int = 10,
    max_input_mb: float | None = None,
    steps: Steps | None = None,
) -> str:
    """`report -o FILE` (and `nsdiag mcp`'s report): the target checked before the diagnosis,
    which may take a while; the format from its extension unless given; the line saying what
    was written."""
    from nsdiag.render import RenderOptions, format_from_path, render
    from nsdiag.render.output import write_report
    from nsdiag.safe_write import check_target

    check_target(output)
    fmt = fmt or format_from_path(output)
    session, diagnosis = diagnose_inputs(inputs, kernel, region, rule_dirs, max_input_mb, steps)
    if steps is not None:
        steps.step(f"writing the {fmt} report")
    text = render(diagnosis, session, fmt, RenderOptions(cards=cards))
    path = write_report(output, text)
    return (
        f"wrote {path} ({fmt}, {len(text.encode()) / 1e6:.1f} MB, "
        f"{len(diagnosis.kernels)} kernel signatures)"
    )
