"""Phase 1: the program's kernel launches and run time, from an nsys timeline, or without a
working nsys from a duration-only ncu pass."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from nsdiag.analysis.records.region import Region
from nsdiag.analysis.region.choose import choose_region
from nsdiag.analysis.region.profiler import profiler_windows
from nsdiag.analysis.region.windows import launch_times, within
from nsdiag.collect import argv as cmd
from nsdiag.collect import runner
from nsdiag.collect.breakdown import TIMELINE_WITHOUT_PYTORCH
from nsdiag.collect.cost import SECONDS_PER_LAUNCH
from nsdiag.collect.exports import csv_for
from nsdiag.collect.nvtx_filter import in_nvtx_range
from nsdiag.collect.program import pytorch_ranges
from nsdiag.collect.run_state import RunState
from nsdiag.errors import InputError, NsdiagError, ProfilerError
from nsdiag.model.launches import kernel_launches
from nsdiag.model.names import function_name
from nsdiag.model.ranks import is_communication, overlaps_communication, rank_of, session_ranks
from nsdiag.model.session import Session


def timeline(state: RunState, fallback: bool = True) -> tuple[pd.DataFrame | None, float]:
    """Kernel launches of the profiled region (launch order) and the program's run time;
    without a working nsys, a duration-only ncu pass (or nothing, when `fallback` is off)."""
    state.progress.phase("phase 1: timeline", None)
    if state.nsys is not None:
        frame = _nsys_timeline(state)
        if frame is not None:
            return frame, state.timings[state.timeline_step]
    state.status.lacks("timeline (no working nsys: program-level findings are not available)")
    return _ncu_durations(state) if fallback else (None, 0.0)


def _nsys_run(state: RunState, step: str, pytorch_functions: bool) -> runner.RunResult:
    assert state.nsys is not None
    state.timeline_step = step
    return state.run(
        step,
        cmd.nsys_profile(
            state.nsys.path,
            state.sd.report("timeline"),
            state.program,
            profile_from_start=state.start,
            pytorch_functions=pytorch_functions,
        ),
    )


def _recorded(state: RunState) -> runner.RunResult:
    """Phase 1's nsys run, with the PyTorch functions' ranges for a PyTorch program; once more
    without them when they broke the program (torch.compile under `--pytorch`: runner.PROBLEMS'
    pytorch-annotations), so that the session has a timeline, without those ranges."""
    assert state.nsys is not None
    pytorch = pytorch_ranges(state.nsys.version_tuple, state.program)
    result = _nsys_run(state, "1-timeline", pytorch)
    if not pytorch:
        return result
    broke = next((p for p in result.problems if p.kind == "pytorch-annotations"), None)
    if broke is None:
        state.status.pytorch_ranges = {"asked": True, "recorded": True}
        return result
    state.status.pytorch_ranges = {
        "asked": True,
        "recorded": False,
        "reason": (
            f"nsys's {cmd.PYTORCH_FUNCTIONS} broke the program's torch.compile "
            f"({broke.line[-120:]}); phase 1 was recorded again without it"
        ),
        "log": str(result.log),
    }
    state.progress.note(
        f"the program failed under nsys {cmd.PYTORCH_FUNCTIONS} (torch.compile cannot import "
        "nsys's annotation module, see "
        f"{result.log}); recording the timeline again without PyTorch function ranges"
    )
    return _nsys_run(state, TIMELINE_WITHOUT_PYTORCH, False)


def _nsys_timeline(state: RunState) -> pd.DataFrame | None:
    result = _recorded(state)
    report = state.sd.report("timeline.nsys-rep")
    error = runner.failure(result, "the timeline run (nsys)", state.sd.root)
    if result.has("no-gpu"):
        raise error or ProfilerError("the timeline run failed", f"see {result.log}")
    # nsys exits with the program's code and says nothing more: a report written means nsys
    # worked and the program failed, so keep its timeline and stop (ncu would fail the same way).
    program_failed = result.returncode != 0 and not result.timed_out and report.is_file()
    if not program_failed and (not result.ok or not report.is_file()):
        state.progress.note(
            f"nsys did not produce a report ({error or 'no .nsys-rep written'}); "
            "timing kernels with ncu instead"
        )
        return None
    assert state.nsys is not None
    db = state.sd.report("timeline.sqlite")
    exported = state.run("1-timeline-export", cmd.nsys_export_sqlite(state.nsys.path, report, db))
    if program_failed:
        if exported.ok and db.is_file():
            state.phase1_timeline = db
        state.status.lacks("kernel metrics (the program failed in phase 1, so ncu did not run)")
        raise ProfilerError(
            f"the program exited with code {result.returncode} during the timeline run (nsys)",
            f"run it without nsdiag to see why; see {result.log}; "
            f"the partial session is kept in {state.sd.root}",
        )
    if not exported.ok or not db.is_file():
        state.progress.note(
            "nsys could not export the report to SQLite; timing kernels with ncu instead"
        )
        return None
    from nsdiag import load

    session = load(db)
    state.phase1_timeline = session
    state.first_cuda_s = _first_cuda_call_s(session)
    launches = one_rank(state, session)
    if state.options.nvtx:
        launches = in_nvtx_range(launches, session.nvtx_ranges, state.options.nvtx)
    return in_region(state, session, kernel_launches(launches))


def _first_cuda_call_s(session: Session) -> float:
    """Seconds from the trace's start (nsys starts it with the program) to the program's first
    CUDA call: the start-up a program started ahead has already run (standby.py)."""
    calls = session.api_calls
    if calls is None or calls.empty or "start_ns" not in calls:
        return 0.0
    first = pd.to_numeric(calls["start_ns"], errors="coerce").min()
    return float(first) / 1e9 if pd.notna(first) and first > 0 else 0.0


def one_rank(state: RunState, session: Session) -> pd.DataFrame:
    """The timeline rows phase 2 plans from: all of them for one process; in a distributed run
    (several ranks), the chosen rank's computation kernels (never NCCL's: replaying a collective
    deadlocks), with ncu restricted to that rank's GPU."""
    ranks = session_ranks(session.meta)
    timeline = session.timeline
    if len(ranks) < 2:
        return timeline
    chosen = next((r for r in ranks if r.rank == state.options.rank), None)
    if chosen is None:
        raise InputError(
            f"--rank {state.options.rank}: the run has ranks {ranks[0].rank}-{ranks[-1].rank}",
            "pick one of them",
        )
    mine = (rank_of(timeline) == chosen.rank) & ~is_communication(timeline["name"].astype(str))
    state.devices = (chosen.device,)
    state.status.rank = chosen.to_json()
    state.progress.note(
        f"{len(ranks)} ranks: phase 2 profiles rank {chosen.rank}'s kernels on GPU "
        f"{chosen.device} (ncu --devices {chosen.device}; NCCL kernels left out)"
    )
    # whether each ran beside a collective, decided before the collectives are left out
    marked = timeline.assign(contended=overlaps_communication(timeline))
    rows: pd.DataFrame = marked[mine]
    return rows


