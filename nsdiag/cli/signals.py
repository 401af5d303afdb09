"""SIGTERM ends `nsdiag profile` the way Ctrl-C does: as a KeyboardInterrupt naming the signal, so
collect/ stops the profiler's process group and saves the partial session, and the command ends
with one line. Without this, a time limit's SIGTERM killed nsdiag on the spot: ncu, nsys and the
program kept running and the folder had no session.json."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from nsdiag.errors import SignalInterrupt

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_as_keyboard() -> Iterator[None]:
    """SIGINT and SIGTERM raise SignalInterrupt (a KeyboardInterrupt) once; a second signal
    while the partial session is being saved is ignored, so the save and the stopping of the
    children are not cut short (SIGKILL still ends everything). Handlers are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    fired: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired:
            return
        fired.append(signum)
        raise SignalInterrupt(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
