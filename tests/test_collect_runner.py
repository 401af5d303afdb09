"""Running a profiler command (collect/runner.py) with the fake ncu: output teed, progress
parsed, failures named, Ctrl-C stopping every child."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import nsdiag
from nsdiag.collect import (
    runner,
)


def test_runner_tees_output_and_parses_progress(fakes: dict[str, Path], tmp_path: Path) -> None:
    lines, progress = [], []
    result = runner.run(
        [
            str(fakes["ncu"]),
            "--section",
            "X",
            "-o",
            str(tmp_path / "r"),
            sys.executable,
            str(fakes["script"]),
        ],
        tmp_path / "logs/run.log",
        on_output=lines.append,
        on_progress=lambda n, k: progress.append((n, k)),
    )
    assert result.ok and result.profiled == 3 and result.passes == (38, 38, 38)
    assert progress == [(1, "kernel_0"), (2, "kernel_1"), (3, "kernel_2")]
    assert "step 1 loss 2.5" in lines and not any("Profiling" in ln for ln in lines)
    log = result.log.read_text()
    assert log.startswith("$ ") and "==PROF== Profiling" in log and "step 2 loss 2.1" in log


@pytest.mark.parametrize(
    "line, kind, code",
    [
        (
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission",
            "counter-permission",
            None,
        ),
        ("RuntimeError: Found no NVIDIA driver on your system.", "no-gpu", None),
        ("CUDA error: no CUDA-capable device is detected", "no-gpu", None),
        ("==WARNING== No kernels were profiled.", "no-kernels", None),
        ("==ERROR== The application returned an error code (3).", "app-error", 3),
        (
            "Importer error status: The importer binary and its dependencies were not found.",
            "nsys-import",
            None,
        ),
        ("==ERROR== unrecognised option '--bogus'. Use --help for further details.", "usage", None),
        (
            "torch._dynamo.exc.InternalTorchDynamoError: ModuleNotFoundError: No module named "
            "'nsys_nvtx_annotations'",
            "pytorch-annotations",
            None,
        ),
    ],
)
def test_classify_known_failures(line: str, kind: str, code: int | None) -> None:
    problem = runner.classify(line)
    assert problem is not None and problem.kind == kind and problem.code == code
    assert runner.classify("==PROF== Connected to process 1") is None


def test_stdout_to_file_for_exports(fakes: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "raw.csv"
    result = runner.run(
        [str(fakes["ncu"]), "-i", "x.ncu-rep", "--csv", "--page", "raw"],
        tmp_path / "e.log",
        stdout_to=target,
    )
    assert result.ok and target.read_text().count("\n") > 10
    assert len(nsdiag.load(target).kernels) > 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_ctrl_c_stops_every_child(fakes: dict[str, Path], tmp_path: Path) -> None:
    """SIGINT to nsdiag (as a terminal's Ctrl-C does): exit 130, no profiler or program left."""
    pids = tmp_path / "pids"
    env = {**os.environ, "FAKE_NSYS": "hang", "FAKE_PIDS": str(pids)}
    code = textwrap.dedent(f"""
        import sys
        from nsdiag.cli.profile import profile
        sys.argv = ["nsdiag", "-o", {str(tmp_path / "s")!r}, "--ncu", {str(fakes["ncu"])!r},
                    "--nsys", {str(fakes["nsys"])!r}, {str(fakes["script"])!r}]
        profile()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids.exists(), proc.communicate(timeout=5)
    time.sleep(0.3)  # let every fake child start (the pid file is written as they do)
    children = [int(p) for p in pids.read_text().split() if _alive(int(p))]
    assert children, "no profiler child was running"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and err.count("\n") == 1
    time.sleep(0.2)
    assert not any(_alive(p) for p in children)
    status = json.loads((tmp_path / "s/status.json").read_text())
    assert status["complete"] is False and status["error"].startswith("interrupted")


@pytest.mark.parametrize(
    "line, name",
    [
        (
            '==PROF== Profiling "elementwise_kernel" - 0: 0%....50%....100% - 38 passes',
            "elementwise_kernel",
        ),
        # as ncu 2025.3.1 printed it on the H200 for a targeted run (no launch index)
        ('==PROF== Profiling "fused_kernel": 0%....50%....100% - 35 passes', "fused_kernel"),
        # one pass, as the duration pass needs (public ncu logs print the singular)
        (
            '==PROF== Profiling "gemv_naive_kernel" - 0: 0%....50%....100% - 1 pass',
            "gemv_naive_kernel",
        ),
        # a demangled name with colons, and a suffix after the launch index (tolerated, see
        # _PROGRESS)
        (
            '==PROF== Profiling "void at::native::f<1>(int)" - 7 (8/180): 0%....50%....100% '
            "- 38 passes",
            "void at::native::f<1>(int)",
        ),
    ],
)
def test_progress_lines_as_ncu_prints_them(line: str, name: str) -> None:
    from nsdiag.collect.runner import _PROGRESS

    match = _PROGRESS.match(line)
    assert match and match.group("name") == name and int(match.group("passes")) in (1, 35, 38)


@pytest.mark.parametrize(
    "line",
    [
        "==PROF== Connected to process 686 (/usr/bin/python3.12)",
        '==PROF== Profiling "k" - 0: 0%....50%....100%',  # no pass count yet: not done
        "step took 38 passes",  # the program's own output
    ],
)
def test_other_lines_are_not_progress(line: str) -> None:
    from nsdiag.collect.runner import _PROGRESS

    assert _PROGRESS.match(line) is None


def test_the_recorded_torch_compile_failure_under_nsys_pytorch_is_named() -> None:
    """The H200's log of generate() with a static cache under nsys --pytorch=functions-trace:
    its failure is the one phase 1 answers by recording again without the ranges."""
    from tests.conftest import DATA

    log = (DATA / "idioms/logs/tl_decode_static.log").read_text(errors="replace").splitlines()
    kinds = {p.kind for line in log if (p := runner.classify(line)) is not None}
    assert "pytorch-annotations" in kinds
