"""The program `nsdiag profile` runs under the profilers, and the environment it gets."""

from __future__ import annotations

import os
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
