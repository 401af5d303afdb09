"""Shared fixtures and helpers: paths to the recorded H200 data, GPU detection for `gpu` tests, a
small phase-1 timeline for the planning tests, stand-in ncu and nsys programs (fake tools for
discovery, and fake profilers that run the program and write recorded reports), and each
recording read once per test session and diagnosed once per region choice."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

import nsdiag
import nsdiag.readers
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.collect import tools
from nsdiag.model.session import Session
from nsdiag.readers import source as input_source

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"

# pytest-xdist's workers run with COLUMNS=80 LINES=24 in their environment; explain and diff
# follow COLUMNS (even into a pipe), so a test that wants a width says so in the env it passes.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


# ------------------------------------------------------------------------- each recording once


_READ_ONE: Callable[..., Session] = nsdiag.readers._read_one
_READ: dict[tuple[str, str, int, int], Session] = {}


def _read_recordings_once(path: Path, export_nsys_rep: object = None) -> Session:
    """nsdiag.readers' per-input read, remembered for the recordings under tests/data: hundreds of
    tests read the same few dozen files. Only an unchanged file, read under the default size
    limits and with no .nsys-rep exporter, is remembered; each caller gets its own deep copy, so
    a test that changes its session changes nobody else's. Every other read (tmp_path inputs,
    the bad-input corpus, a --max-input-mb or NSDIAG_MAX_INPUT_MB test) goes to the reader. A
    module-level function, so that the rank reader's worker processes can be handed it."""
    try:
        resolved = path.resolve()
        info = resolved.stat()
    except OSError:
        return _READ_ONE(path, export_nsys_rep)
    default_limits = (
        input_source._override_mb.get() is None and input_source.ENV_LIMIT not in os.environ
    )
    if (
        export_nsys_rep is not None
        or not default_limits
        or DATA not in resolved.parents
        or path.is_symlink()
    ):
        return _READ_ONE(path, export_nsys_rep)
    key = (str(path), str(resolved), info.st_mtime_ns, info.st_size)  # sources name the path
    if key not in _READ:
        _READ[key] = _READ_ONE(path, export_nsys_rep)
    return copy.deepcopy(_READ[key])


nsdiag.readers._read_one = _read_recordings_once  # type: ignore[assignment]


@cache
def diagnosed(recording: str, region: str = "auto") -> tuple[Session, Diagnosis]:
    """A recording under tests/data (its path there) and its diagnosis with the shipped rules,
    once per test session for every test module: callers share them, and must not change them
    (a frozen Diagnosis; `dataclasses.replace` a Session to vary it)."""
    session = nsdiag.load(DATA / recording)
    return session, diagnose(session, region=region)


def diagnosis(recording: str, region: str = "auto") -> Diagnosis:
    """The diagnosis of a recording under tests/data (`diagnosed`)."""
    return diagnosed(recording, region)[1]


def side(recording: str, region: str = "auto") -> tuple[tuple[str, ...], Session, Diagnosis]:
    """A recording as one side of `nsdiag diff` (analysis.diff.Input: its sources, session and
    diagnosis), from `diagnosed`."""
    session, found = diagnosed(recording, region)
    return (recording,), session, found


