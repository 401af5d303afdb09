"""`nsdiag doctor`: can this machine profile? Each check returns data (what was found, and the
fix when something is wrong); the CLI prints it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsdiag.collect import metric_set, tools
from nsdiag.collect.argv import DURATION_METRIC, ncu_query_metrics
from nsdiag.collect.runner import NO_GPU_HINT, PERMISSION_HINT, classify
from nsdiag.errors import MissingDependencyError

LIBDW_HINT = (
    "nsys's importer needs libdw.so.1: install it (apt-get install libdw1), or unpack Debian's "
    "libdw1 and libelf1 packages (dpkg -x) and add their usr/lib/x86_64-linux-gnu to "
    "LD_LIBRARY_PATH; until then nsdiag falls back to a duration-only ncu pass for the timeline"
)
# A trivial CUDA program for the counter test: one tiny kernel through PyTorch, when it is there.
COUNTER_PROGRAM = [
    sys.executable,
    "-c",
    "import torch; torch.ones(1, device='cuda').add_(1); torch.cuda.synchronize()",
]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: skipped (it could not run here)
    detail: str
    fix: str = ""


Runner = Callable[[Sequence[str], float], tuple[int, str]]


def run_command(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
    """(exit code, stdout + stderr); 127 when the program cannot start, 124 on timeout."""
    try:
        done = tools.capture(argv, timeout_s)
    except FileNotFoundError as exc:
        return 127, str(exc)
    except OSError as exc:
        return 126, str(exc)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:.0f} s"
    return done.returncode, (done.stdout or "") + (done.stderr or "")


def gpu_info(runner: Runner = run_command) -> dict[str, Any]:
    """GPUs and driver from nvidia-smi ({} when there is none)."""
    if shutil.which("nvidia-smi") is None:
        return {}
    code, out = runner(
        [
            "nvidia-smi",
            "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
            "--format=csv,noheader",
        ],
        30,
    )
    if code != 0:
        return {
            "error": out.strip().splitlines()[-1] if out.strip() else f"nvidia-smi exit code {code}"
        }
    gpus = []
    for line in out.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 2:
            # nvidia-smi may give fewer fields (an older driver) or more: name what is there
            gpus.append(
                dict(zip(("name", "driver", "memory", "max_sm_clock"), fields, strict=False))
            )
    return {"gpus": gpus, "driver": gpus[0]["driver"] if gpus else None}


def check_gpu(runner: Runner = run_command) -> Check:
    info = gpu_info(runner)
    if not info:
        return Check(
            "GPU and driver",
            False,
            "nvidia-smi not found: no NVIDIA driver on this machine",
            NO_GPU_HINT,
        )
    if "error" in info or not info.get("gpus"):
        return Check(
            "GPU and driver",
            False,
            f"nvidia-smi failed: {info.get('error', 'no GPU listed')}",
            NO_GPU_HINT,
        )
    names = ", ".join(g["name"] for g in info["gpus"])
    return Check("GPU and driver", True, f"{names}; driver {info['driver']}")


def check_tool(name: str, override: str | None = None) -> tuple[Check, tools.Tool | None]:
    try:
        tool = tools.find_tool(name, override)
    except MissingDependencyError as exc:
        fallback = (
            " (nsdiag profile then times kernels with ncu alone, without a timeline)"
            if name == "nsys"
            else ""
        )
        return Check(
            f"{name} ({tools.BANNERS[name]})", False, exc.message + fallback, exc.hint
        ), None
    return Check(
        f"{name} ({tools.BANNERS[name]})", True, f"{tool.path} (version {tool.version})"
    ), tool


def check_nsys_importer(nsys: tools.Tool | None, runner: Runner = run_command) -> Check:
    name = "nsys importer (libdw)"
    if nsys is None:
        return Check(name, None, "skipped: no nsys")
    importers = tools.nsys_importers(nsys.path)
    if not importers:
        return Check(
            name,
            None,
            f"no QdstrmImporter found next to {nsys.path}; `nsys profile` will show whether "
            "reports import",
        )
    if shutil.which("ldd") is None:
        return Check(name, None, "skipped: ldd not available")
    _, out = runner(["ldd", str(importers[0])], 30)
    missing = sorted(
        {line.split("=>")[0].strip() for line in out.splitlines() if "not found" in line}
    )
    if missing:
        return Check(name, False, f"{importers[0]} lacks {', '.join(missing)}", LIBDW_HINT)
    return Check(name, True, f"{importers[0]}: all libraries found")


def check_counters(ncu: tools.Tool | None, gpu_ok: bool, runner: Runner = run_command) -> Check:
    """Profile one tiny kernel with ncu: the only sure test of counter permission."""
    name = "GPU performance counters"
    if ncu is None or not gpu_ok:
        return Check(name, None, "skipped: needs ncu and a GPU")
    if importlib.util.find_spec("torch") is None:
        return Check(
            name,
            None,
            "skipped: the test program needs PyTorch (any CUDA program under ncu shows it)",
        )
    with tempfile.TemporaryDirectory(prefix="nsdiag-doctor-") as tmp:
        code, out = runner(
            [
                str(ncu.path),
                "--metrics",
                DURATION_METRIC,
                "-c",
                "1",
                "-f",
                "-o",
                str(Path(tmp) / "doctor"),
                *COUNTER_PROGRAM,
            ],
            300,
        )
    problems = [p for p in (classify(line) for line in out.splitlines()) if p is not None]
    kinds = {p.kind for p in problems}
    if "counter-permission" in kinds:
        return Check(
            name,
            False,
            "ncu was refused access to the counters (ERR_NVGPUCTRPERM)",
            PERMISSION_HINT,
        )
    if "no-gpu" in kinds:
        return Check(name, False, "the test program found no GPU", NO_GPU_HINT)
    if code != 0 or "no-kernels" in kinds:
        last = out.strip().splitlines()[-1] if out.strip() else f"exit code {code}"
        return Check(
            name,
            False,
            f"ncu could not profile the test kernel: {last}",
            "run the command by hand to see why: " + " ".join(COUNTER_PROGRAM[:1]) + " under ncu",
        )
    return Check(name, True, "ncu profiled a test kernel")


def check_rule_metrics(ncu: tools.Tool | None, gpu_ok: bool, runner: Runner = run_command) -> Check:
    """Can the targeted runs ask for the rules' metrics by name (the fast way)?"""
    name = "rule metrics by name"
    if ncu is None or not gpu_ok:
        return Check(name, None, "skipped: needs ncu and a GPU")
    code, out = runner(ncu_query_metrics(ncu.path), 120)
    found = metric_set.rule_metrics(metric_set.parse_query(out)) if code == 0 else []
    if len(found) < metric_set.MIN_RULE_METRICS:
        return Check(
            name,
            None,
            f"ncu --query-metrics listed {len(found)} of them: targeted runs will collect ncu's "
            "sections instead (about 4x slower per launch)",
            "nsdiag profile --sections sections does so "
            "explicitly; a newer Nsight Compute may list this GPU's metrics",
        )
    return Check(
        name,
        True,
        f"{len(found)} metrics the rules read are available on this GPU (about 0.5 s per "
        "profiled launch on an H200)",
    )


