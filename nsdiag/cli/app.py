"""The `nsdiag` command group: every command registered on it, errors as one line."""

from __future__ import annotations

from typing import Any

import click

from nsdiag.cli.analyse import explain, load, report
from nsdiag.cli.diff import diff
from nsdiag.cli.doctor import doctor
from nsdiag.cli.errors import CONTEXT, errors_as_one_line
from nsdiag.cli.help import examples
from nsdiag.cli.mcp import serve_mcp
from nsdiag.cli.profile import profile
from nsdiag.cli.rules import rules
from nsdiag.version import __version__


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:  # one clear line, never a traceback
        with errors_as_one_line():
            return super().invoke(ctx)


@click.group(
    cls=_Group,
    context_settings=CONTEXT,
    epilog=examples(
        "nsdiag doctor    # can this machine profile?",
        "nsdiag profile train.py    # record, then say why its kernels are slow",
        "nsdiag explain nsdiag-sessions/train-20260412-093000",
        "nsdiag report my-session -o report.html",
        "nsdiag diff before-session after-session",
        "nsdiag COMMAND -h    # a command's options and examples",
    ),
)
@click.version_option(__version__, prog_name="nsdiag")
def main() -> None:
    """Why is my CUDA kernel slow, and what do I change?"""


for command in (load, explain, rules, report, diff, profile, doctor, serve_mcp):
    main.add_command(command)
