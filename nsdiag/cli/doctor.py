"""`nsdiag doctor`: the checks of nsdiag.collect.doctor, one line each, exit code 1 if any fails."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.markup import escape

from nsdiag.cli.errors import CONTEXT, one_line_errors
from nsdiag.cli.help import examples


@click.command(
    "doctor",
    context_settings=CONTEXT,
    short_help="Check that this machine can profile: GPU, driver, ncu, nsys.",
    epilog=examples(
        "nsdiag doctor",
        "nsdiag doctor --ncu /usr/local/cuda/bin/ncu    # check this ncu",
    ),
)
@click.option("--ncu", "ncu", metavar="PATH", help="check this ncu instead of searching")
@click.option("--nsys", "nsys", metavar="PATH", help="check this nsys instead of searching")
@one_line_errors
def doctor(ncu: str | None, nsys: str | None) -> None:
    """Check that this machine can profile: GPU and driver, ncu and nsys, counter access,
    packages."""
    from nsdiag.collect.doctor import healthy, run_checks, what_works

    checks = run_checks(ncu, nsys)
    console = Console(highlight=False)
    marks = {True: "[green]  ok[/]", False: "[red]FAIL[/]", None: "[dim]skip[/]"}
    for c in checks:
        console.print(
            f"{marks[c.ok]}  [bold]{escape(c.name)}[/]: {escape(c.detail)}", soft_wrap=True
        )
        if c.fix:
            console.print(f"      fix: {escape(c.fix)}", soft_wrap=True)
    console.print(escape(what_works(checks)), soft_wrap=True)
    if not healthy(checks):
        sys.exit(1)
