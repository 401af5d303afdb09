"""The program `nsdiag profile` runs under the profilers, and the environment it gets."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from nsdiag.errors import InputError


def resolve_program(args: Sequence[str]) -> tuple[list[str], bool]:
    """The command to profile, and whether it is the bundled reference kernels."""
    if not args:
        from nsdiag.resources import reference_kernels_dir

        return [
            sys.executable,
            str(reference_kernels_dir() / "run_all.py"),
            "--profile-region",
        ], True
    if args[0].endswith(".py"):
        if not Path(args[0]).is_file():
            raise InputError(f"{args[0]} does not exist", "check the script path")
        return [sys.executable, *args], False
    return list(args), False


# nsys records the PyTorch functions' ranges from this release on (`--pytorch`).
PYTORCH_RANGES_SINCE = (2024, 5)
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


def runs_pytorch(program: Sequence[str]) -> bool:
    """Whether the program is Python code that can import torch: a Python interpreter (or
    torchrun) whose environment has torch. Phase 1 then asks nsys for the ranges of the PyTorch
    functions the program calls (argv.PYTORCH_FUNCTIONS). An interpreter other than this one is
    taken to have torch when this one has it (the usual case: one virtual environment)."""
    if not program:
        return False
    head = Path(program[0]).name
    if not (_PYTHON.match(head) or head == "torchrun"):
        return False
    return importlib.util.find_spec("torch") is not None


def pytorch_ranges(nsys_version: Sequence[int] | None, program: Sequence[str]) -> bool:
    """Whether phase 1 asks nsys for the PyTorch functions' ranges: a PyTorch program, and an
    nsys that records them (`None`: not known, as in a dry run without nsys)."""
    recent = nsys_version is None or tuple(nsys_version[:2]) >= PYTORCH_RANGES_SINCE
    return recent and runs_pytorch(program)


def profile_from_start(requested: bool | None) -> bool:
    """Whether phase 1 (nsys) records from the program's start: unless asked for `off`, it
    records the whole run, so that the analysis sees the start-up and finds the region (the
    program's cudaProfilerStart/Stop range, else its steady state) itself."""
    return requested if requested is not None else True


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    # the program's prints reach the terminal as they happen
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
