"""The process entry (`nsdiag` and `python -m nsdiag`): the collector tuned for one short
run, the command group run, then an exit that skips the interpreter's teardown.

Python's cyclic garbage collector runs a collection every 700 new container objects; importing
pandas and nsdiag and building a diagnosis makes millions, so it ran thousands of collections,
4-9% of an `explain` that found no garbage to speak of (the tables are arrays, the findings
frozen records). The first generation's threshold is raised to 200,000 objects, as mypy does
for the same reason: collections still run, a few hundred times less often.

A diagnosis leaves hundreds of thousands of objects behind (the session's tables, the launch
sequence, the findings); freeing them one by one at interpreter exit took 0.06-0.09 s of a
one-second `explain` (docs/latency.md), time in which the user waits for a prompt and nothing
is left to do: the output is flushed, files are closed, temporary folders are gone (every one
is a `with` block). So the process ends with `os._exit` once standard output and error are
flushed, unless something still needs the normal exit: a thread still running (it would be
joined), or a coverage or trace tool that writes its data at exit."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from typing import NoReturn

# New container objects between two collections of the youngest generation (Python: 700), and
# collections of each generation between two of the next (Python: 10 and 10).
COLLECT_EVERY = (200_000, 30, 30)


def exit_status(code: object) -> int:
    """The status `sys.exit(code)` ends a process with; a message is printed, as it does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with contextlib.suppress(OSError, ValueError):
        print(code, file=sys.stderr)
    return 1


def _teardown_needed() -> bool:
    return threading.active_count() > 1 or sys.gettrace() is not None or "coverage" in sys.modules


def run() -> NoReturn:
    gc.set_threshold(*COLLECT_EVERY)  # before the commands' imports, which make the most
    from nsdiag.cli.app import main

    try:
        main()
    except SystemExit as done:  # click ends every command with one
        if _teardown_needed():
            raise
        status = exit_status(done.code)
    else:  # pragma: no cover - click's standalone mode always exits
        status = 0
    for stream in (sys.stdout, sys.stderr):
        # errors_as_one_line flushed standard output and said what failed; what is left to
        # flush here is at most a note on stderr, which has no one left to tell
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(status)
