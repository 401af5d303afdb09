"""Golden ncu and nsys command lines (collect/argv.py): lists, never a shell, so paths with
spaces and percent signs survive."""

from __future__ import annotations

import pytest

from nsdiag.collect import argv as cmd

SECTIONS = [
    "--section",
    "SpeedOfLight",
    "--section",
    "LaunchStats",
    "--section",
    "Occupancy",
    "--section",
    "ComputeWorkloadAnalysis",
    "--section",
    "MemoryWorkloadAnalysis",
    "--section",
    "MemoryWorkloadAnalysis_Chart",
    "--section",
    "MemoryWorkloadAnalysis_Tables",
    "--section",
    "SchedulerStats",
    "--section",
    "WarpStateStats",
    "--section",
    "InstructionStats",
    "--section",
    "SpeedOfLight_RooflineChart",
    "--section",
    "SpeedOfLight_HierarchicalTensorRooflineChart",
]


def test_nsys_profile_argv() -> None:
    assert cmd.nsys_profile(
        "/x/nsys", "out dir/timeline", ["python", "my script.py", "--epochs", "1"]
    ) == [
        "/x/nsys",
        "profile",
        "-t",
        "cuda,nvtx",
        "--cpuctxsw",
        "none",
        "-s",
        "none",
        "--cuda-graph-trace",
        "node",
        "-f",
        "true",
        "-o",
        "out dir/timeline",
        "python",
        "my script.py",
        "--epochs",
        "1",
    ]
    assert cmd.nsys_profile("nsys", "t", ["./app"], profile_from_start=False) == [
        "nsys",
        "profile",
        "-t",
        "cuda,nvtx",
        "--cpuctxsw",
        "none",
        "-s",
        "none",
        "--cuda-graph-trace",
        "node",
        "--capture-range",
        "cudaProfilerApi",
        "--capture-range-end",
        "stop",
        "-f",
        "true",
        "-o",
        "t",
        "./app",
    ]
    assert cmd.nsys_export_sqlite("nsys", "r.nsys-rep", "r.sqlite") == [
        "nsys",
        "export",
        "--type",
        "sqlite",
        "-f",
        "true",
        "-o",
        "r.sqlite",
        "r.nsys-rep",
    ]


def test_ncu_duration_and_full_argv() -> None:
    assert cmd.ncu_durations("ncu", "d", ["./app", "-n", "3"]) == [
        "ncu",
        "--metrics",
        "gpu__time_duration.sum",
        "--clock-control",
        "none",
        "-f",
        "-o",
        "d",
        "./app",
        "-n",
        "3",
    ]
    assert cmd.ncu_durations("ncu", "d", ["./app"], profile_from_start=False, nvtx="step") == [
        "ncu",
        "--metrics",
        "gpu__time_duration.sum",
        "--profile-from-start",
        "off",
        "--nvtx",
        "--nvtx-include",
        "step/",
        "--clock-control",
        "none",
        "-f",
        "-o",
        "d",
        "./app",
    ]
    assert cmd.ncu_full(
        "ncu", "f", ["./app"], kernel_regex="gemm|conv", profile_from_start=False
    ) == [
        "ncu",
        "--set",
        "full",
        "-k",
        "regex:gemm|conv",
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--import-source",
        "no",
        "-f",
        "-o",
        "f",
        "./app",
    ]


