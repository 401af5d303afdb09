"""What every nsdiag command shares on the command line: one line and an exit code for an
error or Ctrl-C, never a traceback, and `-h` for help."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import click

from nsdiag.errors import NsdiagError

CONTEXT = {"help_option_names": ["-h", "--help"]}
P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def errors_as_one_line() -> Iterator[None]:
    try:
        yield
    except NsdiagError as error:
        click.echo(f"nsdiag: error: {error}", err=True)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        click.echo("nsdiag: interrupted", err=True)
        sys.exit(130)


def one_line_errors(command: Callable[P, R]) -> Callable[P, R]:
    """`errors_as_one_line` around a command that also runs outside the main group (tests)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with errors_as_one_line():
            return command(*args, **kwargs)

    return wrapper
