"""`nsdiag profile`: phase 1 (timeline), plan, phase 2 (targeted ncu), exports, tables.

Every step records itself in status.json as it ends, so a run that fails or is interrupted
half-way still leaves a session saying what it holds and what is missing. The steps live in
phase1.py, phase2.py and finish.py; this module runs them in order and handles failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING

from nsdiag.collect import interruption, phase1, phase2, runner, session_dir, standby, tools
from nsdiag.collect.doctor import gpu_info
from nsdiag.collect.finish import finish, finish_quietly
from nsdiag.collect.options import NullProgress, ProfileOptions, ProfileResult, Progress
from nsdiag.collect.program import profile_from_start, resolve_program
from nsdiag.collect.run_state import RunState
from nsdiag.errors import NsdiagError, ProfilerError, interrupting_signal
from nsdiag.model import store
from nsdiag.model.session import Session

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_OPTIONS = ProfileOptions()


def profile(
    args: Sequence[str],
    options: ProfileOptions = DEFAULT_OPTIONS,
    progress: Progress | None = None,
    nsdiag_argv: Sequence[str] = (),
) -> ProfileResult:
    """Profile a program (no args: the bundled reference kernels) into a new session folder."""
    state = _start(args, options, progress or NullProgress(), nsdiag_argv)
    sd = state.sd
    try:
        session = _run_phases(state)
    except (runner.Interrupted, KeyboardInterrupt) as exc:
        # SIGINT, or SIGTERM through the CLI's handler: save what was recorded, never a
        # traceback; the folder says which signal stopped which phase and what is missing
        signame = exc.signame if isinstance(exc, runner.Interrupted) else interrupting_signal(exc)
        when = interruption.where(state)
        interruption.record(state, signame)
        # what ncu profiled before the signal is kept: its reports are exported (a second
        # signal is ignored meanwhile: cli/signals.py), except when the exports were running
        finish_quietly(state, export=interruption.exports_kept(state))
        kept = (
            f"the partial session is kept in {sd.root}"
            if store.is_session_dir(sd.root)
            else f"nothing was recorded ({sd.root / 'status.json'} says so)"
        )
        raise runner.Interrupted(
            f"interrupted by {signame} during {when}; {kept}",
            getattr(exc, "hint", "") or "run again to profile everything",
            signame,
        ) from exc
    except NsdiagError as exc:
        state.status.error = str(exc)
        finish_quietly(state, export=True)
        raise
    except BaseException:
        state.status.error = "nsdiag failed unexpectedly"
        state.status.save(sd)
        raise
    return ProfileResult(
        sd.root, tuple(state.status.missing), state.plan, session, state.timings, state.profiled
    )


def _start(
    args: Sequence[str], options: ProfileOptions, progress: Progress, nsdiag_argv: Sequence[str]
) -> RunState:
    """Find the tools, create the session folder and write what is known before anything runs."""
    program, _ = resolve_program(args)
    start = profile_from_start(options.profile_from_start)
    with ThreadPoolExecutor(max_workers=1) as pool:  # nvidia-smi while the tools' versions run
        device = pool.submit(gpu_info)
        ncu = tools.find_tool("ncu", options.ncu)
        nsys = tools.find_optional("nsys", options.nsys)
        when = datetime.now()
        sd = session_dir.create(options.output, program, when)
        session_dir.write_command(sd, nsdiag_argv, program, when)
        session_dir.write_env(sd, tools.describe([ncu, nsys]))
        session_dir.write_device(sd, device.result())
    state = RunState(program, start, options, progress, sd, ncu, nsys)
    state.status.save(sd)
    return state


def _run_phases(state: RunState) -> Session | None:
    if not state.options.full and state.options.sections == "rules":
        state.metric_listing = tools.query_metrics_soon(state.ncu.path)
    state.standby = _standby(state)
    try:
        return _phases(state)
    finally:
        for waiting in state.standbys:
            waiting.end()  # never left waiting: interrupt, error or a plan without it
        if state.stager is not None:  # a run that ended before its tables were saved
            state.stager.discard()


def _standby(state: RunState) -> standby.Standby | None:
    """Phase 2's first program, started now under `ncu --mode launch` (standby.py)."""
    options = state.options
    if options.full or state.nsys is None:
        return None
    if not standby.usable(
        state.program, profile_from_start=state.start, sequential=options.sequential
    ):
        return None
    return state.start_standby("2-standby")


def _processes(launches: pd.DataFrame | None) -> int:
    """Processes that launched kernels in phase 1 (the attaching ncu follows only one)."""
    if launches is None or "process_id" not in launches:
        return 1
    return int(launches["process_id"].nunique())


def _phases(state: RunState) -> Session | None:
    options = state.options
    with state.timed("phase1"):
        launches, program_s = phase1.timeline(state, fallback=not options.full)
    state.launches = launches
    if state.standby is not None and (state.devices or _processes(launches) > 1 or not state.start):
        # several processes (ncu follows them from the start instead), or a profiler range
        # found (its --profile-from-start off was not tried on an attach)
        state.standby.end()
        state.standby = None
    if launches is not None and launches.empty:
        raise ProfilerError(
            "the program launched no CUDA kernel"
            + (" in the profiled region" if not state.start else "")
            + (f" inside NVTX range {options.nvtx!r}" if options.nvtx else ""),
            "check that it uses the GPU, and that --region or --nvtx names a part of the run "
            "that launches kernels",
        )
    if options.full:
        with state.timed("phase2"):
            phase2.full(state, len(launches) if launches is not None else None, program_s)
    else:
        assert launches is not None
        phase2.targeted(state, launches, program_s)  # times its plan and its runs
    state.status.complete = True
    return finish(state)
