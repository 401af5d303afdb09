"""The shipped artefact: the wheel carries the data folders, and an editable install finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # No build isolation: the build backend (hatchling) is installed with the test extras, and
    # CI must not depend on fetching it again here.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return next(out.glob("nsdiag-*.whl"))


def test_wheel_contains_rules_templates_and_kernels(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    rules = {Path(n).name for n in names if n.startswith("nsdiag/rules/")}
    assert {p.name for p in (ROOT / "rules").glob("NSD*.toml")} <= rules
    assert any(n.startswith("nsdiag/templates/") and n.endswith(".j2") for n in names)
    for file in ("elementwise.cu", "run_all.py", "variants.py", "check.py"):
        assert f"nsdiag/reference_kernels/{file}" in names
    assert "nsdiag/cli/__init__.py" in names and "nsdiag/__main__.py" in names
    assert "nsdiag/docs/diagnosis.md" in names  # the cause table `nsdiag mcp` serves
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "nsdiag = nsdiag.cli:run" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_finds_its_data(wheel: Path, tmp_path: Path) -> None:
    """Unpacked alone (no checkout beside it), the package finds rules and templates inside
    itself."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    code = (
        "import nsdiag.resources as r; from nsdiag.analysis.ruleset import load_rules; "
        "print(r.rules_dir()); print(len(load_rules())); print(r.templates_dir())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    rules_dir, count, templates = result.stdout.split()
    assert rules_dir == str(tmp_path / "nsdiag" / "rules")
    assert int(count) == len(list((ROOT / "rules").glob("NSD*.toml")))
    assert templates == str(tmp_path / "nsdiag" / "templates")


def test_installed_wheel_runs_the_command_line(wheel: Path, tmp_path: Path) -> None:
    """`python -m nsdiag` from the unpacked wheel: the cli package and its commands are inside."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "nsdiag", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    for command in ("doctor", "explain", "load", "mcp", "profile", "report", "rules"):
        assert f"  {command} " in result.stdout


def test_source_checkout_finds_top_level_data() -> None:
    from nsdiag import resources

    assert resources.rules_dir() == ROOT / "rules"
    assert resources.templates_dir() == ROOT / "templates"
    assert resources.reference_kernels_dir() == ROOT / "reference_kernels"
