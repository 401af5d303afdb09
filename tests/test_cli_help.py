"""Help texts (issue 41, items 6 and 7): every command's --help ends with examples to copy (as
git's and ruff's do), the command lists' summaries are whole (click cuts a long one mid-word
with "..."), no line is wider than the 78 columns click fills in an 80-column terminal (nor in a
wider one: click keeps help to 80), and each help at 80 and 140 columns is the golden text in
tests/golden/help/ (NSDIAG_REGEN_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import click
import pytest

from nsdiag.cli.app import main
from tests import golden_files


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's path under the group (the group's own first), subcommands included."""
    found = [path]
    for name in sorted(group.commands):
        command = group.commands[name]
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append((*path, name))
    return found


COMMANDS = _commands(main)


def help_text(path: tuple[str, ...], columns: int) -> str:
    """The help as a terminal `columns` wide shows it: in a process of its own (click's
    CliRunner forces 80 columns whatever the terminal), named `nsdiag`."""
    result = subprocess.run(
        [sys.executable, "-c", _MAIN, *path, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": str(columns)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


_MAIN = "import sys; from nsdiag.cli.app import main; main(sys.argv[1:], prog_name='nsdiag')"


def _examples(text: str) -> list[str]:
    """The lines of the help's Examples section."""
    _, found, rest = text.partition("\n  Examples:\n")
    assert found, "no Examples section"
    return [line.strip() for line in rest.splitlines() if line.strip()]


def test_every_command_is_listed() -> None:
    names = {" ".join(p) for p in COMMANDS}
    for expected in ("", "explain", "report", "diff", "profile", "doctor", "rules show"):
        assert expected in names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "nsdiag")
def test_each_help_carries_examples_of_its_command(path: tuple[str, ...]) -> None:
    examples = _examples(help_text(path, 80))
    command = " ".join(("nsdiag", *path))
    # The group's examples name its commands; a command's, itself (mcp's: a client's command
    # line that runs it, and its own).
    assert any(line.startswith(command) for line in examples), examples
    for line in examples:
        program = line.split("#")[0].strip()
        assert program.startswith("nsdiag") or "-- nsdiag" in program, line


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "nsdiag")
def test_no_help_line_passes_78_columns(path: tuple[str, ...]) -> None:
    long = [line for line in help_text(path, 80).splitlines() if len(line) > 78]
    assert not long


def _group(path: tuple[str, ...]) -> bool:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return isinstance(command, click.Group)


@pytest.mark.parametrize("path", [p for p in COMMANDS if _group(p)], ids=lambda p: " ".join(p))
def test_command_lists_show_whole_summaries_at_80_columns(path: tuple[str, ...]) -> None:
    text = help_text(path, 80)
    _, _, listing = text.partition("\nCommands:\n")
    rows = [line for line in listing.split("\n\n")[0].splitlines() if line.strip()]
    assert rows
    for row in rows:
        summary = re.split(r"\s{2,}", row.strip(), maxsplit=1)[1]
        assert not summary.endswith("..."), row
        assert summary.endswith((".", ")")), row  # a whole sentence, not a cut one


@pytest.mark.parametrize("columns", [80, 140])
@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "nsdiag")
def test_help_is_its_golden_text(path: tuple[str, ...], columns: int) -> None:
    name = "-".join(("nsdiag", *path))
    golden_files.check(f"help/{name}.{columns}.txt", help_text(path, columns))
