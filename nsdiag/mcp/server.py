"""`nsdiag mcp`: the Model Context Protocol server over stdio, built on the official Python SDK.

The tools are the CLI's commands (calls.py, profiling.py); each answers with a short summary and,
where the command has one, the versioned JSON document `--json` prints (as structured content
and as text); every failure is the CLI's one line (errors.py) in an error result. Standard
output is the protocol: the SDK moves file descriptor 1 to standard error while it serves, so a
stray print, of nsdiag's or of a library's, cannot break it."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, ContentBlock, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from nsdiag.analysis.diff.gate import DEFAULT_SHARE_PCT
from nsdiag.cli.diff import MAX_PCT
from nsdiag.mcp import calls, docs
from nsdiag.mcp.errors import arguments_line, error_line
from nsdiag.mcp.profiling import ProfileRequest, ProfileTool
from nsdiag.version import __version__

INSTRUCTIONS = """\
nsdiag tells why CUDA kernels and GPU programs are slow and what to change, ranked by the time \
each change would save. A loop: `profile` the program (or `explain` a recording you have), read \
the first change and its fix, edit the program, profile again, and `diff` BEFORE against AFTER: \
did it get faster, and by what the prediction said? explain and diff answer with a summary and \
the JSON `nsdiag explain --json` / `nsdiag diff --json` print (schema name and version in its \
`schema` field). Resources: nsdiag://docs/causes (which change fixes which cause, and how \
savings are counted once) and nsdiag://rules/NSDnnn (each rule's documentation). Relative paths \
are relative to the server's working directory."""

INPUT_TEXT = (
    "a recording, or a list of recordings read together: a session folder written by `nsdiag "
    "profile`, a .ncu-rep, an ncu CSV export (raw or details page), an nsys .nsys-rep/.qdrep "
    "or its SQLite export (.sqlite, .sqlite.gz), an nsys stats CSV"
)
KERNEL_TEXT = "only kernels whose name matches this Python regular expression"
REGION_TEXT = (
    "the part of the timeline to analyse: auto (the cudaProfilerStart/Stop range, else the "
    "steady-state iterations, else the NVTX-annotated part), all, nvtx:NAME (the instances of "
    "an NVTX range), or START:END in ms from the trace's first event"
)

log = logging.getLogger("nsdiag.mcp")


def _result(answer: calls.Answer) -> CallToolResult:
    content: list[ContentBlock] = [TextContent(type="text", text=answer.text)]
    if answer.document is not None:
        text = answer.document_text or json.dumps(answer.document)
        content.append(TextContent(type="text", text=text))
    return CallToolResult(content=content, structured_content=answer.document)


def _failed(error: BaseException) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=error_line(error))], is_error=True)


def answered(call: Callable[[], calls.Answer]) -> CallToolResult:
    """The answer, or the CLI's one line for whatever went wrong."""
    try:
        return _result(call())
    except Exception as error:  # every failure, as one line (errors.py logs a bug's traceback)
        return _failed(error)


def explain(
    path: Annotated[str | list[str], Field(description=INPUT_TEXT)],
    top: Annotated[
        int, Field(ge=0, le=1000, description="changes listed in the summary (the JSON has all)")
    ] = 5,
    kernel: Annotated[str | None, Field(description=KERNEL_TEXT)] = None,
    region: Annotated[str, Field(description=REGION_TEXT)] = "auto",
) -> CallToolResult:
    """Say what limits each kernel, why, and what to change, ranked by the time each change
    would save in the analysed region. Returns a summary (what was analysed, warnings, the
    first changes: saving, rules, fix) and the JSON `nsdiag explain --json` prints (schema
    nsdiag.diagnosis: `changes` ranked, each with its saving, what it touches and its fix;
    `kernels` with their verdict and findings; `program_findings`). Read the first change's fix
    and act on it; `rules` or the nsdiag://rules/ID resource explains a rule."""
    return answered(lambda: calls.explain(path, top, kernel, region))


def diff(
    before: Annotated[str | list[str], Field(description="BEFORE the change: " + INPUT_TEXT)],
    after: Annotated[str | list[str], Field(description="AFTER the change: " + INPUT_TEXT)],
    fail_if_slower: Annotated[
        float | None,
        Field(
            ge=0,
            le=MAX_PCT,
            allow_inf_nan=False,
            description="the CI gate: fail (in the answer's gate, not as an error) when the "
            "region, or a kernel above "
            f"{DEFAULT_SHARE_PCT:g}% of it, is more than this many percent slower in AFTER "
            "beyond the run-to-run noise",
        ),
    ] = None,
    region: Annotated[str, Field(description="each side's region: " + REGION_TEXT)] = "auto",
    kernel: Annotated[str | None, Field(description=KERNEL_TEXT)] = None,
) -> CallToolResult:
    """Compare two profiles of a program, BEFORE and AFTER a change: did it get faster? The
    region's time per iteration and its spread, kernels matched across the two (renamed and
    fused ones too), findings resolved and new, and each change of BEFORE's predicted saving
    against the measured one. Several recordings a side are runs of it (they measure the
    run-to-run noise). Returns a summary and the JSON `nsdiag diff --json` prints (schema
    nsdiag.diff); with fail_if_slower, its `gate` says pass or fail."""
    return answered(lambda: calls.diff(before, after, fail_if_slower, region, kernel))


