"""Paths and streams as a user meets them: a file name too long for the file system, a full disk
on standard output, a reader that closes the pipe early, a file one may not read. Each is one
line and a non-zero exit, never a traceback; a closed pipe ends quietly, as Unix tools do."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_output_safety import IS_ROOT, assert_one_line_error, nsdiag_cli

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests/data/calib_small/raw.csv.gz"
REFERENCE = ROOT / "tests/data/reference/raw.csv.gz"
LONG_NAME = "k" * 300  # over NAME_MAX (255) on every common file system


def test_input_name_too_long(tmp_path: Path) -> None:
    result = nsdiag_cli("explain", str(tmp_path / f"{LONG_NAME}.csv"))
    assert_one_line_error(result, "File name too long", "shorter")


def test_report_output_name_too_long(tmp_path: Path) -> None:
    result = nsdiag_cli("report", str(SMALL), "-o", str(tmp_path / f"{LONG_NAME}.html"))
    assert_one_line_error(result, "File name too long", "shorter")
    assert list(tmp_path.iterdir()) == []


def test_load_output_name_too_long(tmp_path: Path) -> None:
    result = nsdiag_cli("load", str(SMALL), "-o", str(tmp_path / LONG_NAME))
    assert_one_line_error(result, "File name too long")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ("explain", str(SMALL)),
        ("explain", str(SMALL), "--json"),
        ("report", str(SMALL), "-o", "-", "--format", "md"),
        ("rules", "list"),
        ("rules", "show", "NSD101"),
    ],
)
def test_full_disk_on_stdout(args: tuple[str, ...]) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "nsdiag", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert_one_line_error(result, "No space left on device", "standard output")


@pytest.mark.parametrize(
    "args",
    [
        ("report", str(REFERENCE), "-o", "-"),
        ("explain", str(REFERENCE), "--json"),
    ],
)
def test_closed_pipe_ends_quietly(args: tuple[str, ...]) -> None:
    """`nsdiag ... | head -1`: no traceback, no message; the exit status a shell shows for a
    tool that SIGPIPE ended (128 + 13). The reader closes before nsdiag writes (it takes a
    second to start), so the first write meets the closed pipe."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nsdiag", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141, stderr
    assert stderr == ""


@pytest.mark.skipif(IS_ROOT, reason="root reads every file")
def test_unreadable_input(tmp_path: Path) -> None:
    locked = tmp_path / "raw.csv.gz"
    locked.write_bytes(SMALL.read_bytes())
    locked.chmod(0)
    result = nsdiag_cli("explain", str(locked))
    assert_one_line_error(result, "raw.csv.gz", "Permission denied")


def test_os_errors_become_one_line_with_a_hint() -> None:
    """Every class of OSError the commands meet, turned into one line (in process)."""
    from click.testing import CliRunner

    import nsdiag.cli.analyse as analyse
    from nsdiag.cli import main

    cases = {
        errno.EACCES: "permissions",
        errno.EROFS: "read-only file system (write elsewhere)",
        errno.ENOSPC: "free some space",
        errno.ENAMETOOLONG: "shorter",
        errno.ELOOP: "symbolic links",
        errno.EIO: "input/output error",
    }
    for code, hint in cases.items():

        def fail(*_: object, code: int = code, **__: object) -> None:
            raise OSError(code, os.strerror(code), "/some/file.csv")

        original = analyse.diagnose_inputs
        analyse.diagnose_inputs = fail  # type: ignore[assignment]
        try:
            result = CliRunner().invoke(main, ["explain", "x.csv"])
        finally:
            analyse.diagnose_inputs = original
        assert result.exit_code == 2, (code, result.output)
        line = result.output.strip()
        assert line.startswith("nsdiag: error: /some/file.csv: ") and hint in line.lower(), line
        assert "\n" not in line


def test_closed_stdout_is_one_line() -> None:
    """`nsdiag explain X >&-`: was exit 0 with the diagnosis lost."""
    result = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m nsdiag explain "{SMALL}" >&-'],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert_one_line_error(result, "standard output is closed")


def test_control_characters_in_a_file_name_stay_one_inert_line(tmp_path: Path) -> None:
    hostile = tmp_path / "a\nnsdiag: error: forged\x1b[31m.csv"
    hostile.write_text("not a profiler export\n")
    result = nsdiag_cli("explain", str(hostile))
    assert_one_line_error(result, "\\n", "\\x1b")
    assert "\x1b" not in result.stderr
