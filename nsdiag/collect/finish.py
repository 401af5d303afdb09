"""The end of a run, complete or not: export what ncu recorded, assemble one Session with the
timeline's weights and the plan's coverage, save its tables and the final status."""

from __future__ import annotations

from datetime import datetime

from nsdiag.collect import session_dir, tools
from nsdiag.collect.exports import csv_for, export_reports
from nsdiag.collect.run_state import RunState
from nsdiag.collect.weights import coverage, timeline_weights
from nsdiag.errors import NsdiagError
from nsdiag.model.session import Session


def finish(state: RunState, export: bool = True) -> Session | None:
    if export:
        exported = {raw.name for raw, _ in state.exported}
        with state.timed("export"):
            export_reports(
                state, [r for r in state.reports if csv_for(r, "raw").name not in exported]
            )
    with state.timed("tables"):
        try:
            session = _tables(state)
        finally:
            if state.stager is not None:
                state.stager.discard()
                state.stager = None
    state.status.save(state.sd)  # after the phase ended: with its seconds
    return session


def _tables(state: RunState) -> Session | None:
    meta = {
        "command": tuple(state.program),
        "profiled_at": datetime.now().isoformat(timespec="seconds"),
        "tools": tools.describe([state.ncu, state.nsys]),
        "profile_mode": "full" if state.options.full else "targeted",
    }
    session = session_dir.assemble(state.exported, state.phase1_timeline, meta)
    if session is not None:
        _weigh(state, session)
        staged = state.stager.take() if state.stager is not None else None
        session_dir.save_tables(state.sd, session, staged)
    else:
        state.status.lacks("tables (nothing was recorded)")
    return session


def _weigh(state: RunState, session: Session) -> None:
    """The timeline's weights on the profiled launches, and which planned signatures are missing."""
    if state.launches is not None and len(session.kernels):
        session.kernels = timeline_weights(session.kernels, state.launches)
    if state.plan is not None:
        state.status.coverage = covered = coverage(state.plan, session)
        if covered["missing"]:
            state.status.lacks(
                f"metrics of {len(covered['missing'])} planned kernel signature(s) "
                f"({covered['missing_share']:.1%} of GPU time)"
            )


def finish_quietly(state: RunState, export: bool) -> None:
    """Keep what was recorded; a failure here must not hide the original error."""
    try:
        finish(state, export=export)
    except (NsdiagError, OSError, ValueError, KeyError):
        state.status.lacks("tables (the partial reports could not be read)")
        state.status.save(state.sd)
