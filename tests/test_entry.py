"""The process entry (nsdiag/cli/entry.py): a fast exit that still delivers every byte of the
output and the exit status `sys.exit` would have given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsdiag.cli.entry import exit_status

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (2, 2), (130, 130), ("no", 1)])
def test_exit_status_is_what_sys_exit_gives(code: object, status: int) -> None:
    assert exit_status(code) == status


def _nsdiag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nsdiag", *args], capture_output=True, text=True, check=False
    )


def test_a_large_output_reaches_the_pipe_whole() -> None:
    """The JSON document (larger than a pipe's buffer) arrives whole through a pipe, though the
    process skips the interpreter's teardown."""
    done = _nsdiag("explain", str(DATA / "multi_gpu/verify2/ddp_straggler"), "--json")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) > 65536
    assert json.loads(done.stdout)["schema"].startswith("nsdiag.diagnosis/")


def test_an_error_keeps_its_line_and_status(tmp_path: Path) -> None:
    done = _nsdiag("explain", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert done.stderr.startswith("nsdiag: error: ") and "does not exist" in done.stderr
    usage = _nsdiag("--no-such-option")
    assert usage.returncode == 2 and "No such option" in usage.stderr
