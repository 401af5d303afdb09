"""The command line as a user runs it: output, exit codes, one-line errors; `nsdiag profile`'s
dry run and summary with the fake profilers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsdiag.cli import main
from nsdiag.cli.profile import profile as profile_command


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nsdiag", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_only_working_commands() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    commands = result.output.split("Commands:")[1].split("\n\n")[0]  # the examples follow
    listed = {line.split()[0] for line in commands.splitlines() if line.strip()}
    assert listed == set(main.commands)
    for name in listed:  # every listed command answers --help
        assert CliRunner().invoke(main, [name, "--help"]).exit_code == 0


def test_explain_reference_kernels(data_dir: Path) -> None:
    result = run("explain", str(data_dir / "reference/raw.csv.gz"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "NVIDIA H200" in out and "fusion-candidate" in out and "degenerate-gemm" in out
    assert "nsdiag::float4_kernel" in out and "memory: DRAM" in out  # the kernel table


def test_explain_json_and_kernel_filter(data_dir: Path) -> None:
    result = run(
        "explain", str(data_dir / "reference/raw.csv.gz"), "--kernel", "::float4_kernel", "--json"
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "nsdiag.diagnosis/4"
    assert [k["name"] for k in document["kernels"]] == [
        "nsdiag::float4_kernel(const float4 *, float4 *, long, int, nsdiag::Affine3)"
    ]
    assert document["kernels"][0]["findings"][0]["cause"] == "dram-bandwidth-saturated"


def test_rules_list_and_show() -> None:
    listing = run("rules", "list")
    assert (
        listing.returncode == 0
        and "NSD101" in listing.stdout
        and "fusion-candidate" in listing.stdout
    )
    shown = run("rules", "show", "NSD104")
    assert shown.returncode == 0
    for heading in (
        "What it detects",
        "Why it is slow",
        "How to fix it",
        "False positives",
        "References",
    ):
        assert heading in shown.stdout
    assert "tile[32][33]" in shown.stdout
    assert run("rules", "show", "uncoalesced-global-access").returncode == 0


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["explain", "/no/such/file.csv"], "does not exist"),
        (["rules", "show", "NSD999"], "no rule 'NSD999'"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(args: list[str], fragment: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_unreadable_file_and_bad_regex(tmp_path: Path, data_dir: Path) -> None:
    garbage = tmp_path / "report with spaces.csv"
    garbage.write_text("not a report\n")
    result = run("explain", str(garbage))
    assert (
        result.returncode == 2
        and str(garbage) in result.stderr
        and "Traceback" not in result.stderr
    )
    result = run("explain", str(data_dir / "calib_small/raw.csv.gz"), "--kernel", "([")
    assert result.returncode == 2 and "regular expression" in result.stderr


def test_load_writes_a_session_that_explain_reads(tmp_path: Path, data_dir: Path) -> None:
    target = tmp_path / "session dir"
    result = run("load", str(data_dir / "calib_small/raw.csv.gz"), "-o", str(target))
    assert result.returncode == 0, result.stderr
    again = run("explain", str(target), "--json")
    assert again.returncode == 0
    assert len(json.loads(again.stdout)["kernels"]) == 2


# ------------------------------------------------------------------------------ nsdiag profile


def test_cli_dry_run_reference_kernels() -> None:
    result = CliRunner().invoke(profile_command, ["--dry-run", "--ncu", "/nowhere/ncu"])
    assert result.exit_code == 2 and "not a working ncu" in result.output
    result = CliRunner().invoke(profile_command, ["--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.output
    # auto: phase 1 records the whole run; phase 2 starts at cudaProfilerStart if it sees one
    assert "nsys profile -t cuda,nvtx --cpuctxsw none -s none --cuda-graph-trace node -f" in out
    assert "--capture-range" not in out and "run_all.py --profile-region" in out
    assert "adds --profile-from-start off when phase 1 sees the program call" in out
    assert (
        "--filter-mode per-launch-config --launch-count '<N>'" in out
        and "--csv --page raw --print-units base" in out
    )
    off = CliRunner().invoke(profile_command, ["--dry-run", "--profile-from-start", "off"])
    assert off.exit_code == 0, off.output
    assert "--capture-range cudaProfilerApi" in off.output
    assert "--profile-from-start off" in off.output


def test_cli_dry_run_script_with_arguments_and_spaces(
    fakes: dict[str, Path], tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        profile_command,
        [
            "--dry-run",
            "-o",
            str(tmp_path / "out dir"),
            "--ncu",
            str(fakes["ncu"]),
            "--nsys",
            str(fakes["nsys"]),
            str(fakes["script"]),
            "--epochs",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    commands = "\n".join(line for line in result.output.splitlines() if not line.startswith("#"))
    assert "--profile-from-start" not in commands  # decided after phase 1 (auto)
    assert (
        f"'{fakes['script']}' --epochs 1" in result.output
        and f"'{tmp_path / 'out dir'}/reports/timeline'" in result.output
    )
    # phase 2's program first, held by ncu; the targeted run attaches to it
    lines = [line for line in commands.splitlines() if line.strip()]
    assert " --mode launch " in lines[0] and lines[0].endswith(f"'{fakes['script']}' --epochs 1")
    attach = next(line for line in lines if " --mode attach " in line)
    assert "--hostname 127.0.0.1" in attach and str(fakes["script"]) not in attach
    sequential = CliRunner().invoke(
        profile_command,
        ["--dry-run", "--sequential", "--ncu", str(fakes["ncu"]), str(fakes["script"])],
    )
    assert sequential.exit_code == 0 and "--mode" not in sequential.output


def test_cli_unknown_option_before_the_program() -> None:
    result = CliRunner().invoke(profile_command, ["--bogus", "train.py"])
    assert result.exit_code == 2 and "unknown option '--bogus'" in result.output


def test_cli_profile_runs_and_summarises(fakes: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cli session"
    result = CliRunner().invoke(
        profile_command,
        [
            "-o",
            str(out),
            "--ncu",
            str(fakes["ncu"]),
            "--nsys",
            str(fakes["nsys"]),
            str(fakes["script"]),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "step 1 loss 2.5" in result.output and f"session: {out}" in result.output
    assert "nsdiag explain" in result.output and "GPU time" in result.output


def test_cli_profile_error_is_one_line(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TARGETED", "perm")
    result = CliRunner().invoke(
        profile_command,
        [
            "-o",
            str(tmp_path / "s"),
            "--ncu",
            str(fakes["ncu"]),
            "--nsys",
            str(fakes["nsys"]),
            str(fakes["script"]),
        ],
    )
    assert result.exit_code == 1
    assert (
        "nsdiag: error: ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)"
        in result.output
    )
