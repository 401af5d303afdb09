"""`nsdiag mcp` driven by the MCP SDK's own client against the real server over stdio (no mocks):
the tools and resources listed, explain and diff answering the CLI's JSON, rules and report,
bad inputs as one-line errors, profile end to end with the fake ncu and nsys, a cancelled profile
keeping its partial session, and the one line without the SDK."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import DATA, ROOT
from tests.test_profile_interrupt import _alive

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

needs_sdk = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None,
    reason="the MCP SDK is not installed (pip install -e '.[test]' installs it)",
)
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
PIPELINE = "tests/data/nsys/pipeline.sqlite.gz"
CALIB_SMALL = "tests/data/calib_small/raw.csv.gz"
FLOAT4 = "tests/data/diff_demo/float4"
SERIAL, SPLIT = "tests/data/diff_demo/serial_pageable", "tests/data/diff_demo/stream_split"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nsdiag", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def with_client(
    check: Callable[[Client], Awaitable[None]],
    env: dict[str, str] | None = None,
    mode: str = "auto",
) -> str:
    """Start `nsdiag mcp` in the repository, run `check` with a client connected to it over
    stdio, and return what the server wrote on its standard error."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "nsdiag", "mcp"], cwd=str(ROOT), env=env
    )
    with tempfile.TemporaryFile("w+") as errlog:

        async def main() -> None:
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                await check(client)

        try:
            anyio.run(main)
        except BaseExceptionGroup as group:  # the task groups' wrapping: the failure itself
            raise _leaf(group) from None
        errlog.seek(0)
        return errlog.read()


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def text(result: CallToolResult, block: int = 0) -> str:
    content = result.content[block]
    assert content.type == "text"
    return content.text


def assert_one_line_error(result: CallToolResult, *fragments: str) -> str:
    assert result.is_error, text(result)
    line = text(result)
    assert len(result.content) == 1 and "\n" not in line and "Traceback" not in line, line
    assert line.startswith("nsdiag: error: "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


@needs_sdk
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the modern protocol and the handshake
def test_tools_and_resources_are_listed_with_their_schemas(mode: str) -> None:
    shown = cli("rules", "show", "NSD401")
    rule_count = len(cli("rules", "list").stdout.splitlines())

    async def check(client: Client) -> None:
        from mcp import MCPError

        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"explain", "diff", "report", "rules", "profile"}
        required = {
            "explain": ["path"],
            "diff": ["after", "before"],
            "report": ["out", "path"],
            "rules": [],
            "profile": ["command"],
        }
        for name, tool in tools.items():
            assert tool.description and len(tool.description) > 100, name  # what to do with it
            assert sorted(tool.input_schema.get("required", [])) == required[name], name
            for argument, schema in tool.input_schema["properties"].items():
                assert schema.get("description"), (name, argument)
        assert tools["explain"].input_schema["properties"]["top"]["minimum"] == 0
        assert tools["rules"].input_schema["properties"]["action"]["enum"] == ["list", "show"]
        assert tools["explain"].annotations and tools["explain"].annotations.read_only_hint
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        rules = {u for u in resources if u.startswith("nsdiag://rules/")}
        assert "nsdiag://docs/causes" in resources and len(rules) == rule_count
        causes = (await client.read_resource("nsdiag://docs/causes")).contents[0]
        assert causes.text.startswith("## Findings are changes")  # type: ignore[union-attr]
        assert "| cause | scope | what it is |" in causes.text  # type: ignore[union-attr]
        assert "## Rule files" not in causes.text  # type: ignore[union-attr]  # that section only
        rule = (await client.read_resource("nsdiag://rules/NSD401")).contents[0]
        assert rule.text == shown.stdout.rstrip("\n")  # type: ignore[union-attr]
        by_slug = (await client.read_resource("nsdiag://rules/pageable-memcpy")).contents[0]
        assert by_slug.text == rule.text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as refused:
            await client.read_resource("nsdiag://rules/NSD999")
        message = refused.value.error.message
        assert message.startswith("nsdiag: error: no rule 'NSD999'") and "\n" not in message

    errors = with_client(check, mode=mode)
    assert "Traceback" not in errors, errors


