"""`nsdiag doctor`'s checks (collect/doctor.py) without a GPU, with stand-in commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nsdiag.cli.doctor import doctor as doctor_command
from nsdiag.collect import (
    doctor,
    metric_set,
    tools,
)
from tests.conftest import (
    DATA,
    NSYS_VERSION,
    fake_tool,
)


def test_doctor_without_gpu_or_tools(clean_env: Path) -> None:
    checks = {c.name: c for c in doctor.run_checks()}
    gpu = checks["GPU and driver"]
    assert gpu.ok is False and "nvidia-smi" in gpu.fix
    assert (
        checks["ncu (Nsight Compute)"].ok is False and "--ncu" in checks["ncu (Nsight Compute)"].fix
    )
    assert (
        checks["nsys (Nsight Systems)"].ok is False
        and "--nsys" in checks["nsys (Nsight Systems)"].fix
    )
    assert (
        checks["GPU performance counters"].ok is None and checks["nsys importer (libdw)"].ok is None
    )
    assert checks["Python package plotly"].ok is True
    assert checks["Python package mcp"].ok is True  # the test extra installs the SDK
    assert not doctor.healthy(checks.values())
    result = CliRunner().invoke(doctor_command, [])
    assert result.exit_code == 1 and "FAIL" in result.output and "fix:" in result.output
    # what still works without a GPU, said last
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("nsdiag profile needs what failed above; explain, report, diff")
    assert "need no GPU and work here" in last
    assert doctor.what_works([]).startswith("nsdiag profile works here")


def test_doctor_reads_nvidia_smi_and_ldd(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(argv, timeout):
        if argv[0] == "nvidia-smi":
            return 0, "NVIDIA H200, 580.159.04, 143771 MiB, 1980 MHz\n"
        if argv[0] == "ldd":
            return 0, "\tlibdw.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6\n"
        return 1, ""

    monkeypatch.setattr(doctor.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert doctor.check_gpu(fake) == doctor.Check(
        "GPU and driver", True, "NVIDIA H200; driver 580.159.04"
    )
    nsys = fake_tool(
        clean_env / "nsys-home/target-linux-x64", "nsys", NSYS_VERSION.format(v="2025.3.1.0")
    )
    fake_tool(clean_env / "nsys-home/host-linux-x64", "QdstrmImporter", "")
    check = doctor.check_nsys_importer(tools.Tool(nsys, "2025.3.1.0"), fake)
    assert check.ok is False and "libdw.so.1" in check.detail and "LD_LIBRARY_PATH" in check.fix


def test_doctor_checks_the_rule_metric_list() -> None:
    import gzip

    with gzip.open(DATA / "reference/raw.csv.gz", "rt") as f:
        header = f.readline().strip().strip('"').split('","')
    listing = "\n".join(f'"{h.split(".")[0]}","Counter","","","1"' for h in header if "__" in h)
    ncu = tools.Tool(Path("/opt/ncu"), "2025.3.1.0")
    ok = doctor.check_rule_metrics(ncu, True, lambda argv, timeout: (0, listing))
    assert ok.ok is True and ok.detail.startswith(
        str(len(metric_set.rule_metrics(metric_set.parse_query(listing))))
    )
    refused = doctor.check_rule_metrics(
        ncu, True, lambda argv, timeout: (1, "==ERROR== unsupported device")
    )
    assert (
        refused.ok is None and "sections" in refused.detail and "--sections sections" in refused.fix
    )
    assert doctor.check_rule_metrics(None, True).ok is None
