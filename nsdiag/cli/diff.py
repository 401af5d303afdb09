"""`nsdiag diff`: two input sets, BEFORE and AFTER a change, compared; the CI gate."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from nsdiag.cli.analyse import INPUT_HELP, kernel_option
from nsdiag.cli.help import examples
from nsdiag.cli.terminal import color_option, use_color, width
from nsdiag.errors import InputError
from nsdiag.render.registry import extensions, formats

if TYPE_CHECKING:
    from nsdiag.analysis.diff import Diff
    from nsdiag.analysis.records.diagnosis import Diagnosis
    from nsdiag.model.session import Session

REGION_HELP = "auto|all|nvtx:NAME|START:END"
GATE_FAILED = 1  # exit code: AFTER is slower (bad input stays 2)
MAX_PCT = 1000.0  # a gate's percentages above this are a typo (10x slower is +900%)


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

    return _diagnosed(paths, load(paths), region, kernel)


def _diagnosed(
    paths: tuple[Path, ...], session: Session, region: str, kernel: str | None
) -> tuple[tuple[str, ...], Session, Diagnosis]:
    from nsdiag.analysis.engine import diagnose
    from nsdiag.analysis.filters import keep_kernels, keep_nvtx_range
    from nsdiag.cli.analyse import kernels_only

    # Without a timeline the side's time is its profiled kernels': those asked for. With one,
    # the session stays whole (a timeline alone: with a warning) and the diagnosis lists them.
    if kernel and not (session.has_kernels() and session.has_timeline()):
        session = keep_kernels(session, kernel)
    if not session.has_timeline() and region.startswith("nvtx:"):
        session = keep_nvtx_range(session, region.removeprefix("nvtx:"))
    if not session.has_timeline() and not session.has_kernels():
        raise InputError(f"{', '.join(map(str, paths))}: no kernels", "give a profile with kernels")
    diagnosis = diagnose(session, region=region)
    if kernel and session.has_kernels() and session.has_timeline():
        diagnosis = kernels_only(
            diagnosis, session, kernel
        )  # the program's findings: the whole program's
    return tuple(str(p) for p in paths), session, diagnosis


def _runs(
    paths: tuple[Path, ...], region: str, kernel: str | None
) -> list[tuple[tuple[str, ...], Session, Diagnosis]]:
    """One side's inputs as runs of its program, the first one diagnosed in full: each input
    holding a timeline is a run of its own (several measure the run-to-run noise), unless they
    were recorded at the same time (one report per rank of one run); inputs without a timeline
    (ncu exports) join the first run."""
    from nsdiag import load

    if len(paths) == 1:
        return [_side(paths, region, kernel)]
    sessions = [load(p) for p in paths]
    timed = [i for i, s in enumerate(sessions) if s.has_timeline()]
    if len(timed) < 2 or _recorded_together([sessions[i] for i in timed]):
        return [_side(paths, region, kernel)]
    first = (paths[timed[0]], *(p for i, p in enumerate(paths) if i not in timed))
    own = _side(first, region, kernel) if len(first) > 1 else None
    runs = [own or _diagnosed(first, sessions[timed[0]], region, kernel)]
    runs += [_diagnosed((paths[i],), sessions[i], region, kernel) for i in timed[1:]]
    return runs


def _recorded_together(sessions: list[Session]) -> bool:
    """The ranks of one run: each report's launcher rank known, or their recordings started
    within the shortest one's span (runs of a program are recorded one after another)."""
    if all(s.meta.rank_env for s in sessions):
        return True
    starts = [s.meta.session_start_utc_ns for s in sessions]
    if any(t is None for t in starts):
        return False
    spans = [float(s.timeline["end_ns"].max() - s.timeline["start_ns"].min()) for s in sessions]
    known = [t for t in starts if t is not None]
    return max(known) - min(known) < min(spans)


def _percent(
    maximum: float,
) -> Callable[[click.Context, click.Parameter, float | None], float | None]:
    """A click callback: a percentage from 0 to `maximum`, finite (NaN compares false with
    everything: `--fail-if-slower nan` would pass any regression)."""

    def check(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and 0 <= value <= maximum):
            raise InputError(
                f"{param.opts[0]} {value:g}: not a percentage from 0 to {maximum:g}",
                f"e.g. {param.opts[0]} 5",
            )
        return value

    return check