def load_benchmark(name: str) -> ModuleType:
    """A script of benchmarks/ (not a package) imported as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------- a phase-1 timeline


def timeline(rows: list[tuple[str, str, str, str, float]]) -> pd.DataFrame:
    """(demangled name, short name, grid, block, duration) in launch order."""
    return pd.DataFrame(
        [
            {
                "kind": "kernel",
                "name": n,
                "short_name": s,
                "grid": g,
                "block": b,
                "duration_ns": d,
                "start_ns": 1000 * i,
                "api_start_ns": 1000 * i,
            }
            for i, (n, s, g, b, d) in enumerate(rows)
        ]
        + [
            {
                "kind": "memcpy",
                "name": "[CUDA memcpy Host-to-Device]",
                "short_name": "",
                "grid": "",
                "block": "",
                "duration_ns": 1e9,
                "start_ns": 5,
                "api_start_ns": 5,
            }
        ]
    )


G1, G2, B = "(100, 1, 1)", "(200, 1, 1)", "(128, 1, 1)"


STEP = timeline(
    [
        ("void gemm<1>(float)", "gemm", G1, "(256, 1, 1)", 500.0),
        ("void ew<Fill>(int)", "ew", G1, B, 10.0),
        ("void ew<Mul>(int)", "ew", G1, B, 300.0),
        ("void norm(float *)", "norm", G2, B, 150.0),
        ("void ew<Mul>(int)", "ew", G1, B, 300.0),
        ("void gemm<1>(float)", "gemm", G2, "(256, 1, 1)", 40.0),
    ]
)


# ------------------------------------------------------------------------- ncu and nsys stand-ins

NCU_VERSION = (
    "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
    "Version {v} (build 36398880) (public-release)"
)
NSYS_VERSION = "NVIDIA Nsight Systems version {v}-253666467616v0"


def fake_tool(folder: Path, name: str, banner: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    lines = " ".join("'" + line.replace("'", "") + "'" for line in banner.splitlines())
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' {lines}\n")  # builtins only: PATH may be empty
    path.chmod(0o755)
    return path


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for var in ("CUDA_HOME", "CUDA_PATH", "NCU", "NSYS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(
        tools,
        "INSTALL_GLOBS",
        {
            "ncu": (str(tmp_path / "opt/nsight-compute/*/ncu"),),
            "nsys": (str(tmp_path / "opt/nsight-systems/*/bin/nsys"),),
        },
    )
    return tmp_path


# Stand-in profilers (scripts under tests/fakes/, run with this Python): see their docstrings.
FAKES = Path(__file__).parent / "fakes"
FAKE_NCU = (FAKES / "ncu.py").read_text()
FAKE_NSYS = (FAKES / "nsys.py").read_text()

PROGRAM = """
import sys
print("step 1 loss 2.5", flush=True)
print("step 2 loss 2.1", flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    folder = tmp_path / "fake tools"  # a space in every path on purpose
    folder.mkdir()
    paths = {}
    for name, source in (("ncu", FAKE_NCU), ("nsys", FAKE_NSYS)):
        path = folder / name
        path.write_text(f"#!{sys.executable}\n{source}")
        path.chmod(0o755)
        paths[name] = path
    script = tmp_path / "my project" / "train.py"
    script.parent.mkdir()
    script.write_text(PROGRAM)
    paths["script"] = script
    paths["calls"] = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_CALLS", str(paths["calls"]))
    monkeypatch.setenv("FAKE_RAW", str(DATA / "reference/raw.csv.gz"))
    monkeypatch.setenv("FAKE_DETAILS", str(DATA / "reference/details.csv.gz"))
    monkeypatch.setenv("FAKE_SQLITE", str(DATA / "nsys/pipeline.sqlite.gz"))
    monkeypatch.setenv("FAKE_HEADER", str(DATA / "reference/raw.csv.gz"))
    return paths


def calls(fakes: dict[str, Path], launched: bool = False) -> list[list[str]]:
    """The fake tools' argv, in order; without `launched`, not the `ncu --mode launch` that
    started phase 2's program beside phase 1 (collect/standby.py)."""
    made = (
        [json.loads(line) for line in fakes["calls"].read_text().splitlines()]
        if fakes["calls"].exists()
        else []
    )
    return made if launched else [c for c in made if c[:2] != ["--mode", "launch"]]


def unattached(argv: list[str]) -> list[str]:
    """A targeted run's argv as the fake logged it, with an attach (`--mode attach --hostname H
    --port P --max-connections N`) taken out: what the plan's round holds, less the program."""
    if argv[:2] != ["--mode", "attach"]:
        return argv
    return argv[8:]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through playwright, one per module (the browser tests' modules skip
    themselves where either is missing: tests/test_report_browser.py)."""
    from tests.test_report_browser import ARGS, CHROMIUM, sync_api

    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()
