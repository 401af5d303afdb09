"""`nsdiag diff`: two input sets, BEFORE and AFTER a change, compared; the CI gate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from nsdiag.cli.analyse import INPUT_HELP, kernel_option
from nsdiag.errors import InputError
from nsdiag.render.registry import extensions, formats

if TYPE_CHECKING:
    from nsdiag.analysis.diagnosis import Diagnosis
    from nsdiag.model.session import Session

REGION_HELP = "auto|all|nvtx:NAME|START:END"
GATE_FAILED = 1  # exit code: AFTER is slower (bad input stays 2)


def _sides(
    paths: tuple[Path, ...], before: tuple[Path, ...], after: tuple[Path, ...]
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """`nsdiag diff BEFORE AFTER` (one input a side) or `--before A --before B --after C`."""
    if before or after:
        if paths:
            raise InputError(
                "give the inputs either as BEFORE AFTER or with --before/--after, not both",
                "e.g. nsdiag diff --before a.csv --before a.sqlite --after b.sqlite",
            )
        if not before or not after:
            missing = "--after" if before else "--before"
            raise InputError(f"{missing} is missing", "each side needs at least one input")
        return before, after
    if len(paths) != 2:
        raise InputError(
            f"nsdiag diff takes two inputs, BEFORE and AFTER; got {len(paths)}",
            "for several files a side use --before A --before B --after C",
        )
    return (paths[0],), (paths[1],)


def _side(
    paths: tuple[Path, ...], region: str, kernel: str | None
) -> tuple[tuple[str, ...], Session, Diagnosis]:
    from nsdiag import load
    from nsdiag.analysis.engine import diagnose
    from nsdiag.analysis.filters import keep_kernels, keep_nvtx_range

    session = load(paths)
    if kernel:
        session = keep_kernels(session, kernel)
    if not session.has_timeline() and region.startswith("nvtx:"):
        session = keep_nvtx_range(session, region.removeprefix("nvtx:"))
    if not session.has_timeline() and not session.has_kernels():
        raise InputError(f"{', '.join(map(str, paths))}: no kernels", "give a profile with kernels")
    return tuple(str(p) for p in paths), session, diagnose(session, region=region)


@click.command(
    help="Compare two profiles of a program, BEFORE and AFTER a change: the region's time per "
    "iteration and its spread, kernels matched across the two (renamed and fused ones too), "
    "findings resolved and new, each resolved finding's predicted saving against the measured "
    "one. With --fail-if-slower, a CI gate: exit 1 when AFTER is slower beyond the noise. "
    "BEFORE, AFTER: " + INPUT_HELP + "; several a side with --before/--after."
)
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--before", "before", multiple=True, type=click.Path(path_type=Path),
              metavar="INPUT", help="an input of BEFORE (repeat for several)")  # fmt: skip
@click.option("--after", "after", multiple=True, type=click.Path(path_type=Path),
              metavar="INPUT", help="an input of AFTER (repeat for several)")  # fmt: skip
@click.option("--region", "region", default="auto", show_default=True, metavar=REGION_HELP,
              help="the part of each timeline to compare (as for explain); nvtx:NAME also "
              "selects the kernels of an ncu export recorded with --nvtx")  # fmt: skip
@click.option("--before-region", metavar=REGION_HELP, help="BEFORE's region, if not --region")
@click.option("--after-region", metavar=REGION_HELP, help="AFTER's region, if not --region")
@kernel_option
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON "
              "(schema nsdiag.diff/1, docs/diff.schema.json)")  # fmt: skip
@click.option("-o", "--output", "output", help="write the comparison to this file "
              f"({', '.join(extensions('diff', first=True))}); '-' writes to stdout")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(formats("diff")),
              help="output format (default: text, or from the -o extension)")  # fmt: skip
@click.option("--top", default=15, show_default=True, help="kernel matches listed (text, md)")
@click.option("--fail-if-slower", "fail_pct", type=click.FloatRange(min=0), metavar="PCT",
              help="exit 1 when the region, or a kernel above --gate-share of it, is more than "
              "PCT% slower in AFTER beyond the iteration-to-iteration noise")  # fmt: skip
@click.option("--gate-share", "share_pct", type=click.FloatRange(0, 100), default=10.0,
              show_default=True, metavar="PCT",
              help="kernels the gate checks: those taking at least PCT% of the region")  # fmt: skip
def diff(
    inputs: tuple[Path, ...],
    before: tuple[Path, ...],
    after: tuple[Path, ...],
    region: str,
    before_region: str | None,
    after_region: str | None,
    kernel: str | None,
    as_json: bool,
    output: str | None,
    fmt: str | None,
    top: int,
    fail_pct: float | None,
    share_pct: float,
) -> None:
    from nsdiag.analysis.diff import compare, with_gate
    from nsdiag.render import DiffOptions, format_from_path, render_diff
    from nsdiag.render.diff.rows import gate_line
    from nsdiag.render.output import write_report

    before_paths, after_paths = _sides(inputs, before, after)
    if fmt is None:  # before the comparison, which may take a while
        fmt = "json" if as_json else "text"
        if output and output != "-":
            fmt = format_from_path(output, "diff")
    result = compare(
        _side(before_paths, before_region or region, kernel),
        _side(after_paths, after_region or region, kernel),
    )
    if fail_pct is not None:
        result = with_gate(result, fail_pct, share_pct)
    text = render_diff(result, fmt, DiffOptions(top=top))
    if output and output != "-":
        path = write_report(Path(output), text)
        click.echo(f"wrote {path} ({fmt}, {len(text.encode()) / 1e6:.2f} MB)")
    else:
        click.echo(text, nl=False)
    if result.gate is not None:
        # One unwrapped line for the CI log; to stderr where stdout carries a JSON, Markdown or
        # HTML document.
        to_stderr = fmt != "text" and output in (None, "-")
        click.echo(gate_line(result.gate), err=to_stderr)
        if not result.gate.passed:
            sys.exit(GATE_FAILED)