def test_ncu_targeted_argv() -> None:
    got = cmd.ncu_targeted(
        "/opt/ncu",
        "r/targeted-1",
        ["python", "t.py"],
        names=["gemm_kernel", "elementwise_kernel"],
        launch_count=2,
        name_base="function",
        sections="sections",
        profile_from_start=False,
        nvtx="dom@range",
    )
    assert got == [
        "/opt/ncu",
        *SECTIONS,
        "--kernel-name-base",
        "function",
        "-k",
        "regex:^(elementwise_kernel|gemm_kernel)$",
        "--filter-mode",
        "per-launch-config",
        "--launch-count",
        "2",
        "--profile-from-start",
        "off",
        "--nvtx",
        "--nvtx-include",
        "dom@range",
        "--clock-control",
        "none",
        "--import-source",
        "no",
        "-f",
        "-o",
        "r/targeted-1",
        "python",
        "t.py",
    ]
    assert cmd.ncu_targeted(
        "ncu", "o", ["a"], names=["_Z1kv"], launch_count=1, sections="full"
    ) == [
        "ncu",
        "--set",
        "full",
        "--kernel-name-base",
        "mangled",
        "-k",
        "regex:^(_Z1kv)$",
        "--filter-mode",
        "per-launch-config",
        "--launch-count",
        "1",
        "--clock-control",
        "none",
        "--import-source",
        "no",
        "-f",
        "-o",
        "o",
        "a",
    ]
    assert cmd.ncu_targeted(
        "ncu", "o", ["a"], names=["_Z1kv"], launch_count=1, metrics=["a__x.sum", "b__y.ratio"]
    ) == [
        "ncu",
        "--section",
        "SpeedOfLight",
        "--section",
        "LaunchStats",
        "--section",
        "Occupancy",
        "--metrics",
        "a__x.sum,b__y.ratio",
        "--kernel-name-base",
        "mangled",
        "-k",
        "regex:^(_Z1kv)$",
        "--filter-mode",
        "per-launch-config",
        "--launch-count",
        "1",
        "--clock-control",
        "none",
        "--import-source",
        "no",
        "-f",
        "-o",
        "o",
        "a",
    ]
    with pytest.raises(ValueError):
        cmd.ncu_targeted(
            "ncu", "o", ["a"], names=["_Z1kv"], launch_count=1
        )  # rules without their metrics
    with pytest.raises(ValueError):
        cmd.ncu_targeted("ncu", "o", ["a"], names=[], launch_count=1, metrics=["m"])
    with pytest.raises(ValueError):
        cmd.ncu_targeted(
            "ncu", "o", ["a"], names=["k"], launch_count=1, name_base="demangled", metrics=["m"]
        )
    with pytest.raises(ValueError):
        cmd.section_args("detailed")


def test_ncu_export_argv() -> None:
    assert cmd.ncu_export_raw("ncu", "a b.ncu-rep") == [
        "ncu",
        "-i",
        "a b.ncu-rep",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
    ]
    assert cmd.ncu_export_details("ncu", "r.ncu-rep") == [
        "ncu",
        "-i",
        "r.ncu-rep",
        "--csv",
        "--page",
        "details",
        "--print-details",
        "all",
        "--print-units",
        "base",
    ]


def test_percent_in_ncu_output_names_is_literal() -> None:
    assert cmd.ncu_durations("ncu", "/tmp/100% run/d", ["a"])[-3:] == [
        "-o",
        "/tmp/100%% run/d",
        "a",
    ]


def test_regex_escaping_keeps_plain_characters() -> None:
    assert cmd.regex_escape("operator()<int, 2>") == r"operator\(\)<int, 2>"
    assert cmd.function_regex(["a.b", "c$d", "a.b"]) == r"regex:^(a\.b|c\$d)$"
    assert cmd.nvtx_include("step") == "step/" and cmd.nvtx_include("a/b/") == "a/b/"


def test_nsys_profile_records_pytorch_functions_when_asked() -> None:
    argv = cmd.nsys_profile("nsys", "t", ["python3", "train.py"], pytorch_functions=True)
    assert argv[argv.index("node") + 1] == "--pytorch=functions-trace"
    assert "--pytorch=functions-trace" not in cmd.nsys_profile("nsys", "t", ["./app"])


@pytest.mark.parametrize(
    ("program", "torch_found", "version", "expected"),
    [
        (["/opt/venv/bin/python3", "train.py"], True, (2025, 3, 1, 0), True),
        (["python3.12", "-m", "mypkg.train"], True, (2025, 3, 1, 0), True),
        (["torchrun", "--nproc-per-node", "2", "train.py"], True, (2025, 3, 1, 0), True),
        (["python", "train.py"], False, (2025, 3, 1, 0), False),  # no torch: nothing to trace
        (["./app"], True, (2025, 3, 1, 0), False),  # not Python
        (["python3", "train.py"], True, (2024, 4, 1, 0), False),  # an nsys without --pytorch
        (["python3", "train.py"], True, None, True),  # a dry run without nsys
    ],
)
def test_pytorch_ranges_for_python_programs_with_torch(
    monkeypatch: pytest.MonkeyPatch,
    program: list[str],
    torch_found: bool,
    version: tuple[int, ...] | None,
    expected: bool,
) -> None:
    from nsdiag.collect import program as prog

    real = prog.importlib.util.find_spec
    monkeypatch.setattr(
        prog.importlib.util,
        "find_spec",
        lambda name, *a: (object() if torch_found else None) if name == "torch" else real(name),
    )
    assert prog.pytorch_ranges(version, program) is expected