@click.command(
    help="Compare two profiles of a program, BEFORE and AFTER a change: the region's time per "
    "iteration and its spread, kernels matched across the two (renamed and fused ones too), "
    "findings resolved and new, each resolved finding's predicted saving against the measured "
    "one. With --fail-if-slower, a CI gate: exit 1 when AFTER is slower beyond the run-to-run "
    "noise. BEFORE, AFTER: " + INPUT_HELP + "; several a side with --before/--after (each "
    "input with a timeline is a run of its own: several runs measure the run-to-run noise).",
    short_help="Compare two profiles of a program, before and after a change.",
    epilog=examples(
        "nsdiag diff before-session after-session",
        "nsdiag diff before after -o diff.html",
        "nsdiag diff base new --fail-if-slower 3    # a CI gate: exit 1 if slower",
        "nsdiag diff --before a1 --before a2 --after b1 --after b2    # 2 runs each",
    ),
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
@click.option("--top", default=15, show_default=True,
              help="kernel matches listed, largest change first (text, Markdown; --json "
              "has all)")  # fmt: skip
@click.option("--fail-if-slower", "fail_pct", type=float, callback=_percent(MAX_PCT), metavar="PCT",
              help="exit 1 when the region, or a kernel above --gate-share of it, is more than "
              "PCT% slower in AFTER, beyond the run-to-run noise (measured with several runs "
              "a side, else --run-noise)")  # fmt: skip
@click.option("--gate-share", "share_pct", type=float, callback=_percent(100), default=10.0,
              show_default=True, metavar="PCT",
              help="kernels the gate checks: those taking at least PCT% of the region")  # fmt: skip
@click.option("--run-noise", "noise_pct", type=float, callback=_percent(MAX_PCT), metavar="PCT",
              help="how much two runs of the unchanged program differ, in percent (default: "
              "measured over several runs a side, else 6)")  # fmt: skip
@color_option
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
    noise_pct: float | None,
    color: str,
) -> None:
    from nsdiag.render import DiffOptions, format_from_path, render_diff
    from nsdiag.render.diff.rows import gate_line
    from nsdiag.render.output import write_report

    before_paths, after_paths = _sides(inputs, before, after)
    if fmt is None:  # before the comparison, which may take a while
        fmt = "json" if as_json else "text"
        if output and output != "-":
            fmt = format_from_path(output, "diff")
    result = compare_inputs(
        before_paths,
        after_paths,
        before_region or region,
        after_region or region,
        kernel,
        fail_pct,
        share_pct,
        noise_pct,
    )
    to_file = bool(output and output != "-")
    colored = fmt == "text" and not to_file and use_color(color)
    # text follows the terminal's width (a file or a pipe: DiffOptions' default)
    options = DiffOptions(top=top, color=colored)
    if not to_file:
        options = DiffOptions(top=top, width=width(), color=colored)
    text = render_diff(result, fmt, options)
    if to_file:
        path = write_report(Path(str(output)), text)
        click.echo(f"wrote {path} ({fmt}, {len(text.encode()) / 1e6:.2f} MB)")
    else:
        click.echo(text, nl=False, color=colored)
    if fmt != "text" or (output and output != "-"):  # the text carries them already
        for warning in result.warnings:
            click.echo(f"nsdiag diff: warning: {warning}", err=True)
    if result.gate is not None:
        # One unwrapped line for the CI log; to stderr where stdout carries a JSON, Markdown or
        # HTML document.
        to_stderr = fmt != "text" and output in (None, "-")
        click.echo(gate_line(result.gate), err=to_stderr)
        if not result.gate.passed:
            sys.exit(GATE_FAILED)


def compare_inputs(
    before_paths: tuple[Path, ...],
    after_paths: tuple[Path, ...],
    before_region: str = "auto",
    after_region: str = "auto",
    kernel: str | None = None,
    fail_pct: float | None = None,
    share_pct: float = 10.0,
    noise_pct: float | None = None,
) -> Diff:
    """BEFORE and AFTER read, diagnosed and compared, gated when `fail_pct` is given: what
    `nsdiag diff` renders (and `nsdiag mcp`'s diff returns)."""
    from nsdiag.analysis.diff import compare, with_gate

    before_runs = _runs(before_paths, before_region, kernel)
    after_runs = _runs(after_paths, after_region, kernel)
    result = compare(before_runs[0], after_runs[0], before_runs[1:], after_runs[1:])
    if fail_pct is not None:
        result = with_gate(result, fail_pct, share_pct, noise_pct)
    return result
