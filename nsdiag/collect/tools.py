"""Find ncu and nsys: an explicit path, $NCU/$NSYS, PATH, CUDA_HOME and the standard install
folders (including the nsys that ships inside Nsight Compute). Newest version wins.

A binary is accepted only when `--version` names the right product: an `ncu` on PATH can be
another program (npm-check-updates installs one).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from nsdiag.collect.argv import ncu_query_metrics
from nsdiag.errors import MissingDependencyError

_VERSION = re.compile(r"(?<![\d.])(\d{4})\.(\d+)\.(\d+)(?:\.(\d+))?")
BANNERS = {"ncu": "Nsight Compute", "nsys": "Nsight Systems"}
# Standard install folders, by tool. Globs are expanded at call time (tests replace this table).
INSTALL_GLOBS: dict[str, tuple[str, ...]] = {
    "ncu": (
        "/usr/local/cuda*/bin/ncu",
        "/usr/local/cuda*/nsight-compute-*/ncu",
        "/opt/nvidia/nsight-compute/*/ncu",
    ),
    "nsys": (
        "/usr/local/cuda*/bin/nsys",
        "/usr/local/cuda*/nsight-systems-*/bin/nsys",
        "/opt/nvidia/nsight-systems/*/bin/nsys",
        # Nsight Compute carries its own nsys (the only one on the H200 test machine).
        "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    ),
}
HINTS = {
    "ncu": (
        "install Nsight Compute (part of the CUDA toolkit; or "
        "https://developer.nvidia.com/nsight-compute), put ncu on PATH, set CUDA_HOME, or pass "
        "--ncu /path/to/ncu"
    ),
    "nsys": (
        "install Nsight Systems (https://developer.nvidia.com/nsight-systems; Nsight Compute also "
        "ships one under host/target-linux-x64/nsys), put nsys on PATH, or pass "
        "--nsys /path/to/nsys"
    ),
}
VersionProbe = Callable[[Path], str | None]


@dataclass(frozen=True)
class Tool:
    path: Path
    version: str  # "2025.3.1.0"

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))


def parse_version(text: str) -> str | None:
    """'Version 2025.3.1.0 (build 36398880)' or 'NVIDIA Nsight Systems version 2025.3.1.0-...'
    -> '2025.3.1.0'."""
    match = _VERSION.search(text)
    if not match:
        return None
    return ".".join(g for g in match.groups() if g is not None)


def capture(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """A short command's exit code and output as text, its stdin closed (so a tool that asks a
    question cannot hang nsdiag). Raises what subprocess.run raises."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_version(path: Path, timeout_s: float = 30.0) -> str | None:
    """The `--version` output of a binary, or None when it does not run."""
    try:
        done = capture([str(path), "--version"], timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout or "") + (done.stderr or "")


def probe(name: str, path: Path, version_output: VersionProbe = run_version) -> Tool | None:
    """A Tool when `path` runs and says it is Nsight Compute / Systems; None otherwise."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        return None
    text = version_output(path)
    if not text or BANNERS[name].lower() not in text.lower():
        return None
    version = parse_version(text)
    return Tool(path, version) if version else None


def candidates(name: str, env: Mapping[str, str] | None = None) -> list[Path]:
    """Every place `name` may be, in search order, without duplicates (by real path)."""
    env = os.environ if env is None else env
    found: list[str] = []
    on_path = shutil.which(name, path=env.get("PATH", ""))
    if on_path:
        found.append(on_path)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            found.append(str(Path(env[var]) / "bin" / name))
    for pattern in INSTALL_GLOBS[name]:
        found.extend(sorted(glob.glob(pattern), reverse=True))
    if name == "nsys":  # the copy inside whatever Nsight Compute is installed
        for ncu in candidates("ncu", env):
            found.append(str(ncu.resolve().parent / "host" / "target-linux-x64" / "nsys"))
    unique: dict[str, Path] = {}
    for item in found:
        path = Path(item)
        key = str(path.resolve()) if path.exists() else str(path)
        unique.setdefault(key, path)
    return list(unique.values())


def find_tool(
    name: str,
    override: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    version_output: VersionProbe = run_version,
) -> Tool:
    """The tool to use. An explicit path (argument, then $NCU / $NSYS) must work or it is an
    error; otherwise the newest working candidate."""
    env = os.environ if env is None else env
    explicit = override or env.get(name.upper())
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_dir():
            path = path / name
        tool = probe(name, path, version_output)
        if tool is None:
            raise MissingDependencyError(
                f"{path} is not a working {name} ({BANNERS[name]})", HINTS[name]
            )
        return tool
    tools = [
        t for t in (probe(name, c, version_output) for c in candidates(name, env)) if t is not None
    ]
    if not tools:
        raise MissingDependencyError(f"{name} ({BANNERS[name]}) was not found", HINTS[name])
    return max(tools, key=lambda t: t.version_tuple)  # max keeps the first of equal versions


def find_optional(
    name: str,
    override: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    version_output: VersionProbe = run_version,
) -> Tool | None:
    try:
        return find_tool(name, override, env, version_output)
    except MissingDependencyError:
        if override:
            raise
        return None


def nsys_importers(nsys: Path) -> list[Path]:
    """QdstrmImporter binaries near an nsys: it turns the raw capture into a .nsys-rep, and it is
    what fails when libdw.so.1 is missing (nsys then leaves only a .qdstrm file)."""
    base = nsys.resolve().parent
    patterns = [base / "QdstrmImporter", base.parent / "host-linux-x64" / "QdstrmImporter"]
    found = [p for p in patterns if p.is_file()]
    found += [
        Path(p)
        for p in sorted(glob.glob(str(base.parent / "host*" / "QdstrmImporter")))
        if Path(p) not in found
    ]
    return found


def describe(tools: Sequence[Tool | None]) -> dict[str, dict[str, str]]:
    """Tool paths and versions for env.json / session meta."""
    return {
        t.path.name: {"path": str(t.path), "version": t.version} for t in tools if t is not None
    }


def query_metrics_soon(ncu: Path) -> Future[str | None]:
    """`query_metrics` on a thread of its own, started now: it takes 2.2 s on the H200 and
    needs no GPU time, so it runs beside phase 1 instead of before phase 2."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsdiag-query-metrics")
    future = pool.submit(query_metrics, ncu)
    pool.shutdown(wait=False)
    return future


def query_metrics(ncu: Path, timeout_s: float = 120.0) -> str | None:
    """`ncu --query-metrics --csv`: the metrics the GPUs here offer (base names); None when it
    fails."""
    try:
        done = capture(ncu_query_metrics(ncu), timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 and done.stdout else None