@needs_sdk
def test_explain_and_diff_answer_the_json_the_cli_prints() -> None:
    explained = {
        (PIPELINE,): cli("explain", "--json", PIPELINE),
        (CALIB_SMALL, "-k", "uncoalesced"): cli(
            "explain", "--json", CALIB_SMALL, "-k", "uncoalesced"
        ),
        (FLOAT4,): cli("explain", "--json", FLOAT4),
    }
    diffed = cli("diff", "--json", SERIAL, SPLIT)
    gated = cli("diff", "--json", SPLIT, SERIAL, "--fail-if-slower", "5")
    assert gated.returncode == 1  # AFTER is slower: the CLI's gate fails
    several = cli("diff", "--json", "--before", SERIAL, "--before", PIPELINE, "--after", SPLIT)

    async def check(client: Client) -> None:
        for key, done in explained.items():
            assert done.returncode == 0, done.stderr
            arguments: dict[str, Any] = {"path": key[0]}
            if len(key) > 1:
                arguments["kernel"] = key[2]
            result = await client.call_tool("explain", arguments)
            assert not result.is_error, text(result)
            assert text(result, 1) == done.stdout  # the very document, byte for byte
            document = json.loads(done.stdout)
            assert result.structured_content == document
            assert document["schema"].startswith("nsdiag.diagnosis/")
            summary = text(result)
            assert summary.startswith(document["schema"] + ": ")
            first = document["changes"][0]
            assert f" 1. {first['title']}: " in summary and f"fix: {first['fix']}" in summary
        result = await client.call_tool("explain", {"path": PIPELINE, "top": 1})
        assert " 1. " in text(result) and " 2. " not in text(result)
        left = len(json.loads(text(result, 1))["changes"]) - 1
        assert f"{left} more in the JSON's changes" in text(result)

        result = await client.call_tool("diff", {"before": SERIAL, "after": SPLIT})
        assert not result.is_error and text(result, 1) == diffed.stdout
        assert result.structured_content == json.loads(diffed.stdout)
        assert text(result).startswith(f"nsdiag.diff/1: BEFORE {SERIAL} -> AFTER {SPLIT}")
        assert "region time: 98.0 ms -> 13.5 ms" in text(result)
        result = await client.call_tool(
            "diff", {"before": SPLIT, "after": SERIAL, "fail_if_slower": 5}
        )
        assert not result.is_error  # a failed gate is an answer
        assert text(result, 1) == gated.stdout
        assert result.structured_content and result.structured_content["gate"]["passed"] is False
        assert text(result).splitlines()[1].startswith("nsdiag diff: FAIL: the region")
        result = await client.call_tool("diff", {"before": [SERIAL, PIPELINE], "after": [SPLIT]})
        assert not result.is_error and text(result, 1) == several.stdout

    errors = with_client(check)
    assert "Traceback" not in errors, errors


@needs_sdk
def test_rules_list_and_show_and_report_write_what_the_cli_does(tmp_path: Path) -> None:
    listed, shown = cli("rules", "list"), cli("rules", "show", "NSD101")
    by_cli = tmp_path / "by-cli.md"
    assert cli("report", PIPELINE, "-o", str(by_cli)).returncode == 0
    by_mcp = tmp_path / "by-mcp.md"

    async def check(client: Client) -> None:
        result = await client.call_tool("rules", {})
        assert not result.is_error and text(result) == listed.stdout.rstrip("\n")
        assert result.structured_content
        ids = [r["id"] for r in result.structured_content["rules"]]
        assert ids == [line.split()[0] for line in listed.stdout.splitlines()]
        result = await client.call_tool("rules", {"action": "show", "rule_id": "NSD101"})
        assert not result.is_error and text(result) == shown.stdout.rstrip("\n")
        result = await client.call_tool("report", {"path": PIPELINE, "out": str(by_mcp)})
        assert not result.is_error, text(result)
        assert text(result).startswith(f"wrote {by_mcp} (md, ")

    with_client(check)
    assert by_mcp.read_text() == by_cli.read_text()


