"""Command line: thin click glue. The only place that prints and turns errors into exit codes."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from nsdiag import __version__
from nsdiag.errors import NsdiagError

INPUT_HELP = "session folder, .ncu-rep, ncu CSV export (raw or details page); several may be given"


def _fail(error: NsdiagError) -> NoReturn:
    click.echo(f"nsdiag: error: {error}", err=True)
    sys.exit(error.exit_code)


class _Group(click.Group):
    def invoke(self, ctx: click.Context):  # one clear line, never a traceback
        try:
            return super().invoke(ctx)
        except NsdiagError as error:
            _fail(error)
        except KeyboardInterrupt:
            click.echo("nsdiag: interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsdiag")
def main() -> None:
    """Why is my CUDA kernel slow, and what do I change?"""


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), required=True,
              help="session folder to write (created; existing files in it are kept)")
def load(inputs: tuple[Path, ...], output: Path) -> None:
    """Read profiler outputs into a session folder that later commands can re-read."""
    from nsdiag import load as load_inputs
    from nsdiag.model import store

    session = load_inputs(inputs)
    store.save(session, output)
    click.echo(f"{len(session.kernels)} kernel launches from {len(inputs)} input(s) -> {output}")
