"""Command line: thin click glue, the only place that prints and turns errors into exit codes.

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

from nsdiag.cli.app import main

__all__ = ["main"]