@needs_sdk
def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    not_a_recording = tmp_path / "notes.txt"
    not_a_recording.write_text("hello\n")
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes((ROOT / CALIB_SMALL).read_bytes()[:3000])
    empty = tmp_path / "empty folder"
    empty.mkdir()
    cli_lines = {
        name: cli("explain", str(path)).stderr.strip()
        for name, path in (("missing", tmp_path / "missing.csv"), ("text", not_a_recording))
    }
    assert all(line.startswith("nsdiag: error: ") for line in cli_lines.values()), cli_lines
    from nsdiag.collect.doctor import check_tool

    no_ncu = tmp_path / "no-ncu"
    doctor_says, _ = check_tool("ncu", str(no_ncu))

    async def check(client: Client) -> None:
        async def error(tool: str, arguments: dict[str, Any], *fragments: str) -> str:
            return assert_one_line_error(await client.call_tool(tool, arguments), *fragments)

        missing = await error("explain", {"path": str(tmp_path / "missing.csv")})
        assert missing == cli_lines["missing"]  # the CLI's line, word for word
        assert await error("explain", {"path": str(not_a_recording)}) == cli_lines["text"]
        await error("explain", {"path": str(cut)}, "cut.csv.gz is gzipped but truncated")
        await error("explain", {"path": str(empty)}, "not an nsdiag session")
        await error("explain", {"path": []}, "no input given")
        await error("explain", {"path": CALIB_SMALL, "kernel": "(["}, "not a valid regular")
        await error("explain", {"path": PIPELINE, "top": -1}, "top: ", "greater than or equal")
        await error("explain", {"top": 3}, "path: Field required")
        await error("explain", {"path": 3}, "path: Input should be a valid string or")
        await error("diff", {"before": SERIAL, "after": str(tmp_path / "gone")}, "gone")
        await error("diff", {"before": SERIAL, "after": SPLIT, "fail_if_slower": -5}, "fail_if")
        await error("rules", {"action": "show", "rule_id": "NSD999"}, "no rule 'NSD999'")
        await error("rules", {"action": "show"}, "no rule id given")
        await error("rules", {"action": "delete"}, "action: ")
        await error("report", {"path": PIPELINE, "out": "-"}, "not a file")
        await error("report", {"path": PIPELINE, "out": str(tmp_path / "no" / "r.html")})
        await error("report", {"path": PIPELINE, "out": str(tmp_path / "r.pdf")}, "format")
        await error("profile", {"command": ""}, "no command given")
        refused = await error("profile", {"command": "train.py", "ncu": str(no_ncu)})
        # what `nsdiag doctor` prints for it: the check, its detail and its fix
        assert doctor_says.ok is False
        assert f"{doctor_says.name}: {doctor_says.detail}" in refused
        assert doctor_says.fix in refused and "nsdiag doctor" in refused

    errors = with_client(check)
    assert "Traceback" not in errors, errors


@needs_sdk
@pytest.mark.skipif(IS_ROOT, reason="root reads every file")
def test_an_unreadable_input_is_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "raw.csv.gz"
    locked.write_bytes((ROOT / CALIB_SMALL).read_bytes())
    locked.chmod(0)

    async def check(client: Client) -> None:
        result = await client.call_tool("explain", {"path": str(locked)})
        assert_one_line_error(result, "raw.csv.gz", "Permission denied")

    with_client(check)


def fake_env(fakes: dict[str, Path], **extra: str) -> dict[str, str]:
    """The test's environment (conftest's `fakes` set the FAKE_ variables) with the fake tools
    as $NCU and $NSYS, for the server and the `nsdiag profile` it starts."""
    return {**os.environ, "NCU": str(fakes["ncu"]), "NSYS": str(fakes["nsys"]), **extra}


@needs_sdk
def test_profile_runs_end_to_end_with_the_fake_tools(
    fakes: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "session"
    progress: list[tuple[float, str]] = []

    async def check(client: Client) -> None:
        async def seen(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message or ""))

        result = await client.call_tool(
            "profile",
            {"command": str(fakes["script"]), "args": ["0"], "output": str(root)},
            progress_callback=seen,
        )
        assert not result.is_error, text(result)
        answer = result.structured_content
        assert answer and answer["session"] == str(root) and answer["profiled"] > 0
        assert answer["missing"] == json.loads((root / "status.json").read_text())["missing"]
        assert text(result).startswith(f"session: {root}")
        explained = cli("explain", "--json", str(root))
        assert explained.returncode == 0, explained.stderr
        assert answer["diagnosis"] == json.loads(explained.stdout)
        assert json.loads(text(result, 1)) == answer

    errors = with_client(check, fake_env(fakes))
    assert "Traceback" not in errors, errors
    assert (root / "session.json").is_file()
    values = [v for v, _ in progress]
    assert values == sorted(set(values))  # each notification's progress above the last
    messages = [m for _, m in progress]
    assert messages[0] == "phase 1: timeline"
    phase2 = next(i for i, m in enumerate(messages) if m.startswith("phase 2: ncu on "))
    assert any("launches profiled" in m for m in messages[phase2:])
    assert any(m.startswith("nsdiag: phase 2 estimate:") for m in messages)
    launched = [json.loads(line) for line in fakes["calls"].read_text().splitlines()]
    assert any(str(fakes["script"]) in call for call in launched)  # the program ran under them


