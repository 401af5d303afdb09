"""Find an nsys binary and export a `.nsys-rep` report to SQLite with it."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from nsdiag.errors import InputError, MissingDependencyError, ProfilerError

# Where NVIDIA's installers put nsys; newest version last after sorting. Nsight Compute ships a
# copy of nsys for its own use under host/target-linux-x64.
_INSTALL_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/cuda*/bin/nsys",
)
EXPORT_HINT = ("export it where nsys is installed: nsys export --type sqlite report.nsys-rep "
               "(writes report.sqlite), then pass the .sqlite file; or install Nsight Systems, or set NSYS=/path/to/nsys")


def find_nsys(env: dict[str, str] | None = None) -> Path | None:
    """The nsys binary: $NSYS, then PATH, then the standard install folders (newest first)."""
    env = dict(os.environ) if env is None else env
    candidates: list[str] = []
    if env.get("NSYS"):
        candidates.append(env["NSYS"])
    on_path = shutil.which("nsys", path=env.get("PATH"))
    if on_path:
        candidates.append(on_path)
    for pattern in _INSTALL_GLOBS:
        candidates.extend(sorted(glob.glob(pattern), reverse=True))
    for candidate in candidates:
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def export_argv(nsys: Path, report: Path, output: Path) -> list[str]:
    """The export command line (a list: paths with spaces need no quoting)."""
    return [str(nsys), "export", "--type", "sqlite", "-o", str(output), "-f", "true", str(report)]


def export_sqlite(report: Path, output: Path, timeout_s: float = 600.0) -> Path:
    """Run `nsys export` on `report`, writing the SQLite database to `output`."""
    if not report.is_file():
        raise InputError(f"{report} does not exist", "check the path")
    nsys = find_nsys()
    if nsys is None:
        raise MissingDependencyError(f"reading {report.name} needs the nsys binary to export it, and none was found",
                                     EXPORT_HINT)
    try:
        done = subprocess.run(export_argv(nsys, report, output), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProfilerError(f"nsys export of {report} failed: {exc}", EXPORT_HINT) from exc
    if done.returncode != 0 or not output.is_file():
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-3:]
        raise ProfilerError(f"nsys export of {report} failed (exit {done.returncode}): {' | '.join(tail)}",
                            "check that the report is complete and that this nsys is as new as the one that recorded it")
    return output