def check_package(module: str, purpose: str, install: str) -> Check:
    found = importlib.util.find_spec(module) is not None
    return Check(
        f"Python package {module}",
        found if found else None,
        f"installed ({purpose})" if found else f"not installed: {purpose} unavailable",
        "" if found else install,
    )


def run_checks(
    ncu: str | None = None, nsys: str | None = None, runner: Runner = run_command
) -> list[Check]:
    gpu = check_gpu(runner)
    ncu_check, ncu_tool = check_tool("ncu", ncu)
    nsys_check, nsys_tool = check_tool("nsys", nsys)
    return [
        gpu,
        ncu_check,
        nsys_check,
        check_nsys_importer(nsys_tool, runner),
        check_counters(ncu_tool, bool(gpu.ok), runner),
        check_rule_metrics(ncu_tool, bool(gpu.ok), runner),
        check_package(
            "ncu_report", "reading .ncu-rep files without ncu", "pip install 'nsdiag[ncu-rep]'"
        ),
        check_package(
            "torch",
            "the bundled reference kernels",
            "install a CUDA build of PyTorch (pytorch.org)",
        ),
        check_package("plotly", "charts in HTML reports", "pip install plotly"),
        check_package(
            "mcp", "nsdiag mcp, the server for coding agents", "pip install 'nsdiag[mcp]'"
        ),
    ]


def healthy(checks: Sequence[Check]) -> bool:
    """No check failed (skipped ones do not count)."""
    return all(c.ok is not False for c in checks)


# what needs neither a GPU nor ncu/nsys: every command that reads recordings
OFFLINE_COMMANDS = ("explain", "report", "diff", "rules", "mcp")


def what_works(checks: Sequence[Check]) -> str:
    """One line for the end of the checks: the commands that read recordings work on any
    machine; `nsdiag profile` only where the checks pass."""
    offline = ", ".join(OFFLINE_COMMANDS)
    if healthy(checks):
        return f"nsdiag profile works here; {offline} need no GPU and work anywhere"
    return (
        f"nsdiag profile needs what failed above; {offline} need no GPU and work here on "
        "recordings made elsewhere (ncu .ncu-rep or CSV exports, nsys .sqlite or CSV exports, "
        "session folders)"
    )