def _wait_for(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 120  # a bound on a hang, not a speed requirement
    while not ready():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def _interrupted(root: Path) -> bool:
    try:
        status = json.loads((root / "status.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(status.get("interrupted")) and (root / "session.json").is_file()


@needs_sdk
def test_a_cancelled_profile_stops_as_ctrl_c_does_and_keeps_its_session(
    fakes: dict[str, Path], tmp_path: Path
) -> None:
    root, pids = tmp_path / "session", tmp_path / "pids"
    children: list[int] = []

    async def check(client: Client) -> None:
        import anyio

        async def profile() -> None:
            arguments = {"command": str(fakes["script"]), "output": str(root)}
            await client.call_tool("profile", arguments)
            raise AssertionError("a cancelled call is never answered")

        async with anyio.create_task_group() as calls:
            calls.start_soon(profile)
            while not (pids.exists() and pids.read_text().strip()):  # ncu hangs in phase 2
                await anyio.sleep(0.05)
            await anyio.sleep(0.3)  # every fake child started
            children.extend(int(p) for p in pids.read_text().split() if _alive(int(p)))
            second = await client.call_tool("profile", {"command": str(fakes["script"])})
            assert_one_line_error(second, "a profile is already running in this server")
            calls.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        await anyio.to_thread.run_sync(_wait_for, lambda: _interrupted(root), "saved")
        after = await client.call_tool("explain", {"path": str(root)})  # the server goes on
        assert not after.is_error, text(after)
        assert "the profile in" in text(after) and "is incomplete" in text(after)

    errors = with_client(check, fake_env(fakes, FAKE_TARGETED="hang", FAKE_PIDS=str(pids)))
    status = json.loads((root / "status.json").read_text())
    assert status["interrupted"] == {"signal": "SIGTERM", "phase": "phase2", "step": "2-targeted-1"}
    assert status["complete"] is False
    assert any(m.startswith("kernel metrics (interrupted by SIGTERM") for m in status["missing"])
    assert children and not any(_alive(p) for p in children)  # ncu's process group stopped
    assert "profile cancelled (exit code 143): interrupted by SIGTERM during phase 2" in errors
    assert "Traceback" not in errors, errors


def test_without_the_sdk_nsdiag_mcp_says_how_to_install_it() -> None:
    """The SDK made unimportable, as where it is not installed."""
    code = (
        "import sys\n"
        "class NoSDK:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mcp' or name.startswith('mcp.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoSDK())\n"
        "from nsdiag.cli import main\n"
        "main(['mcp'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "needs the MCP Python SDK" in done.stderr and "pip install 'nsdiag[mcp]'" in done.stderr


def test_the_summary_names_a_changes_code_only_where_the_json_has_it() -> None:
    from nsdiag.mcp.summary import CODE_KEY, explain_summary

    document = json.loads(cli("explain", "--json", str(DATA / "nsys/pipeline.sqlite.gz")).stdout)
    assert "code:" not in explain_summary(document, 5)  # never invented
    document["changes"][1][CODE_KEY] = {
        "source": "pytorch-ranges",
        "sites": [{"function": "torch.optim.AdamW.step", "launches": 1216.0, "host_ns": 26e6}],
        "launches": 1216.0,
        "total_launches": 1992.0,
        "per_iteration": True,
        "operators": [],
        "note": None,
    }
    lines = explain_summary(document, 5).splitlines()
    second = next(i for i, line in enumerate(lines) if line.startswith(" 2. "))
    assert lines[second + 1] == (
        "    code: torch.optim.AdamW.step: 1,216 of 1,992 launches per iteration, "
        "26.0 ms of host time"
    )
    assert sum(line.startswith("    code: ") for line in lines) == 1


def test_error_lines_are_the_lines_the_cli_prints() -> None:
    """What reaches a client for each kind of failure (root can't make a file unreadable, so
    the operating system's refusal is built here; the test above makes one where it can)."""
    import errno

    from nsdiag.cli.errors import OUT_OF_MEMORY, os_error_line
    from nsdiag.errors import InputError
    from nsdiag.mcp.errors import error_line

    denied = PermissionError(errno.EACCES, "Permission denied", "/data/raw.csv.gz")
    assert error_line(denied) == f"nsdiag: error: {os_error_line(denied)}"
    assert error_line(denied).startswith("nsdiag: error: /data/raw.csv.gz: Permission denied (")
    assert error_line(MemoryError()) == f"nsdiag: error: {OUT_OF_MEMORY}"
    assert error_line(InputError("x.csv does not exist", "check the path")) == (
        "nsdiag: error: x.csv does not exist (check the path)"
    )
    bug = error_line(KeyError("a\nkey"))
    assert bug.startswith("nsdiag: error: unexpected KeyError: ") and "\n" not in bug
    assert "a bug in nsdiag" in bug
