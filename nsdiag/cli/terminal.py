"""What the terminal nsdiag prints on can take: colour (`--color`, NO_COLOR, FORCE_COLOR, a TTY)
and width."""

from __future__ import annotations

import os
import shutil
import sys

import click

from nsdiag.render.text_layout import WIDTH

MAX_WIDTH = 140  # wider terminals get lines a reader can still follow
COLOR_CHOICES = ("auto", "always", "never")

color_option = click.option(
    "--color",
    "color",
    type=click.Choice(COLOR_CHOICES),
    default="auto",
    show_default=True,
    help="colour and emphasis: auto = on a terminal, unless NO_COLOR is set (FORCE_COLOR "
    "turns it on anywhere)",
)


def use_color(choice: str = "auto") -> bool:
    """`--color always|never` decides; else NO_COLOR (any value) turns colour off, FORCE_COLOR
    (other than 0) on, and otherwise standard output must be a terminal that is not dumb."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    return _stdout_is_terminal() and os.environ.get("TERM") != "dumb"


def width() -> int:
    """Columns to lay text out in, up to MAX_WIDTH: $COLUMNS where it is set (a terminal, or a
    pipe whose reader says how wide it is: `COLUMNS=80 nsdiag explain ... | less`), else a
    terminal's size; WIDTH into a pipe or file otherwise (the same text everywhere)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return min(int(columns), MAX_WIDTH)
    if not _stdout_is_terminal():
        return WIDTH
    return min(shutil.get_terminal_size((WIDTH, 24)).columns, MAX_WIDTH)


def _stdout_is_terminal() -> bool:
    stream = sys.stdout
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # closed
        return False
