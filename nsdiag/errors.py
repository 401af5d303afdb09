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


class SignalInterrupt(KeyboardInterrupt):
    """SIGINT or SIGTERM, turned by the CLI's handler into the KeyboardInterrupt path that keeps
    the partial session; `signame` says which signal it was."""

    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame


def interrupting_signal(exc: BaseException | None) -> str:
    """The signal behind an interrupt (its cause chain searched); a bare KeyboardInterrupt is
    Python's own SIGINT handling."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, SignalInterrupt):
            return exc.signame
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return "SIGINT"
