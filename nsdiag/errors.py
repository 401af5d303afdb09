"""One exception hierarchy; the CLI turns it into one line and an exit code."""

from __future__ import annotations


class NsdiagError(Exception):
    """An error a user can act on: what happened, and a hint saying what to do."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InputError(NsdiagError):
    """Unreadable or unsupported input file."""


class MissingDependencyError(NsdiagError):
    """An optional package needed for this input or command is not installed."""


class ProfilerError(NsdiagError):
    """The profiled program or a profiler failed (a partial session may exist)."""

    exit_code = 1


class RuleError(NsdiagError):
    """A rule file is malformed or names an unknown metric."""


class OutputError(NsdiagError):
    """An output (report, session folder, standard output) cannot be written safely."""