def in_region(state: RunState, session: Session, launches: pd.DataFrame) -> pd.DataFrame:
    """Phase 1's launches marked with the analysed region (see `mark_region`); the region and
    where ncu starts are recorded in the run's state."""
    marked, region, from_start = mark_region(
        session, launches, state.options.region, state.options.profile_from_start
    )
    state.region = region
    if from_start is not None:
        state.start = from_start
    state.status.region = region.to_json()
    state.progress.note(f"analysed region: {region.description}")
    return marked


def mark_region(
    session: Session, launches: pd.DataFrame, request: str, profile_from_start: bool | None
) -> tuple[pd.DataFrame, Region, bool | None]:
    """Phase 1's launches that ncu will count, each marked `in_region` when it falls in the
    analysed region (analysis/region/choose.py), where phase 2 picks its launches; the region; and
    False when ncu must start at cudaProfilerStart (the program calls it and --profile-from-start is
    auto: ncu then counts only the launches inside the profiler ranges), else None."""
    region = choose_region(session.timeline, session.api_calls, session.nvtx_ranges, request)
    times = launch_times(launches)
    from_start: bool | None = None
    if profile_from_start is None and region.method == "profiler-range":
        from_start = False
        counted = within(times, profiler_windows(session.api_calls, region.trace_end_ns))
        launches = launches[counted].reset_index(drop=True)
        times = times[counted]
    return launches.assign(in_region=within(times, region.windows)), region, from_start


def _ncu_durations(state: RunState) -> tuple[pd.DataFrame, float]:
    state.progress.phase("phase 1: kernel durations (ncu)", None)
    out = state.sd.report("durations")
    result = state.run(
        "1-durations",
        cmd.ncu_durations(
            state.ncu.path,
            out,
            state.program,
            profile_from_start=state.start,
            nvtx=state.options.nvtx,
        ),
        progress=True,
        collection="duration",
    )
    error = runner.failure(result, "the duration pass (ncu)", state.sd.root)
    if error:
        raise error
    report = out.with_name(out.name + ".ncu-rep")
    target = csv_for(report, "raw")
    exported = state.run_export(
        "1-durations-export", cmd.ncu_export_raw(state.ncu.path, report), target
    )
    state.status.step("1-durations-export", exported.ok, exported.wall_s, exported.log)
    if not exported.ok:
        raise ProfilerError(f"could not export {report}", f"see {exported.log}")
    from nsdiag import load

    kernels = load(target).kernels
    frame = pd.DataFrame(
        {
            "kind": "kernel",
            "name": kernels["name"].astype(str),
            "short_name": kernels["name"].astype(str).map(function_name),
            "grid": kernels["grid"],
            "block": kernels["block"],
            "duration_ns": kernels["duration_ns"],
        }
    )
    mangled = _mangled_names(state, report, len(frame))
    if mangled is not None:
        frame["mangled_name"] = mangled
    program_s = max(result.wall_s - result.profiled * SECONDS_PER_LAUNCH["duration"], 1.0)
    return kernel_launches(frame), program_s


def _mangled_names(state: RunState, report: Path, launches: int) -> list[str] | None:
    """The duration pass's kernel names as mangled (the same launches, in the same order), so
    phase 2 can filter on them as it does with nsys's; None if the export does not give them."""
    target = report.with_name("durations.mangled.raw.csv")
    exported = state.run_export(
        "1-durations-export-mangled",
        cmd.ncu_export_raw(state.ncu.path, report, kernel_base="mangled"),
        target,
    )
    state.status.step("1-durations-export-mangled", exported.ok, exported.wall_s, exported.log)
    if not exported.ok:
        return None
    from nsdiag import load

    try:
        names = load(target).kernels["name"].astype(str).tolist()
    except NsdiagError:
        return None
    return names if len(names) == launches and all(names) else None
