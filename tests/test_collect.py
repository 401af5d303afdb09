"""nsdiag profile / doctor without a GPU: golden argv lists, plan selection, tool discovery,
the runner with fake ncu/nsys scripts (progress, failures, Ctrl-C), the session folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import nsdiag
from nsdiag.cli.doctor import doctor as doctor_command
from nsdiag.cli.profile import profile as profile_command
from nsdiag.collect import argv as cmd
from nsdiag.collect import (
    doctor,
    metric_set,
    nvtx_filter,
    plan,
    rounds,
    runner,
    selection,
    session_dir,
    signatures,
    tools,
)
from nsdiag.collect.options import ProfileOptions
from nsdiag.collect.profile import profile
from nsdiag.collect.program import resolve_program
from nsdiag.errors import InputError, MissingDependencyError, ProfilerError
from nsdiag.model import names
from tests.conftest import DATA

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
NCU_VERSION = (
    "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
    "Version {v} (build 36398880) (public-release)"
)
NSYS_VERSION = "NVIDIA Nsight Systems version {v}-253666467616v0"

# ------------------------------------------------------------------------------------- golden argv


def test_nsys_profile_argv() -> None:
    assert cmd.nsys_profile(
        "/x/nsys", "out dir/timeline", ["python", "my script.py", "--epochs", "1"]
    ) == [
        "/x/nsys",
        "profile",
        "-t",
        "cuda,nvtx,osrt",
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
        "cuda,nvtx,osrt",
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


# ------------------------------------------------------------------------------------------- plan


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


def test_signatures_rank_by_total_time() -> None:
    sigs = signatures.signatures(signatures.kernel_launches(STEP))
    assert [(s.name, s.grid, s.launches, s.total_ns) for s in sigs] == [
        ("void ew<Mul>(int)", G1, 2, 600.0),
        ("void gemm<1>(float)", G1, 1, 500.0),
        ("void norm(float *)", G2, 1, 150.0),
        ("void gemm<1>(float)", G2, 1, 40.0),
        ("void ew<Fill>(int)", G1, 1, 10.0),
    ]
    assert abs(sum(s.share for s in sigs) - 1.0) < 1e-12  # memcpy time is not kernel time


@pytest.mark.parametrize(
    "coverage, max_kernels, regex, expected",
    [
        (0.9, 40, None, ["void ew<Mul>(int)", "void gemm<1>(float)", "void norm(float *)"]),
        (0.45, 40, None, ["void ew<Mul>(int)"]),
        # ew<Mul> brings ew<Fill> (the same name's first launch of that shape): 2 profiled; gemm would
        # bring its second shape (4 > 3) and is passed over for norm.
        (1.0, 2, None, ["void ew<Mul>(int)"]),
        (1.0, 3, None, ["void ew<Mul>(int)", "void norm(float *)"]),
        # the other gemm shape is profiled with the first and counts toward coverage
        (0.95, 40, "gemm", ["void gemm<1>(float)"]),
        (0.9, 40, "^nothing$", []),
    ],
)
def test_choose(coverage: float, max_kernels: int, regex: str | None, expected: list[str]) -> None:
    sigs = signatures.signatures(signatures.kernel_launches(STEP))
    assert [s.name for s in selection.choose(sigs, coverage, max_kernels, regex)] == expected


def test_plan_covers_a_template_variant_behind_another() -> None:
    # ew<Mul> is the second launch of (ew, G1, B): one run counting 2 launches per shape reaches it.
    settings = rounds.PlanSettings(coverage=0.9, program_s=5.0, seconds_per_launch=1.0)
    p = plan.make_plan(
        STEP, settings, argv_for=lambda i, r, base: ["ncu", base, str(i), str(r.launch_count)]
    )
    assert [(r.names, r.launch_count, r.launches, r.argv) for r in p.rounds] == [
        (("ew", "gemm", "norm"), 2, 5, ("ncu", "function", "1", "2"))
    ]
    assert {s.name for s in p.rounds[0].wanted} == {
        "void ew<Mul>(int)",
        "void gemm<1>(float)",
        "void norm(float *)",
    }
    assert p.uncovered == () and p.launches == 5 and p.total_launches == 6
    assert (
        p.estimated_s == 5.0 + 5 * 1.0
        and p.full_estimated_s == 5.0 + 6 * rounds.SECONDS_PER_LAUNCH["full"]
    )
    # counting 2 per shape also reaches ew<Fill> and the second gemm shape: every signature
    assert p.planned_share == 1.0 and len(p.rounds[0].profiled) == 5
    json.dumps(plan.describe(p))


def test_plan_shared_shape_across_functions_depends_on_the_key() -> None:
    # a: f@G1 then g@G1; both wanted. If ncu's key has no name, g waits behind f.
    t = timeline([("f()", "f", G1, B, 100.0), ("g()", "g", G1, B, 100.0)])
    without = plan.make_plan(t, rounds.PlanSettings(coverage=1.0, key_has_name=False))
    assert [(r.names, r.launch_count) for r in without.rounds] == [(("f", "g"), 2)]
    with_name = plan.make_plan(t, rounds.PlanSettings(coverage=1.0, key_has_name=True))
    assert [(r.names, r.launch_count, r.launches) for r in with_name.rounds] == [(("f", "g"), 1, 2)]


DEEP_VARIANT = [(f"void ew<v{i}>()", "ew", G1, B, 1.0) for i in range(7)] + [
    ("void ew<v7>()", "ew", G1, B, 500.0),
    ("void big()", "big", G2, B, 1000.0),
]


def test_plan_with_mangled_names_needs_one_run() -> None:
    # nsys gives mangled names: ncu counts each template instance apart, so v7 is first of its kind.
    t = timeline(DEEP_VARIANT).assign(
        mangled_name=lambda d: d["name"].map(lambda n: "_Z" + n.replace(" ", ""))
    )
    p = plan.make_plan(
        t,
        rounds.PlanSettings(coverage=0.99),
        argv_for=lambda i, r, base: cmd.ncu_targeted(
            "ncu",
            f"t-{i}",
            ["a"],
            names=r.names,
            metrics=["m"],
            launch_count=r.launch_count,
            name_base=base,
        ),
    )
    assert p.name_base == "mangled" and p.uncovered == ()
    assert [(r.names, r.launch_count, r.launches) for r in p.rounds] == [
        (("_Zvoidbig()", "_Zvoidew<v7>()"), 1, 2)
    ]
    argv = p.rounds[0].argv
    assert argv[argv.index("--kernel-name-base") + 1] == "mangled"
    assert argv[argv.index("-k") + 1] == r"regex:^(_Zvoidbig\(\)|_Zvoidew<v7>\(\))$"


def test_plan_without_mangled_names_cannot_reach_a_deep_variant() -> None:
    # bare function names: v7 is the 8th launch of (ew, G1), beyond max_launch_count.
    p = plan.make_plan(
        timeline(DEEP_VARIANT), rounds.PlanSettings(coverage=0.99, max_launch_count=4)
    )
    assert p.name_base == "function" and [r.names for r in p.rounds] == [("big",)]
    assert [s.name for s in p.uncovered] == ["void ew<v7>()"] and "shadowed" in p.notes[0]


def test_plan_leaves_unreachable_names_out_of_the_filter() -> None:
    # Were the name not part of ncu's key, v7 would still be the 8th launch of its shape: no run
    # reaches it, and the run for big does not filter on ew (it would only profile other variants).
    p = plan.make_plan(
        timeline(DEEP_VARIANT),
        rounds.PlanSettings(coverage=0.99, max_launch_count=4, max_rounds=3, key_has_name=False),
    )
    assert [s.name for s in p.signatures] == ["void big()", "void ew<v7>()"]
    assert p.rounds[0].names == ("big",) and p.rounds[0].launch_count == 1 and p.launches == 1
    assert [s.name for s in p.rounds[0].wanted] == ["void big()"]
    assert [s.name for s in p.uncovered] == ["void ew<v7>()"] and p.notes


def test_plan_last_run_still_prefers_coverage() -> None:
    settings = rounds.PlanSettings(coverage=0.9, max_rounds=1, program_s=5.0)
    p = plan.make_plan(STEP, settings)
    assert len(p.rounds) == 1 and p.rounds[0].launch_count == 2 and p.uncovered == ()


def test_nvtx_window_filter() -> None:
    t = STEP.assign(thread_id=7)
    ranges = pd.DataFrame(
        {
            "name": ["step", "other"],
            "start_ns": [1500, 0],
            "end_ns": [3500, 10_000],
            "thread_id": [7, 7],
        }
    )
    kept = nvtx_filter.in_nvtx_range(t, ranges, "dom@step/")
    assert kept["api_start_ns"].tolist() == [2000, 3000]
    assert nvtx_filter.in_nvtx_range(t, ranges, "missing").empty


def test_function_names_match_ncu_and_nsys_spelling() -> None:
    lambda_kernel = "void at::native::<unnamed>::k<float, (int)4, void x<y>(int)::[lambda(int) (instance 1)]>(long, T3)"
    assert names.function_name(lambda_kernel) == "k"
    assert (
        names.function_name("nsdiag::float4_kernel(const float4 *, float4 *, long)")
        == "float4_kernel"
    )
    assert (
        names.function_name(
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)"
        )
        == "Kernel2"
    )
    assert names.function_name("triton_poi_fused_div_sub_0") == "triton_poi_fused_div_sub_0"
    nsys = (
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, "
        "std::array<char *, (unsigned long)1>>(int, T2, T3)"
    )
    ncu = "void vectorized_elementwise_kernel<4, FillFunctor<float>, array<char *, 1>>(int, T2, T3)"
    assert names.normalized(nsys) == names.normalized(ncu)


def test_plan_from_a_recorded_nsys_timeline() -> None:
    session = nsdiag.load(DATA / "nsys/pipeline.sqlite.gz")
    p = plan.make_plan(session.timeline, rounds.PlanSettings(coverage=0.9))
    assert {s.function for s in p.signatures} == {
        "float4_kernel",
        "distribution_elementwise_grid_stride_kernel",
    }
    assert p.uncovered == () and len(p.rounds) == 1 and p.rounds[0].launch_count == 1


def test_timeline_weights_give_profiled_launches_their_real_share() -> None:
    from nsdiag.collect.weights import timeline_weights

    kernels = pd.DataFrame(
        {
            "name": ["void ew<Mul>(int)", "void gemm<1>(float)", "void unknown()"],
            "grid": [G1, G2, G1],
            "block": [B, "(256, 1, 1)", B],
        }
    )
    out = timeline_weights(kernels, signatures.kernel_launches(STEP))
    assert out["timeline_launches"].tolist()[:2] == [2, 1] and out["timeline_total_ns"].tolist()[
        :2
    ] == [600.0, 40.0]
    assert out["timeline_launches"].isna().tolist() == [False, False, True]


# ------------------------------------------------------------------------------------- discovery


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


# ------------------------------------------------------------------------------ fake ncu and nsys

FAKE_NCU = r'''
import gzip, json, os, subprocess, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    print(os.environ.get("FAKE_NCU_BANNER", """%s"""))
    sys.exit(0)
if args[0] == "--query-metrics":      # the H200's metric base names, as the full-set header has them
    if os.environ.get("FAKE_QUERY") == "fail":
        print("==ERROR== Failed to query metrics.")
        sys.exit(1)
    header = gzip.open(os.environ["FAKE_HEADER"], "rt").readline().strip().strip('"').split('","')
    print('"Metric name","Metric type","Metric unit","Metric description","NVIDIA H200"')
    for base in sorted({h.split(".")[0] for h in header if "__" in h}):
        print(f'"{base}","Counter","","","1"')
    sys.exit(0)
kind = "export" if "-i" in args else "targeted" if "--section" in args else "durations" if "--metrics" in args else "full"
mode = os.environ.get("FAKE_" + kind.upper(), "ok")
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(json.dumps(args) + "\n")
if mode == "refuse" and "--metrics" in args:
    print("==ERROR== Failed to find metric sm__imaginary.sum")
    sys.exit(1)
if kind == "export":
    page = args[args.index("--page") + 1]
    text = gzip.open(os.environ["FAKE_RAW" if page == "raw" else "FAKE_DETAILS"], "rt").read()
    if "--print-kernel-base" in args:     # stand-in mangled names: one per distinct demangled name
        import csv, io
        rows = list(csv.reader(io.StringIO(text)))
        top = next(i for i, row in enumerate(rows) if "Kernel Name" in row)
        col = rows[top].index("Kernel Name")
        for row in rows[top + 2:]:
            if len(row) > col:
                row[col] = "_Z" + "".join(ch for ch in row[col] if ch.isalnum())
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rows)
        text = out.getvalue()
    sys.stdout.write(text)
    sys.exit(0)
out = args[args.index("-o") + 1]
program = args[args.index("-o") + 2:]
print("==PROF== Connected to process 4242 (" + program[0] + ")", flush=True)
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
          "on the target device 0. For instructions on enabling permissions and to get more information see "
          "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    sys.exit(1)
child = subprocess.Popen(program)
if mode == "hang":
    with open(os.environ["FAKE_PIDS"], "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")
    time.sleep(600)
code = child.wait()
if mode == "nogpu":
    print("RuntimeError: Found no NVIDIA driver on your system.")
    print("==WARNING== No kernels were profiled.")
    print("==ERROR== The application returned an error code (1).")
    sys.exit(1)
if mode == "nokernels":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
names = ["kernel_0", "kernel_1", "kernel_2"]
if "-k" in args and args[args.index("-k") + 1].startswith("regex:^("):   # ncu prints names in the filter's base
    import re
    names = [re.sub(r"\\(.)", r"\1", n) for n in args[args.index("-k") + 1][len("regex:^("):-2].split("|")]
for i in range(int(os.environ.get("FAKE_KERNELS", "3"))):
    print(f'==PROF== Profiling "{names[i %% len(names)]}" - {i}: 0%%....50%%....100%% - 38 passes', flush=True)
if mode == "appfail" or code:
    print(f"==ERROR== The application returned an error code ({code or 3}).")
open(out + ".ncu-rep", "wb").write(b"fake report")
print("==PROF== Disconnected from process 4242")
print("==PROF== Report: " + out + ".ncu-rep")
sys.exit(code or (3 if mode == "appfail" else 0))
''' % NCU_VERSION.format(v="2025.3.1.0")

FAKE_NSYS = r'''
import gzip, json, os, shutil, subprocess, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("""%s""")
    sys.exit(0)
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(json.dumps(["nsys"] + args) + "\n")
mode = os.environ.get("FAKE_NSYS", "ok")
out = args[args.index("-o") + 1]
if args[0] == "export":
    with gzip.open(os.environ["FAKE_SQLITE"], "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    sys.exit(0)
child = subprocess.Popen(args[args.index("-o") + 2:])
if mode == "hang":
    with open(os.environ["FAKE_PIDS"], "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")
    import time
    time.sleep(600)
code = child.wait()
if mode == "noimport":
    open(out + ".qdstrm", "wb").write(b"raw")
    print("Importer error status: The importer binary and its dependencies were not found.")
    sys.exit(0)
open(out + ".nsys-rep", "wb").write(b"fake")
# nsys 2025.3.1 on the H200 writes the report, says nothing of the program's failure and exits
# with the program's code (tools/verify_profile_h200.sh, tests/data/profile/verify-profile.log)
print("Generated:\n    " + out + ".nsys-rep")
sys.exit(code)
''' % NSYS_VERSION.format(v="2025.3.1.0")

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


def calls(fakes: dict[str, Path]) -> list[list[str]]:
    return (
        [json.loads(line) for line in fakes["calls"].read_text().splitlines()]
        if fakes["calls"].exists()
        else []
    )


def options(fakes: dict[str, Path], tmp_path: Path, **kw: object) -> ProfileOptions:
    settings: dict = {
        "output": tmp_path / "sessions" / "my session",
        "ncu": str(fakes["ncu"]),
        "nsys": str(fakes["nsys"]),
    }
    return ProfileOptions(**{**settings, **kw})


# ----------------------------------------------------------------------------------------- runner


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
    assert result.ok and result.profiled == 3
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


# ------------------------------------------------------------------------------------ session dir


def test_session_folder_is_never_overwritten(tmp_path: Path) -> None:
    program = [sys.executable, "my train.py"]
    first = session_dir.create(tmp_path / "s", program)
    (first.root / "keep.txt").write_text("x")
    second = session_dir.create(tmp_path / "s", program)
    third_target = tmp_path / "s-2"
    (second.root / "f").write_text("y")
    third = session_dir.create(tmp_path / "s", program)
    assert (first.root, second.root, third.root) == (tmp_path / "s", third_target, tmp_path / "s-3")
    assert (
        (first.root / "keep.txt").read_text() == "x"
        and first.reports.is_dir()
        and first.logs.is_dir()
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert session_dir.create(empty, program).root == empty


def test_default_folder_name() -> None:
    from datetime import datetime

    when = datetime(2026, 11, 29, 13, 5, 9)
    assert session_dir.default_path(
        ["python3", "-u", "my train.py", "--epochs", "1"], when
    ) == Path("nsdiag-sessions/my-train-20261129-130509")
    assert session_dir.default_path(["./bin/app"], when).name == "app-20261129-130509"
    assert (
        session_dir.default_path(resolve_program([])[0], when).name
        == "reference-kernels-20261129-130509"
    )


# ------------------------------------------------------------------------------- profile, end to end


def test_profile_end_to_end_with_fakes(fakes: dict[str, Path], tmp_path: Path) -> None:
    notes: list[str] = []

    class Recorder:
        def phase(self, title, total):
            notes.append(f"phase {title} {total}")

        def advance(self, done, label):
            notes.append(f"done {done}")
            labels.append(label)

        def output(self, line):
            notes.append(line)

        def note(self, text):
            notes.append(f"note {text}")

    labels: list[str] = []
    result = profile(
        [str(fakes["script"]), "0"],
        options(fakes, tmp_path),
        Recorder(),
        nsdiag_argv=["nsdiag", "profile"],
    )
    # the progress bar names kernels by their short names, not the mangled ones ncu prints
    assert labels and set(labels) <= {s.function for s in result.plan.signatures} | {
        "kernel_0",
        "kernel_1",
        "kernel_2",
    }
    assert not any(label.startswith("_Z") for label in labels)
    root = result.session_dir
    assert root == tmp_path / "sessions/my session"
    made = calls(fakes)
    assert made[0][:2] == ["nsys", "profile"] and made[1][:2] == ["nsys", "export"]
    targeted = [c for c in made if "--section" in c]
    assert targeted == [list(r.argv[1:]) for r in result.plan.rounds]
    assert targeted[0][-3:] == [
        sys.executable,
        str(fakes["script"]),
        "0",
    ]  # spaces survive as one argument
    assert "step 1 loss 2.5" in notes and "done 3" in notes
    for name in (
        "command.json",
        "env.json",
        "device.json",
        "status.json",
        "session.json",
        "reports/timeline.sqlite",
        "reports/targeted-1.ncu-rep",
        "reports/targeted-1.raw.csv",
        "reports/targeted-1.details.csv",
        "logs/1-timeline.log",
        "logs/2-targeted-1.log",
    ):
        assert (root / name).exists(), name
    status = json.loads((root / "status.json").read_text())
    assert status["error"] is None and status["plan"]["rounds"][0]["launch_count"] == 1
    assert (
        status["plan"]["name_base"] == "mangled"
        and targeted[0][targeted[0].index("--kernel-name-base") + 1] == "mangled"
    )
    # the rules' metrics by name, checked against the chip's listing, with the three base sections
    requested = targeted[0][targeted[0].index("--metrics") + 1].split(",")
    assert status["rule_metrics"] == len(requested) >= 110 and targeted[0].count("--section") == 3
    assert json.loads((root / "command.json").read_text())["program"][1] == str(fakes["script"])
    session = nsdiag.load(root)
    assert len(session.kernels) > 0 and session.has_timeline() and len(session.rule_results) > 0
    assert "timeline_total_ns" in session.kernels
    from nsdiag.analysis.engine import diagnose

    assert diagnose(session).kernels


@pytest.mark.parametrize("query, targeted", [("fail", "ok"), ("ok", "refuse")])
def test_profile_collects_sections_when_the_metric_list_fails(
    fakes: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    query: str,
    targeted: str,
) -> None:
    monkeypatch.setenv("FAKE_QUERY", query)
    monkeypatch.setenv("FAKE_TARGETED", targeted)
    notes: list[str] = []
    progress = type(
        "Notes",
        (),
        {
            "phase": lambda *a: None,
            "advance": lambda *a: None,
            "output": lambda *a: None,
            "note": lambda self, text: notes.append(text),
        },
    )()
    result = profile([str(fakes["script"])], options(fakes, tmp_path), progress)
    runs = [c for c in calls(fakes) if "--section" in c]
    assert runs[-1].count("--section") == 12 and "--metrics" not in runs[-1]
    assert len(runs) == (2 if targeted == "refuse" else 1)
    assert any(
        ("did not list" if query == "fail" else "refused the metric list") in n for n in notes
    )
    assert result.session is not None and len(result.session.kernels)
    assert not any("profiled none" in m for m in result.missing)


def test_profile_falls_back_to_ncu_durations_without_an_nsys_report(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NSYS", "noimport")
    monkeypatch.setenv("FAKE_RAW", str(DATA / "console/duration_raw.csv.gz"))
    result = profile([str(fakes["script"])], options(fakes, tmp_path))
    made = calls(fakes)
    assert made[0][:2] == ["nsys", "profile"] and made[1][:2] == [
        "--metrics",
        "gpu__time_duration.sum",
    ]
    assert any("timeline" in m for m in result.missing)
    assert (
        result.plan is not None
        and result.plan.signatures[0].function == "vectorized_elementwise_kernel"
    )
    # the duration report exported again with mangled names: phase 2 filters on them, one run
    assert made[3][-2:] == ["--print-kernel-base", "mangled"] and result.plan.name_base == "mangled"
    targeted = [c for c in made if "--section" in c]
    assert len(targeted) == 1 and targeted[0][targeted[0].index("-k") + 1].startswith(
        "regex:^(_Zvoidvectorized"
    )


@pytest.mark.parametrize(
    "mode, message, hint",
    [
        ("perm", "ERR_NVGPUCTRPERM", "NVreg_RestrictProfilingToAdminUsers=0"),
        ("nogpu", "no usable NVIDIA GPU", "nvidia-smi"),
        ("appfail", "the program exited with code 3", "run it without nsdiag"),
    ],
)
def test_profile_failures_keep_a_partial_session(
    fakes: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    message: str,
    hint: str,
) -> None:
    monkeypatch.setenv("FAKE_TARGETED", mode)
    with pytest.raises(ProfilerError) as info:
        profile([str(fakes["script"])], options(fakes, tmp_path))
    assert message in info.value.message and hint in info.value.hint and info.value.exit_code == 1
    root = tmp_path / "sessions/my session"
    status = json.loads((root / "status.json").read_text())
    assert status["complete"] is False and message in status["error"]
    assert nsdiag.load(root).has_timeline()  # phase 1's tables are kept
    if mode == "perm":
        assert (
            "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in info.value.hint
            and "sudo" in info.value.hint
        )


def test_profile_program_fails_in_phase_1(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ProfilerError, match="exited with code 5 during the timeline run") as info:
        profile([str(fakes["script"]), "5"], options(fakes, tmp_path))
    assert "partial session is kept" in info.value.hint
    assert [c[:2] for c in calls(fakes)] == [
        ["nsys", "profile"],
        ["nsys", "export"],
    ]  # not run again under ncu
    root = tmp_path / "sessions/my session"
    status = json.loads((root / "status.json").read_text())
    assert status["complete"] is False and "exited with code 5" in status["error"]
    assert any("kernel metrics" in m for m in status["missing"])
    assert nsdiag.load(
        root
    ).has_timeline()  # what the program did before it failed can be explained
    from nsdiag.cli import main

    explained = CliRunner().invoke(main, ["explain", str(root)])
    assert explained.exit_code == 0 and "timeline" in explained.output, explained.output
    fakes["calls"].unlink()
    monkeypatch.setenv("FAKE_NSYS", "noimport")  # the same without nsys: ncu's duration pass
    with pytest.raises(ProfilerError, match="exited with code 5 during the duration pass"):
        profile([str(fakes["script"]), "5"], options(fakes, tmp_path))


def test_profile_no_kernel_launched(
    fakes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NSYS", "noimport")
    monkeypatch.setenv("FAKE_DURATIONS", "nokernels")
    with pytest.raises(
        ProfilerError, match="no kernel was profiled during the duration pass"
    ) as info:
        profile([str(fakes["script"])], options(fakes, tmp_path))
    assert "--profile-from-start off" in info.value.hint


def test_missing_explicit_nsys_is_an_error(fakes: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(MissingDependencyError, match="not a working nsys"):
        profile(
            [str(fakes["script"])],
            ProfileOptions(
                output=tmp_path / "s", ncu=str(fakes["ncu"]), nsys=str(tmp_path / "missing-nsys")
            ),
        )


def test_missing_script_is_a_usage_error() -> None:
    with pytest.raises(InputError):
        resolve_program(["no_such_script.py"])


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_dry_run_reference_kernels() -> None:
    result = CliRunner().invoke(profile_command, ["--dry-run", "--ncu", "/nowhere/ncu"])
    assert result.exit_code == 2 and "not a working ncu" in result.output
    result = CliRunner().invoke(profile_command, ["--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert (
        "nsys profile -t cuda,nvtx,osrt --cpuctxsw none -s none --cuda-graph-trace node --capture-range cudaProfilerApi"
        in out
    )
    assert "--profile-from-start off" in out and "run_all.py --profile-region" in out
    assert (
        "--filter-mode per-launch-config --launch-count '<N>'" in out
        and "--csv --page raw --print-units base" in out
    )


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
    assert "--profile-from-start" not in result.output
    assert (
        f"'{fakes['script']}' --epochs 1" in result.output
        and f"'{tmp_path / 'out dir'}/reports/timeline'" in result.output
    )


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


# ------------------------------------------------------------------------------------------ doctor


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
    assert not doctor.healthy(checks.values())
    result = CliRunner().invoke(doctor_command, [])
    assert result.exit_code == 1 and "FAIL" in result.output and "fix:" in result.output


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

    header = (
        gzip.open(DATA / "reference/raw.csv.gz", "rt").readline().strip().strip('"').split('","')
    )
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
        # a demangled name with colons, and a suffix after the launch index (tolerated, see _PROGRESS)
        (
            '==PROF== Profiling "void at::native::f<1>(int)" - 7 (8/180): 0%....50%....100% - 38 passes',
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


def test_duration_groups_are_planned_matched_and_weighted() -> None:
    from nsdiag.analysis.signatures import aggregate
    from nsdiag.collect.weights import coverage, timeline_weights

    # one GEMM kernel and grid doing two amounts of work (10 ns and 30 ns launches, alternating)
    t = timeline([("void gemm<1>(float)", "gemm", G1, B, d) for d in (10.0, 30.0, 10.0, 30.0)])
    p = plan.make_plan(t, rounds.PlanSettings(coverage=1.0))
    # the 30 ns group is chosen; the 10 ns group's first launch comes along (first of its configuration)
    assert [(s.variant, s.variants, s.launches, s.total_ns) for s in p.signatures] == [
        (1, 2, 2, 60.0)
    ]
    # the 30 ns group's first launch is the second of the configuration: counting 2 reaches it
    assert [(r.launch_count, r.launches, len(r.profiled)) for r in p.rounds] == [(2, 2, 2)]
    assert any("duration groups" in n for n in p.notes) and p.planned_share == 1.0
    launches = signatures.kernel_launches(t)
    profiled = pd.DataFrame(
        {
            "id": [0, 1],
            "name": ["void gemm<1>(float)"] * 2,
            "grid": [G1, G1],
            "block": [B, B],
            "duration_ns": [11.0, 29.0],
            "x": [1.0, 3.0],
        }
    )
    weighted = timeline_weights(profiled, launches)
    assert weighted["timeline_variant"].tolist() == [0, 1] and weighted[
        "timeline_total_ns"
    ].tolist() == [20.0, 60.0]
    row = aggregate(weighted).iloc[0]
    assert (
        row["x"] == pytest.approx((1 * 20 + 3 * 60) / 80)
        and row["total_duration_ns"] == 80
        and row["launches"] == 4
    )
    # with the short launch alone, the long group is reported missing
    only_short = nsdiag.Session(kernels=timeline_weights(profiled.iloc[:1], launches))
    assert coverage(p, only_short)["missing"] == [
        {"name": "void gemm<1>(float)", "grid": G1, "block": B, "share": 0.75}
    ]
    short_row = aggregate(only_short.kernels).iloc[0]
    assert short_row["total_duration_ns"] == 20  # what the profiled group stands for
    assert (row["duration_groups"], row["duration_groups_profiled"]) == (2, 2)
    assert (short_row["duration_groups"], short_row["duration_groups_profiled"]) == (2, 1)
    from nsdiag.analysis.engine import diagnose

    assert "only 1 profiled" in diagnose(only_short).kernels[0].verdict_note
    assert (
        "weighted by GPU time" in diagnose(nsdiag.Session(kernels=weighted)).kernels[0].verdict_note
    )
    assert coverage(p, nsdiag.Session(kernels=weighted))["missing"] == []
