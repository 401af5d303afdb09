"""What an interrupted run (SIGINT or SIGTERM, in any phase) records before it ends: the signal,
the phase and command it stopped, and what the session therefore lacks, so the folder explains
itself (`nsdiag explain` shows it as the incomplete-profile warning, or says in one line that
nothing was recorded)."""

from __future__ import annotations

import time

from nsdiag.collect.run_state import RunState

PHASES = {
    "start": "start-up",
    "phase1": "phase 1 (timeline)",
    "plan": "planning phase 2",
    "phase2": "phase 2 (ncu)",
    "export": "the exports of ncu's reports",
    "tables": "writing the tables",
}


def where(state: RunState) -> str:
    """The phase (and command) the run is in, in words."""
    phase = PHASES.get(state.phase, state.phase)
    return f"{phase}, running {state.step}" if state.step else phase


def record(state: RunState, signame: str) -> None:
    """Mark the status interrupted by `signame` and say what is missing because of it."""
    status, when = state.status, where(state)
    status.error = f"interrupted by {signame} during {when}"
    status.interrupted = {"signal": signame, "phase": state.phase, "step": state.step}
    if state.step is not None:  # the command it stopped, with the seconds it had run
        status.step(
            state.step,
            False,
            time.monotonic() - state.step_started,
            state.sd.log(state.step),
            interrupted=signame,
        )
    because = f"interrupted by {signame} during {when}"
    if state.phase in ("start", "phase1"):
        if state.phase1_timeline is None:
            written = state.sd.report("timeline.nsys-rep")
            kept = (
                f"; nsys wrote {written}, which `nsdiag explain` can read"
                if written.is_file()
                else ""
            )
            status.lacks(f"timeline ({because}, before it was recorded{kept})")
        status.lacks(f"kernel metrics ({because}; ncu did not profile the planned launches)")
    elif exports_kept(state):
        reports = ", ".join(r.name for r in state.reports)
        status.lacks(
            f"kernel metrics ({because}; what ncu had profiled is kept: {reports})"
            if reports
            else f"kernel metrics ({because}; ncu had written no report)"
        )
    elif state.phase in ("plan", "phase2", "export"):
        reports = ", ".join(r.name for r in state.reports)
        kept = f"; finished reports kept unexported in reports/: {reports}" if reports else ""
        status.lacks(f"kernel metrics ({because}; nothing from ncu was exported{kept})")
    status.save(state.sd)


def exports_kept(state: RunState) -> bool:
    """Whether an interrupted run still exports the reports ncu wrote: in phase 2 (its runs'
    reports, the interrupted one's too when ncu wrote it on the signal), not once the exports
    themselves were running."""
    return state.phase == "phase2"