def report(
    path: Annotated[str | list[str], Field(description=INPUT_TEXT)],
    out: Annotated[
        str,
        Field(
            description="the file to write; its extension picks the format: .html "
            "(self-contained, interactive), .json, .md or .txt"
        ),
    ],
    region: Annotated[str, Field(description=REGION_TEXT)] = "auto",
    kernel: Annotated[str | None, Field(description=KERNEL_TEXT)] = None,
) -> CallToolResult:
    """Write a report of the diagnosis to a file, for a person to read (HTML: charts, a card
    per kernel, the timeline) or to keep (JSON, Markdown, text), as `nsdiag report -o OUT`
    does. An existing file is replaced safely; a folder, a link or a device is refused."""
    return answered(lambda: calls.report(path, out, region, kernel))


def rules(
    action: Annotated[
        Literal["list", "show"],
        Field(description="list: every rule in one line each; show: one rule's documentation"),
    ] = "list",
    rule_id: Annotated[
        str | None,
        Field(description="for show: a rule id (NSD101) or a cause slug (pageable-memcpy)"),
    ] = None,
) -> CallToolResult:
    """The rule table nsdiag diagnoses with: `list` gives each rule's id, scope, cause and title
    (also as data); `show` one rule's documentation, as `nsdiag rules show ID` prints it: when
    it fires, what it reads, why that is slow, how to fix it, its false positives."""
    return answered(lambda: calls.rules(action, rule_id))


PROFILE = ProfileTool()


async def profile(
    ctx: Context,
    command: Annotated[
        str,
        Field(
            description="the program: a Python script (run with the server's Python) or an "
            "executable"
        ),
    ],
    args: Annotated[list[str], Field(description="the program's arguments")] = [],  # noqa: B006
    budget_s: Annotated[
        float | None,
        Field(
            gt=0,
            allow_inf_nan=False,
            description="phase 2 (the ncu runs) estimated at most this many seconds: the kernel "
            "signatures with the least GPU time are left out until it fits, and the answer says "
            "which",
        ),
    ] = None,
    output: Annotated[
        str | None,
        Field(
            description="the session folder to write (default nsdiag-sessions/<program>-<time>;"
            " an existing non-empty one gets a suffix)"
        ),
    ] = None,
    ncu: Annotated[str | None, Field(description="the ncu to use (default: newest found)")] = None,
    nsys: Annotated[
        str | None, Field(description="the nsys to use (default: newest found)")
    ] = None,
) -> CallToolResult:
    """Profile a program on this machine's GPU and say why its kernels are slow, as `nsdiag
    profile` does: phase 1 records a timeline (nsys), phase 2 profiles one launch of each kernel
    signature that matters (ncu). Takes from seconds to minutes; progress notifications say the
    phase and the launches profiled. Cancelling the call stops the run as Ctrl-C does and keeps
    the partial session it has. Returns the session folder, what it lacks, and its explain
    summary and JSON (under `diagnosis`); give the folder to explain, report or diff later.
    Refused in one line, as `nsdiag doctor` says it, when ncu is missing."""
    try:
        request = ProfileRequest(command, args, budget_s, output, ncu, nsys)
        return _result(await PROFILE(ctx, request))
    except Exception as error:
        return _failed(error)


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
TOOLS: Mapping[str, tuple[Callable[..., Any], ToolAnnotations]] = {
    "explain": (explain, READ_ONLY),
    "diff": (diff, READ_ONLY),
    "report": (report, ToolAnnotations(read_only_hint=False, destructive_hint=False)),
    "rules": (rules, READ_ONLY),
    "profile": (profile, ToolAnnotations(read_only_hint=False, destructive_hint=False)),
}


class OneLineArguments:
    """Arguments the input schema refuses answered in one line before the SDK sees them (its own
    message is pydantic's, several lines long with a link)."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self.tools = tools

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        tool = self.tools.get(str(params.get("name"))) if ctx.method == "tools/call" else None
        arguments = params.get("arguments") or {}
        if tool is not None and isinstance(arguments, Mapping):
            try:
                tool.fn_metadata.validate_arguments(dict(arguments))
            except ValidationError as error:
                text = arguments_line(tool.name, error)
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return await call_next(ctx)


def _read_rule(rule_id: str) -> str:
    try:
        return docs.rule_doc(rule_id)
    except Exception as error:
        raise ResourceNotFoundError(error_line(error)) from error


def _read_causes() -> str:
    try:
        return docs.causes_table()
    except Exception as error:
        raise ResourceNotFoundError(error_line(error)) from error


def build() -> MCPServer:
    """The server with its tools and resources (the rules in use listed one by one)."""
    tools = {
        name: Tool.from_function(fn, name=name, annotations=annotations)
        for name, (fn, annotations) in TOOLS.items()
    }
    server: MCPServer = MCPServer(
        "nsdiag",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=list(tools.values()),
        middleware=[OneLineArguments(tools)],
        log_level="WARNING",
    )
    server.add_resource(
        FunctionResource.from_function(
            _read_causes,
            uri=docs.CAUSES_URI,
            name="causes",
            title="Which change fixes which cause (docs/diagnosis.md)",
            description="the cause -> change table, and how a change's saving is counted once",
            mime_type="text/markdown",
        )
    )
    for rule in docs.rule_docs():
        server.add_resource(
            FunctionResource.from_function(
                functools.partial(_read_rule, rule.id),
                uri=rule.uri,
                name=rule.name,
                title=rule.title,
                description="the rule's documentation, as `nsdiag rules show` prints it",
                mime_type="text/plain",
            )
        )
    server.resource(
        docs.RULE_URI,
        name="rule",
        title="A rule's documentation, by id or cause slug",
        mime_type="text/plain",
    )(_read_rule)
    return server


def serve() -> None:
    """Serve over stdio until the client closes standard input. nsdiag's own log lines go to
    standard error one line each (the SDK's handler wraps them into boxes)."""
    server = build()
    handler = logging.StreamHandler()  # standard error
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.propagate = False
    server.run("stdio")
