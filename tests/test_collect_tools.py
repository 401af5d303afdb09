"""Finding ncu and nsys (collect/tools.py): versions, search order, overrides, impostors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nsdiag.collect import (
    tools,
)
from nsdiag.errors import MissingDependencyError
from tests.conftest import (
    NCU_VERSION,
    NSYS_VERSION,
    fake_tool,
)


def test_version_parsing() -> None:
    assert tools.parse_version(NCU_VERSION.format(v="2025.3.1.0")) == "2025.3.1.0"
    assert tools.parse_version(NSYS_VERSION.format(v="2025.3.1.0")) == "2025.3.1.0"
    assert tools.parse_version("NVIDIA Nsight Systems version 2024.6.2") == "2024.6.2"
    assert tools.parse_version("Copyright (c) 2018-2025 NVIDIA") is None


def test_discovery_newest_wins_and_overrides(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = clean_env
    old = fake_tool(tmp / "bin", "ncu", NCU_VERSION.format(v="2024.3.2.0"))
    new = fake_tool(tmp / "opt/nsight-compute/2025.3.1", "ncu", NCU_VERSION.format(v="2025.3.1.0"))
    monkeypatch.setenv("PATH", f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert tools.find_tool("ncu") == tools.Tool(new, "2025.3.1.0")
    assert tools.find_tool("ncu", str(old)) == tools.Tool(old, "2024.3.2.0")  # --ncu wins
    monkeypatch.setenv("NCU", str(old))
    assert tools.find_tool("ncu").path == old  # then $NCU
    with pytest.raises(MissingDependencyError, match="not a working ncu"):
        tools.find_tool("ncu", str(tmp / "nowhere/ncu"))


def test_discovery_cuda_home_and_nsys_inside_ncu(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = clean_env
    fake_tool(tmp / "cuda/bin", "ncu", NCU_VERSION.format(v="2025.1.0.0"))
    monkeypatch.setenv("CUDA_HOME", str(tmp / "cuda"))
    assert tools.find_tool("ncu").version == "2025.1.0.0"
    ncu = fake_tool(tmp / "opt/nsight-compute/2025.3.1", "ncu", NCU_VERSION.format(v="2025.3.1.0"))
    inner = fake_tool(
        ncu.parent / "host/target-linux-x64", "nsys", NSYS_VERSION.format(v="2025.3.1.0")
    )
    assert tools.find_tool("nsys") == tools.Tool(inner, "2025.3.1.0")


def test_discovery_rejects_other_programs_and_explains(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(clean_env / "bin", "ncu", "npm-check-updates 16.14.0")  # an `ncu` that is not Nsight
    monkeypatch.setenv("PATH", str(clean_env / "bin"))
    with pytest.raises(MissingDependencyError) as info:
        tools.find_tool("ncu")
    assert "--ncu" in info.value.hint and "nsight-compute" in info.value.hint
    assert tools.find_optional("nsys") is None
