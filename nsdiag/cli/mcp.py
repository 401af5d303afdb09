"""`nsdiag mcp`: the Model Context Protocol server for coding agents (nsdiag/mcp/), when the
optional SDK is installed; one line saying how to install it when it is not."""

from __future__ import annotations

import importlib

import click

from nsdiag.cli.errors import CONTEXT, one_line_errors
from nsdiag.cli.help import examples
from nsdiag.errors import MissingDependencyError

SDK = "mcp.server.mcpserver"  # the official SDK, version 2 (version 1 named it FastMCP)


@click.command(
    "mcp",
    context_settings=CONTEXT,
    short_help="Serve nsdiag to a coding agent (a Model Context Protocol server).",
    epilog=examples(
        "claude mcp add nsdiag -- nsdiag mcp    # register it with Claude Code",
        "nsdiag mcp    # what the client runs: requests on stdin, replies on stdout",
    ),
)
@one_line_errors
def serve_mcp() -> None:
    """Serve nsdiag to a coding agent: a Model Context Protocol server on stdin/stdout with the
    tools explain, diff, report, rules and profile, and the rule documentation as resources.
    Register it with an MCP client as the command `nsdiag mcp` (docs/mcp.md)."""
    try:
        importlib.import_module(SDK)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("mcp"):
            raise
        raise MissingDependencyError(
            "nsdiag mcp needs the MCP Python SDK, version 2 (the package mcp), which is not "
            "installed",
            "pip install 'nsdiag[mcp]'",
        ) from None
    from nsdiag.mcp.server import serve

    serve()
