"""Command line: thin click glue, the only place that prints and turns errors into exit codes.

entry.py    the process entry: the group run, then a fast exit
app.py      the `nsdiag` group and its commands
analyse.py  load, explain, report: recorded inputs in, a diagnosis out
rules.py    the rule table
profile.py  running the profilers (progress.py draws their progress)
doctor.py   can this machine profile?
mcp.py      the MCP server for coding agents (nsdiag/mcp/), when its SDK is installed
errors.py   one line and an exit code for every error, `-h` for help
help.py     the examples each command's --help ends with
"""

from __future__ import annotations

from typing import Any

__all__ = ["main", "run"]


def __getattr__(name: str) -> Any:
    """`main` (the click group) and `run` (the process entry) on first use: the entry sets the
    collector's thresholds before the commands' imports run (cli/entry.py)."""
    if name == "main":
        from nsdiag.cli.app import main

        return main
    if name == "run":
        from nsdiag.cli.entry import run

        return run
    raise AttributeError(f"module 'nsdiag.cli' has no attribute {name!r}")
