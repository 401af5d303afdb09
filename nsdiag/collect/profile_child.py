"""`nsdiag profile` run as a child process that reports in JSON lines (progress_lines.py), for
`nsdiag mcp`: its progress replayed onto a Progress as it comes, and an interrupt that ends it
the way Ctrl-C ends the command.

A child, not a thread of the caller: what stops a run half-way and keeps its partial session is
the KeyboardInterrupt that SIGINT or SIGTERM raises in the main thread of `nsdiag profile`
(cli/signals.py); a thread of a server cannot be interrupted that way while it waits on a
silent profiler. The child stays in the caller's process group, so a Ctrl-C or a SIGTERM meant
for the caller's group reaches it too, as it would reach `nsdiag profile`.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from nsdiag.collect.options import Progress
from nsdiag.collect.progress_lines import replay

ERROR_PREFIX = "nsdiag: error: "
KILL_AFTER_S = 120.0  # an interrupted run stops its profilers (~10 s at most) and saves; then kill


@dataclass(frozen=True)
class ChildOutcome:
    returncode: int
    result: dict[str, Any] | None  # the result line's fields: the run finished
    error: str | None  # the run's one-line error (`nsdiag: error: ...`), when it failed
    interrupted: bool  # ended by `interrupt`


class ProfileChild:
    """`python -m nsdiag profile --json-lines ARGS` started now; `follow` reads it to its end."""

    def __init__(
        self,
        args: Sequence[str],
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        argv = [sys.executable, "-m", "nsdiag", "profile", "--json-lines", *args]
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,  # never the caller's stdin (a server's protocol stream)
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.errors: list[str] = []
        self._stderr = threading.Thread(target=self._drain, daemon=True)
        self._stderr.start()
        self._interrupted = threading.Event()
        self.ended = threading.Event()

    def _drain(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        for raw in iter(stream.readline, b""):
            self.errors.append(raw.decode("utf-8", errors="replace").rstrip("\r\n"))

    def follow(self, progress: Progress) -> ChildOutcome:
        """Replay the run's lines onto `progress` until it ends; what it ended with."""
        stream: IO[bytes] | None = self.proc.stdout
        assert stream is not None
        result = None
        try:
            for raw in iter(stream.readline, b""):
                fields = replay(raw.decode("utf-8", errors="replace").rstrip("\r\n"), progress)
                if fields is not None:
                    result = fields
            returncode = self._wait()
        finally:
            if self.proc.poll() is None:  # `progress` raised: the run must not go on alone
                self.interrupt()
                self._wait()
            self.ended.set()
        self._stderr.join()
        return ChildOutcome(returncode, result, self.last_error(), self._interrupted.is_set())

    def last_error(self) -> str | None:
        """Its one-line error; else the last line it wrote to stderr (click's usage errors)."""
        said = [e for e in self.errors if e.strip()]
        error = next((e for e in reversed(said) if e.startswith(ERROR_PREFIX)), None)
        if error is not None:
            return error.removeprefix(ERROR_PREFIX)
        return said[-1] if said else None

    def _wait(self) -> int:
        try:
            return self.proc.wait(timeout=KILL_AFTER_S if self._interrupted.is_set() else None)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def interrupt(self) -> None:
        """SIGTERM once, as a time limit or Ctrl-C would stop `nsdiag profile`: it stops the
        profilers' process groups and keeps the partial session (a second signal would be
        ignored while it saves)."""
        if self._interrupted.is_set():
            return
        self._interrupted.set()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)

    def finish(self) -> int:
        """After `interrupt`: its exit code once it has saved and ended (killed if it never
        does). `follow`, where it runs, reads the rest of its lines and ends by itself."""
        return self._wait()
