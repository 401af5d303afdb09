"""What every nsdiag command shares on the command line: one line and an exit code for an
error or Ctrl-C, never a traceback, and `-h` for help.

Operating-system errors that reach here (a file name too long, permission denied, a full disk on
standard output) become one line naming the file and saying what to do. A reader that closes
the pipe early (`nsdiag explain ... | head -1`) ends the command quietly, with the status a shell
shows for a tool that SIGPIPE ended."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import NoReturn, ParamSpec, TypeVar

import click

from nsdiag.errors import NsdiagError
from nsdiag.safe_write import os_error_hint

CONTEXT = {"help_option_names": ["-h", "--help"]}
P = ParamSpec("P")
R = TypeVar("R")
EXIT_USAGE = 2  # bad usage, unreadable input, an output that cannot be written
EXIT_BROKEN_PIPE = 128 + 13  # 128 + SIGPIPE, what a shell reports for `yes | head -1`'s yes
OUT_OF_MEMORY = (
    "out of memory: the inputs need more memory than this process may use "
    "(give fewer or smaller inputs, or raise the limit: ulimit -v)"
)


def one_line(text: str) -> str:
    """The text with control characters escaped: a file name or a template holding a newline or
    a terminal escape sequence stays one inert line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _say(line: str) -> None:
    with contextlib.suppress(OSError):  # stderr may be gone too; the exit code still tells
        click.echo(one_line(line), err=True)


def _quiet_exit() -> NoReturn:
    """Standard output's reader is gone: point it at /dev/null so the interpreter's last flush
    stays quiet, and end."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)


def _from_stdout(error: OSError) -> bool:
    """Whether the error came from writing standard output (click.echo, rich or the last
    flush), not from a file."""
    if error.filename is not None:
        return False
    trace: TracebackType | None = error.__traceback__
    while trace is not None:
        code = trace.tb_frame.f_code
        if code is _flush_stdout.__code__ or code.co_filename.endswith(
            (os.path.join("click", "utils.py"), os.path.join("rich", "console.py"))
        ):
            return True
        trace = trace.tb_next
    return False


def os_error_line(error: OSError) -> str:
    """One line for an OSError: which file (or standard output), what, and what to do."""
    what = error.strerror or str(error)
    if error.filename is not None:
        where = str(error.filename)
        if error.filename2 is not None:
            where += f" -> {error.filename2}"
    elif _from_stdout(error):
        where = "cannot write to standard output"
    else:
        where = "input/output failed"
    return f"{where}: {what} ({os_error_hint(error)})"


def _flush_stdout() -> None:
    if sys.stdout is None:  # started with standard output closed (`>&-`): the output is lost
        raise OSError(errno.EBADF, "standard output is closed")
    sys.stdout.flush()


@contextlib.contextmanager
def errors_as_one_line() -> Iterator[None]:
    try:
        yield
        _flush_stdout()  # a full disk or closed pipe surfaces here, not at interpreter exit
    except NsdiagError as error:
        _say(f"nsdiag: error: {error}")
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        _say("nsdiag: interrupted")
        sys.exit(130)
    except MemoryError:  # inputs larger than the memory this process may use (ulimit -v, a cgroup)
        _say(f"nsdiag: error: {OUT_OF_MEMORY}")
        sys.exit(EXIT_USAGE)
    except OSError as error:
        if error.errno == errno.EPIPE:
            _quiet_exit()
        _say(f"nsdiag: error: {os_error_line(error)}")
        sys.exit(EXIT_USAGE)


def one_line_errors(command: Callable[P, R]) -> Callable[P, R]:
    """`errors_as_one_line` around a command that also runs outside the main group (tests)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with errors_as_one_line():
            return command(*args, **kwargs)

    return wrapper
