"""Every failure of a tool as the one line the CLI prints for it (cli/errors.py), never a
traceback: nsdiag's own errors, operating-system errors, running out of memory, and arguments
the tool's input schema refuses."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nsdiag.cli.errors import OUT_OF_MEMORY, one_line, os_error_line
from nsdiag.errors import NsdiagError

if TYPE_CHECKING:
    from pydantic import ValidationError

log = logging.getLogger("nsdiag.mcp")


def error_line(error: BaseException) -> str:
    """`nsdiag: error: what (what to do)`, as `nsdiag COMMAND` would print it on stderr."""
    if isinstance(error, NsdiagError):
        text = str(error)
    elif isinstance(error, MemoryError):
        text = OUT_OF_MEMORY
    elif isinstance(error, OSError):
        text = os_error_line(error)
    else:  # a bug: the traceback goes to the server's stderr, the client gets one line
        log.error("nsdiag mcp: unexpected error", exc_info=error)
        text = (
            f"unexpected {type(error).__name__}: {error} (a bug in nsdiag: the traceback is on "
            "the server's stderr; please report it with the input)"
        )
    return one_line(f"nsdiag: error: {text}")


def arguments_line(tool: str, error: ValidationError) -> str:
    """Arguments the input schema refuses, in one line: each argument, what is wrong with it
    (every alternative of a union at once), what came."""
    by_argument: dict[str, list[Mapping[str, Any]]] = {}
    for problem in error.errors():
        loc = problem.get("loc", ())
        by_argument.setdefault(str(loc[0]) if loc else "arguments", []).append(problem)
    parts = []
    for argument, problems in by_argument.items():
        said = [str(p.get("msg", "invalid")) for p in problems]
        text = f"{argument}: " + " or ".join(
            [said[0], *(m.removeprefix("Input should be ") for m in said[1:])]
        )
        if problems[0].get("type") != "missing" and "input" in problems[0]:
            text += f" (got {problems[0]['input']!r})"
        parts.append(text)
    return one_line(
        f"nsdiag: error: {tool}: {'; '.join(parts)} (the tool's input schema says what each "
        "argument takes)"
    )
