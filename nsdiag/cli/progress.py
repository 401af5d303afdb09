"""Progress on the terminal: `nsdiag profile`'s rich progress bar per phase, the program's
output and nsdiag's notes scrolling above it; `explain` and `report`'s steps (`Steps`)."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # rich.progress is imported where a bar is drawn: explain rarely draws one
    from rich.progress import Progress, TaskID


class RichProgress:
    """nsdiag.collect.options.Progress on a rich progress bar; program output scrolls above it."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = console
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("[dim]{task.fields[kernel]}"),
            console=console,
            transient=False,
        )
        self.task: TaskID | None = None

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def phase(self, title: str, total: int | None) -> None:
        if self.task is not None:
            self.bar.update(
                self.task, completed=self.bar.tasks[-1].total or self.bar.tasks[-1].completed
            )
            self.bar.stop_task(self.task)
        self.task = self.bar.add_task(title, total=total, kernel="")

    def advance(self, done: int, label: str) -> None:
        if self.task is not None:
            task = self.bar.tasks[-1]
            total = (
                task.total if task.total is None or done <= task.total else done
            )  # estimates can be short
            # a kernel's name, or what the run waits for (collect/watch.py)
            self.bar.update(self.task, completed=done, total=total, kernel=label[:80])

    def output(self, line: str) -> None:
        self.console.print(escape(line), highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]nsdiag:[/] {escape(text)}", soft_wrap=True)


class Steps:
    """Progress of a command's steps (reading, analysing, rendering) on stderr: a spinner with
    the step and the time since the command began, drawn only on a terminal and only once the
    work has run past `delay` seconds (a quick command prints nothing), erased when done."""

    def __init__(self, console: Console | None = None, delay: float = 1.0) -> None:
        # rich counts FORCE_COLOR as a terminal: progress needs a real one (stderr a TTY)
        self.enabled = _stderr_is_terminal() if console is None else console.is_terminal
        self.console = console or Console(stderr=True, force_terminal=self.enabled)
        self.enabled = self.enabled and not self.console.is_dumb_terminal
        self.delay = delay
        self.bar: Progress | None = _spinner(self.console) if self.enabled else None
        self.task: TaskID | None = None
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self.shown = False

    def __enter__(self) -> Steps:
        if self.enabled and self.bar is not None:
            self.task = self.bar.add_task("starting", total=None)
            self.timer = threading.Timer(self.delay, self._show)
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()
        with self.lock:
            if self.shown and self.bar is not None:
                self.bar.stop()
            self.shown = False
            self.enabled = False

    def _show(self) -> None:
        with self.lock:
            if self.enabled and not self.shown and self.bar is not None:
                self.bar.start()
                self.shown = True

    def step(self, description: str) -> None:
        """The step now running ("reading 2 inputs", "analysing", "writing the HTML report")."""
        if self.task is not None and self.bar is not None:
            self.bar.update(self.task, description=escape(description))


def _spinner(console: Console) -> Progress:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except ValueError:  # closed
        return False
