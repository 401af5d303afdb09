"""Command lines for ncu and nsys, built by pure functions (golden-tested; never through a shell).

Flags are those of Nsight Compute / Nsight Systems 2025.3.1 (see ../shared/GPU-NOTES.md and the
research notes). Every function returns a fresh list of strings: paths with spaces need no quoting.
Output names are given without extension; ncu appends `.ncu-rep` and nsys `.nsys-rep`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from nsdiag.collect.launcher import ncu_on_one_rank
from nsdiag.collect.metric_set import BASE_SECTIONS

# The sections the rules, the verdict and the roofline read (nsdiag/model/catalogue.py), and no
# more: what `--set full` adds beyond these (PM sampling, source counters with PC sampling, NVLink,
# NUMA, the FP64/FP16/FP32 hierarchical rooflines) costs replay passes no rule uses.
#   SpeedOfLight                  duration, clocks, SOL %, its breakdown (shared-memory wavefront %)
#   LaunchStats, Occupancy        launch__*, occupancy and its limits
#   ComputeWorkloadAnalysis       pipe utilisation (sm__pipe_*, sm__inst_executed_pipe_*), IPC
#   MemoryWorkloadAnalysis(+Chart, _Tables)  hit rates, bytes per level, sectors per request,
#                                 bytes per sector, bank conflicts, local-memory traffic, atomics
#   SchedulerStats, WarpStateStats  issue activity, eligible warps, stall reasons, divergence
#   InstructionStats              executed instructions
#   SpeedOfLight_RooflineChart    FLOP rates and peaks (roofline)
#   SpeedOfLight_HierarchicalTensorRooflineChart  tensor-core operation counts
TARGETED_SECTIONS: tuple[str, ...] = (
    "SpeedOfLight",
    "LaunchStats",
    "Occupancy",
    "ComputeWorkloadAnalysis",
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Chart",
    "MemoryWorkloadAnalysis_Tables",
    "SchedulerStats",
    "WarpStateStats",
    "InstructionStats",
    "SpeedOfLight_RooflineChart",
    "SpeedOfLight_HierarchicalTensorRooflineChart",
)
# What phase 2 collects: the rules' metrics by name with three cheap sections (metric_set.py: 25
# passes, ~0.5 s per launch on the H200), the sections above (35 passes, ~1.9 s, with ncu's own
# hints for each), or ncu's full set (38 passes, ~2.2 s).
SECTION_SETS = ("rules", "sections", "full")
DURATION_METRIC = "gpu__time_duration.sum"
# nsys's option for NVTX ranges around PyTorch's Python functions (nsys 2024.5 and later)
PYTORCH_FUNCTIONS = "--pytorch=functions-trace"
_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")


def regex_escape(text: str) -> str:
    """Escape regex metacharacters only: valid in ECMAScript, POSIX ERE and Perl alike (Python's
    re.escape also escapes spaces and other characters some engines reject as identity escapes)."""
    return _REGEX_SPECIAL.sub(r"\\\1", text)


def function_regex(functions: Iterable[str]) -> str:
    """ncu `-k` value matching exactly these kernel names (ncu's regex is a partial match)."""
    names = sorted(set(functions))
    if not names:
        raise ValueError("no kernel to profile")
    return "regex:^(" + "|".join(regex_escape(n) for n in names) + ")$"


def nvtx_include(expression: str) -> str:
    """ncu `--nvtx-include` value: a bare name is a push/pop range (ncu wants a trailing '/');
    an expression with '/' or '@' (ncu's own syntax, e.g. start/end ranges `domain@range`) is
    kept."""
    return expression if ("/" in expression or "@" in expression) else expression + "/"


def section_args(section_set: str = "rules", metrics: Sequence[str] = ()) -> list[str]:
    """What to collect: the base sections plus `metrics` by name ("rules"), `--section X` for each
    section the rules read ("sections"), or `--set full` (every section ncu has)."""
    if section_set == "full":
        return ["--set", "full"]
    if section_set == "sections":
        return [arg for section in TARGETED_SECTIONS for arg in ("--section", section)]
    if section_set != "rules":
        raise ValueError(f"unknown section set {section_set!r} (expected one of {SECTION_SETS})")
    if not metrics:
        raise ValueError("the rules' metric list is empty (metric_set.rule_metrics)")
    return [arg for section in BASE_SECTIONS for arg in ("--section", section)] + [
        "--metrics",
        ",".join(metrics),
    ]


def ncu_output(path: str | Path) -> str:
    """ncu expands macros (%p, %h, %i, %q{ENV}) in -o names; '%%' is a literal '%'."""
    return str(path).replace("%", "%%")


def _region(profile_from_start: bool, nvtx: str | None) -> list[str]:
    out = [] if profile_from_start else ["--profile-from-start", "off"]
    if nvtx:
        out += ["--nvtx", "--nvtx-include", nvtx_include(nvtx)]
    return out


def one_rank(devices: Sequence[int]) -> list[str]:
    """A distributed run (a launcher starting one process per GPU): ncu follows every process
    the launcher starts (`--target-processes all`, its default, said explicitly) and profiles
    only kernels on the chosen rank's GPU (`--devices`); the other ranks run unprofiled. Replay
    of a collective would deadlock (its peers do not replay it), so the kernel filter never names
    a communication kernel (phase 1 leaves them out of the plan)."""
    if not devices:
        return []
    return ["--target-processes", "all", "--devices", ",".join(str(d) for d in devices)]


def _ncu_run(
    profile_from_start: bool,
    nvtx: str | None,
    output: str | Path,
    program: Sequence[str],
    *,
    no_source: bool = True,
    devices: Sequence[int] = (),
    rank: int = 0,
    head: Sequence[str] = (),
) -> list[str]:
    """`head` (ncu and its metrics and filters) with what every ncu run ends with: the region,
    the GPU's own clocks (as a plain run sees them), `--import-source no` (the duration pass
    leaves ncu's default), the report and the program. In a distributed run (`devices`), ncu
    runs inside rank `rank`'s worker where the launcher is torchrun (collect/launcher.py), and
    else follows the launcher's processes on that rank's GPU."""
    tail = [
        *_region(profile_from_start, nvtx),
        "--clock-control",
        "none",
        *(["--import-source", "no"] if no_source else []),
        "-f",
        "-o",
        ncu_output(output),
    ]
    if devices and (wrapped := ncu_on_one_rank([*head, *tail], program, rank)) is not None:
        return wrapped
    return [*head, *one_rank(devices), *tail, *program]


def ncu_launch(ncu: str | Path, program: Sequence[str], port: int, connections: int) -> list[str]:
    """Phase 2's program started ahead (collect/standby.py): ncu starts it and suspends it at its
    first CUDA call until an ncu attaches on `port` (`--mode launch`). Only the program's own
    process is injected: the attaching ncu profiles one process, and DataLoader workers need no
    CUDA."""
    return [
        str(ncu),
        "--mode",
        "launch",
        "--target-processes",
        "application-only",
        *_ports(port, connections),
        *program,
    ]


def ncu_attach(
    argv: Sequence[str], program: Sequence[str], port: int, connections: int
) -> list[str]:
    """A targeted run's command (`ncu_targeted`) attaching to the program `ncu_launch` started,
    instead of starting it: the same metrics, filters and report, without the program."""
    n = len(program)
    if n == 0 or list(argv[-n:]) != list(program):
        raise ValueError("the command does not end with the program")
    return [
        str(argv[0]),
        "--mode",
        "attach",
        "--hostname",
        "127.0.0.1",
        *_ports(port, connections),
        *argv[1:-n],
    ]


def _ports(port: int, connections: int) -> list[str]:
    return ["--port", str(port), "--max-connections", str(connections)]


def nsys_profile(
    nsys: str | Path,
    output: str | Path,
    program: Sequence[str],
    *,
    profile_from_start: bool = True,
    pytorch_functions: bool = False,
) -> list[str]:
    """Phase 1: the timeline. CUDA and NVTX traces only: no CPU sampling or context switches,
    and no OS-runtime trace, which nsdiag does not read and which cost lm_train 15% of its step
    against 5% without it (tools/probes/probe_nsys_overhead.sh on the H200, 2026-11-30: 18.6 ms
    plain, 21.3 ms with osrt, 19.7 ms without); CUDA-graph kernels one by one so that they can be
    planned like any other.
    With profile_from_start off, only the cudaProfilerStart/Stop region is captured and the
    program then runs to its end (`stop`, not the default `stop-shutdown`, which kills it).
    `pytorch_functions`: NVTX ranges (domain `PyTorch`) around the PyTorch functions the program
    calls (`torch.optim.AdamW.step`, `torch.nn.modules.Linear.forward`, ...): which code launched
    each kernel, at no step-time cost a 15-step ViT-S run could show (GPU-NOTES.md)."""
    argv = [
        str(nsys),
        "profile",
        "-t",
        "cuda,nvtx",
        "--cpuctxsw",
        "none",
        "-s",
        "none",
        "--cuda-graph-trace",
        "node",
    ]
    if pytorch_functions:
        argv.append(PYTORCH_FUNCTIONS)
    if not profile_from_start:
        argv += ["--capture-range", "cudaProfilerApi", "--capture-range-end", "stop"]
    return [*argv, "-f", "true", "-o", str(output), *program]


def nsys_export_sqlite(nsys: str | Path, report: str | Path, output: str | Path) -> list[str]:
    return [str(nsys), "export", "--type", "sqlite", "-f", "true", "-o", str(output), str(report)]


def ncu_durations(
    ncu: str | Path,
    output: str | Path,
    program: Sequence[str],
    *,
    profile_from_start: bool = True,
    nvtx: str | None = None,
) -> list[str]:
    """Phase 1 without nsys: every launch once, duration only (about 0.2 s per launch on the
    H200)."""
    head = [str(ncu), "--metrics", DURATION_METRIC]
    return _ncu_run(profile_from_start, nvtx, output, program, no_source=False, head=head)


def ncu_targeted(
    ncu: str | Path,
    output: str | Path,
    program: Sequence[str],
    *,
    names: Iterable[str],
    launch_count: int,
    launch_skip: int = 0,
    skip_before_match: int = 0,
    name_base: str = "mangled",
    sections: str = "rules",
    metrics: Sequence[str] = (),
    profile_from_start: bool = True,
    nvtx: str | None = None,
    devices: Sequence[int] = (),
    rank: int = 0,
) -> list[str]:
    """Phase 2: one ncu run profiling `launch_count` launches of each launch configuration
    (grid, block, shared memory) of the named kernels, after the first `launch_skip` of it.

    `--filter-mode per-launch-config` counts launches per kernel name and launch configuration
    (verified on the H200, tools/probes/probe_ncu_filters.sh), so `--launch-count 1` profiles one
    launch of every shape of these kernels; `--launch-skip` applies per configuration too (ncu's
    own usage examples), so a skip steps over warm-up launches of each shape. Names are mangled
    (unique per template instance, the same in nsys and ncu) or ncu's `function` base (no
    namespace, template or parameters: nsys's short name). `skip_before_match` launches of any
    kernel are ignored before the filter starts matching and counting (ncu's
    `--launch-skip-before-match`: the analysed region's first launch)."""
    if launch_count < 1 or launch_skip < 0 or skip_before_match < 0:
        raise ValueError("launch_count must be at least 1 and the skips at least 0")
    if name_base not in ("mangled", "function"):
        raise ValueError(f"unknown kernel name base {name_base!r}")
    argv = [str(ncu), *section_args(sections, metrics)]
    argv += [
        "--kernel-name-base",
        name_base,
        "-k",
        function_regex(names),
        "--filter-mode",
        "per-launch-config",
        *(["--launch-skip-before-match", str(skip_before_match)] if skip_before_match else []),
        *(["--launch-skip", str(launch_skip)] if launch_skip else []),
        "--launch-count",
        str(launch_count),
    ]
    return _ncu_run(
        profile_from_start, nvtx, output, program, devices=devices, rank=rank, head=argv
    )


def ncu_full(
    ncu: str | Path,
    output: str | Path,
    program: Sequence[str],
    *,
    kernel_regex: str | None = None,
    profile_from_start: bool = True,
    nvtx: str | None = None,
    devices: Sequence[int] = (),
    rank: int = 0,
) -> list[str]:
    """`--full`: every launch (or every launch whose function name matches), the full set. In a
    distributed run (`devices`), NCCL's kernels are left out (`regex:^(?!nccl)`) when no
    pattern is given: replaying a collective deadlocks."""
    argv = [str(ncu), "--set", "full"]
    if kernel_regex:
        argv += ["-k", f"regex:{kernel_regex}"]
    elif devices:
        argv += ["-k", "regex:^(?!nccl)"]
    return _ncu_run(
        profile_from_start, nvtx, output, program, devices=devices, rank=rank, head=argv
    )


def ncu_query_metrics(ncu: str | Path) -> list[str]:
    """The metric base names the GPUs here offer, as CSV (metric_set.parse_query reads it)."""
    return [str(ncu), "--query-metrics", "--csv"]


def ncu_export_raw(
    ncu: str | Path, report: str | Path, kernel_base: str | None = None
) -> list[str]:
    """One row per launch, every metric, base units (the format tests/data holds); with
    kernel_base="mangled", kernel names as the linker sees them (what phase 2 filters on)."""
    argv = [str(ncu), "-i", str(report), "--csv", "--page", "raw", "--print-units", "base"]
    return argv + (["--print-kernel-base", kernel_base] if kernel_base else [])


def ncu_export_details(ncu: str | Path, report: str | Path) -> list[str]:
    """Section metrics by label plus ncu's own rule results (a second opinion)."""
    return [
        str(ncu),
        "-i",
        str(report),
        "--csv",
        "--page",
        "details",
        "--print-details",
        "all",
        "--print-units",
        "base",
    ]


def template_targeted(
    ncu: str | Path,
    output: str | Path,
    program: Sequence[str],
    *,
    sections: str = "rules",
    profile_from_start: bool = True,
    nvtx: str | None = None,
) -> list[str]:
    """Phase 2 as a dry run shows it: the kernel list and count are only known after phase 1."""
    argv = ncu_targeted(
        ncu,
        output,
        program,
        names=["NAMES"],
        launch_count=1,
        sections=sections,
        metrics=["METRICS"],
        profile_from_start=profile_from_start,
        nvtx=nvtx,
    )
    if "METRICS" in argv:
        argv[argv.index("METRICS")] = (
            "<the metrics the rules read that this GPU offers (ncu --query-metrics)>"
        )
    argv[argv.index("regex:^(NAMES)$")] = (
        "regex:^(<mangled names of the kernels chosen from phase 1>)$"
    )
    argv[argv.index("--launch-count") + 1] = "<N>"
    return argv
