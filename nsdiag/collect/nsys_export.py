"""Find an nsys binary and export a `.nsys-rep` report (or a `.qdrep`, nsys before 2021.4) to
SQLite with it."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from nsdiag.collect.argv import nsys_export_sqlite
from nsdiag.collect.tools import capture, find_optional
from nsdiag.errors import InputError, MissingDependencyError, ProfilerError

EXPORT_HINT = (
    "export it where nsys is installed: nsys export --type sqlite report.nsys-rep "
    "(writes report.sqlite), then pass the .sqlite file; or install Nsight Systems, or set "
    "NSYS=/path/to/nsys"
)


def find_nsys() -> Path | None:
    """The nsys to export with: the same search as `nsdiag profile` ($NSYS, PATH, CUDA_HOME, the
    standard install folders, the copy inside Nsight Compute), newest working version first."""
    tool = find_optional("nsys")
    return tool.path if tool is not None else None


def export_command(report: Path) -> str:
    """The command a user runs to export `report` next to itself, quoted for a shell."""
    argv = ["nsys", "export", "--type", "sqlite", "-o", str(report.with_suffix(".sqlite"))]
    return shlex.join([*argv, str(report)])


def export_sqlite(report: Path, output: Path, timeout_s: float = 600.0) -> Path:
    """Run `nsys export` on `report`, writing the SQLite database to `output`."""
    if not report.is_file():
        raise InputError(f"{report} does not exist", "check the path")
    nsys = find_nsys()
    if nsys is None:
        raise MissingDependencyError(
            f"reading {report.name} needs the nsys binary to export it, and none was found: "
            f"run {export_command(report)}",
            EXPORT_HINT,
        )
    try:
        done = capture(nsys_export_sqlite(nsys, report, output), timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProfilerError(f"nsys export of {report} failed: {exc}", EXPORT_HINT) from exc
    if done.returncode != 0 or not output.is_file():
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-3:]
        raise ProfilerError(
            f"nsys export of {report} failed (exit {done.returncode}): {' | '.join(tail)}",
            "check that the report is complete and that this nsys is as new as the one that "
            "recorded it",
        )
    return output
