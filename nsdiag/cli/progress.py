"""`nsdiag profile`'s progress on the terminal: a rich progress bar per phase, the program's
output and nsdiag's notes scrolling above it."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class RichProgress:
    """nsdiag.collect.options.Progress on a rich progress bar; program output scrolls above it."""

    def __init__(self, console: Console) -> None:
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
            self.bar.update(self.task, completed=done, total=total, kernel=label[:40])

    def output(self, line: str) -> None:
        self.console.print(escape(line), highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]nsdiag:[/] {escape(text)}", soft_wrap=True)
