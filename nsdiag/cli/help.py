"""What every command's --help ends with: examples to copy, as git's and ruff's do."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """An epilog of example command lines (`# ...` says what each does), kept as written: click
    rewraps an epilog's paragraphs but not one marked `\\b`."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
