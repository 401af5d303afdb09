"""`nsdiag diff` as a CI job runs it: exit codes (0 pass, 1 slower, 2 bad input), the gate's one
line, output files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA

PROGRAMS = DATA / "programs"
FAST = str(PROGRAMS / "elementwise_fixed.sqlite.gz")
SLOW = str(PROGRAMS / "elementwise")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nsdiag", "diff", *args], capture_output=True, text=True, check=False
    )


def test_regression_exits_1_with_one_line_saying_why() -> None:
    result = run(FAST, SLOW, "--fail-if-slower", "5")
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("nsdiag diff:")]
    assert "FAIL" in line and "the region" in line and "Mann-Whitney" in line and "5%" in line


def test_the_same_recording_passes_and_json_stays_parseable(tmp_path: Path) -> None:
    result = run(SLOW, SLOW, "--fail-if-slower", "5", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["gate"]["passed"] is True
    assert result.stderr.startswith("nsdiag diff: pass")  # the gate's line keeps stdout JSON


def test_before_after_options_and_files(tmp_path: Path) -> None:
    out = tmp_path / "diff report.html"
    result = run("--before", SLOW, "--after", FAST, "-o", str(out), "--fail-if-slower", "5")
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("<!DOCTYPE html>") and "pass" in result.stdout
    md = tmp_path / "diff.md"
    assert run(SLOW, FAST, "-o", str(md)).returncode == 0
    assert "## Changes of BEFORE, as ranked" in md.read_text()


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([SLOW], "takes two inputs"),
        ([SLOW, FAST, FAST], "takes two inputs"),
        (["--before", SLOW], "--after is missing"),
        (["--before", SLOW, "--after", FAST, SLOW], "not both"),
        ([SLOW, "/no/such/file.csv"], "does not exist"),
        ([SLOW, FAST, "-o", "report.pdf"], "cannot tell the report format"),
        ([SLOW, FAST, "--region", "nvtx:nowhere"], "nowhere"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], fragment: str) -> None:
    result = run(*args)
    assert result.returncode == 2, result.stdout
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_written_report_is_never_lost_to_a_folder(tmp_path: Path) -> None:
    result = run(SLOW, FAST, "-o", str(tmp_path), "--format", "html")
    assert result.returncode == 2 and "is a folder" in result.stderr
