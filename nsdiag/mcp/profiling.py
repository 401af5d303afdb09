"""The profile tool: `nsdiag profile` in a child process (collect/profile_child.py says why a
child), its progress as the call's progress notifications, and a cancelled call ending the run
as Ctrl-C ends the command: the profilers stopped, the partial session kept."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context

from nsdiag.collect.profile_child import ProfileChild
from nsdiag.errors import InputError, MissingDependencyError, ProfilerError
from nsdiag.mcp.calls import Answer, profiled

log = logging.getLogger("nsdiag.mcp")


class NotifyingProgress:
    """collect's Progress, called on the worker thread that follows the run, as progress
    notifications: phases, profiled launches and nsdiag's notes (the program's own output stays
    in the session's logs/). Each notification's progress is one more than the last, as the
    protocol requires; its message says where the run is."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sent = 0
        self.title = ""
        self.total: int | None = None
        self.stopped = False

    def _send(self, message: str) -> None:
        if self.stopped:  # the call was cancelled: nobody is listening
            return
        self.sent += 1
        try:
            anyio.from_thread.run(self.ctx.report_progress, self.sent, None, message)
        except Exception:  # a lost notification must never stop the profile
            log.debug("progress notification not sent", exc_info=True)

    def phase(self, title: str, total: int | None) -> None:
        self.title, self.total = title, total
        self._send(title)

    def advance(self, done: int, label: str) -> None:
        of = f"/{self.total}" if self.total and done <= self.total else ""  # estimates run short
        self._send(f"{self.title}: {done}{of} launches profiled ({label})")

    def output(self, line: str) -> None:
        pass

    def note(self, text: str) -> None:
        self._send(f"nsdiag: {text}")


@dataclass(frozen=True)
class ProfileRequest:
    """One call's arguments (server.py's `profile` describes each)."""

    command: str
    args: Sequence[str] = ()
    budget_s: float | None = None
    output: str | None = None
    ncu: str | None = None
    nsys: str | None = None

    def argv(self) -> list[str]:
        """`nsdiag profile`'s arguments: options, then `--` and the program."""
        if not self.command.strip():
            raise InputError(
                "profile: no command given",
                "command is the program: a Python script (run with this server's Python) or an "
                "executable; its arguments go in args",
            )
        options: list[str] = []
        if self.output:
            options += ["-o", str(Path(self.output).expanduser())]
        if self.budget_s is not None:
            options += ["--budget", repr(self.budget_s)]
        for flag, value in (("--ncu", self.ncu), ("--nsys", self.nsys)):
            if value:
                options += [flag, value]
        return [*options, "--", self.command, *self.args]


def tools_note(ncu: str | None, nsys: str | None) -> str | None:
    """Refuse, as `nsdiag doctor` would fail it, without a working ncu (or a named nsys that
    does not work); without nsys the run goes on as `nsdiag profile` does (ncu alone times the
    kernels), and the answer carries doctor's line about it."""
    from nsdiag.collect.doctor import check_tool

    for name, override in (("ncu", ncu), ("nsys", nsys)):
        check, _ = check_tool(name, override)
        if check.ok:
            continue
        if name == "ncu" or override:
            raise MissingDependencyError(
                f"{check.name}: {check.detail}",
                f"fix: {check.fix}; `nsdiag doctor` checks everything profiling needs",
            )
        return f"{check.name}: {check.detail}"
    return None


class ProfileTool:
    """One profile at a time per server: two runs at once would share the GPU and measure each
    other."""

    def __init__(self) -> None:
        self.running: str | None = None

    async def __call__(self, ctx: Context, request: ProfileRequest) -> Answer:
        if self.running is not None:
            raise InputError(
                f"a profile is already running in this server ({self.running})",
                "wait for it to end, or cancel it (its partial session is kept)",
            )
        argv = request.argv()
        self.running = " ".join([request.command, *request.args])
        try:
            note = await anyio.to_thread.run_sync(tools_note, request.ncu, request.nsys)
            return await self._run(ctx, argv, note)
        finally:
            self.running = None

    async def _run(self, ctx: Context, argv: list[str], note: str | None) -> Answer:
        child = ProfileChild(argv)
        progress = NotifyingProgress(ctx)
        try:
            outcome = await anyio.to_thread.run_sync(child.follow, progress, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            # The client cancelled the call (or went away): end the run as Ctrl-C would and wait,
            # shielded, until it has saved its partial session. A cancelled call gets no answer.
            progress.stopped = True
            child.interrupt()
            with anyio.CancelScope(shield=True):
                code = await anyio.to_thread.run_sync(child.finish)
            log.warning(
                "nsdiag mcp: profile cancelled (exit code %d): %s", code, child.last_error()
            )
            raise
        if outcome.result is None:
            raise ProfilerError(
                outcome.error or f"nsdiag profile ended with exit code {outcome.returncode}"
            )
        return await anyio.to_thread.run_sync(profiled, outcome.result, note)
