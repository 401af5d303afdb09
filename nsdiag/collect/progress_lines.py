"""`nsdiag profile --json-lines`: a run's progress (the calls on collect's Progress) and its result
as one JSON object a line, for a program that drives nsdiag (`nsdiag mcp`), and the reading side,
which turns those lines back into Progress calls. Writer and reader live here so they agree."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nsdiag.collect.options import ProfileResult, Progress

RESULT = "result"


class LineProgress:
    """A Progress whose every call is written through `write` as one JSON line."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _emit(self, event: str, **fields: Any) -> None:
        self.write(json.dumps({"event": event, **fields}, ensure_ascii=False))

    def phase(self, title: str, total: int | None) -> None:
        self._emit("phase", title=title, total=total)

    def advance(self, done: int, label: str) -> None:
        self._emit("advance", done=done, label=label)

    def output(self, line: str) -> None:
        self._emit("output", line=line)

    def note(self, text: str) -> None:
        self._emit("note", text=text)


def result_line(result: ProfileResult) -> str:
    """The last line of a finished run: where its session is and what it lacks."""
    return json.dumps(
        {
            "event": RESULT,
            "session": str(result.session_dir),
            "complete": result.complete,
            "missing": list(result.missing),
            "profiled": result.profiled,
        },
        ensure_ascii=False,
    )


def replay(line: str, progress: Progress) -> dict[str, Any] | None:
    """One line of a `--json-lines` run onto `progress`; the result's fields when it is the
    result line. A line that is no event (something the run printed past nsdiag) is output."""
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        progress.output(line)
        return None
    kind = event["event"]
    if kind == RESULT:
        return event
    if kind == "phase":
        total = event.get("total")
        progress.phase(str(event.get("title", "")), total if isinstance(total, int) else None)
    elif kind == "advance":
        done = event.get("done")
        progress.advance(done if isinstance(done, int) else 0, str(event.get("label", "")))
    elif kind == "note":
        progress.note(str(event.get("text", "")))
    else:
        progress.output(str(event.get("line", "")))
    return None
