"""Reader for session folders (nsdiag profile's, nsdiag load's): the tables through
nsdiag.model.store, after checking that each file is a plausible regular file, and what the
folder's status.json says about the profile behind them.

A profile that ended incomplete (a kernel signature the plan wanted was never reached, a step
failed, a signal stopped it) still has a diagnosis, of what was recorded: its status becomes a
warning on it. A profile stopped before it recorded anything has no session.json, only its
status: reading it says in one line what happened.
"""

from __future__ import annotations

import json
from pathlib import Path

from nsdiag.errors import InputError
from nsdiag.model import store
from nsdiag.model.session import Session
from nsdiag.model.status import STATUS, ProfileStatus
from nsdiag.readers import source
from nsdiag.readers.merge import add_warnings


def read(directory: Path) -> Session:
    # session.json deleted: store.load reads the tables alone (and says so in a warning)
    manifest = directory / store.MANIFEST
    known = (manifest,) if manifest.exists() or manifest.is_symlink() else ()
    for path in (*known, *(directory / "tables").glob("*")):
        source.check_file(path)
    session = store.load(directory)
    add_warnings(session, status_warnings(directory))
    return session


def read_status(directory: Path) -> ProfileStatus | None:
    """The folder's status.json (None: it has none, as folders `nsdiag load` wrote); an
    InputError when it is unreadable or not a status nsdiag wrote."""
    path = directory / STATUS
    if not path.exists() and not path.is_symlink():
        return None
    try:
        with source.open_text(path) as handle:
            data = json.loads(handle.read())
    except (InputError, ValueError, OSError) as exc:
        raise InputError(f"{path} is unreadable ({exc})", _AGAIN) from exc
    try:
        return ProfileStatus.from_json(data)
    except ValueError as exc:
        raise InputError(f"{path} is not a status nsdiag wrote ({exc})", _AGAIN) from exc


_AGAIN = "run nsdiag profile again"


def not_a_session(directory: Path) -> InputError:
    """The error for a folder without session.json: what its status.json says happened when
    `nsdiag profile` wrote it (stopped before anything was recorded), else that it is no session."""
    tables = directory / "tables"
    if tables.is_dir():  # session.json deleted, and the tables cannot stand in for it
        missing = [t for t in store.TABLES if not (tables / f"{t}.csv.gz").is_file()]
        cut = (directory / store.LOCK).exists()
        what = (
            f"tables/ lacks {', '.join(f'{t}.csv.gz' for t in missing)}"
            if missing
            else f"a save into it was cut short ({store.LOCK} is there)"
            if cut
            else "its tables are unreadable"
        )
        return InputError(
            f"{directory} has no {store.MANIFEST} and {what}: nothing to read the session from",
            f"nsdiag load -o NEW_FOLDER {directory / 'reports'}/* rebuilds it from the reports "
            "nsdiag profile kept; else run nsdiag profile again",
        )
    try:
        status = read_status(directory)
    except InputError:
        status = None
    if status is None:
        return InputError(
            f"{directory} is a folder but not an nsdiag session (no session.json)",
            "pass the session folder nsdiag profile wrote, or the report files themselves",
        )
    said = status.error or "; ".join(status.missing) or "no reason given"
    nsys_rep = directory / "reports" / "timeline.nsys-rep"
    hint = "run nsdiag profile again" + (
        f", or explain the timeline nsys wrote: nsdiag explain {nsys_rep}"
        if nsys_rep.is_file()
        else ""
    )
    return InputError(
        f"the profile in {directory} recorded nothing to explain ({STATUS}: {said})", hint
    )


def status_warnings(directory: Path) -> list[str]:
    """What status.json says is missing from the profile ([] when it is complete or absent)."""
    try:
        status = read_status(directory)
    except InputError as exc:
        return [f"{exc.message}: whether the profile completed is unknown"]
    if status is None or status.complete:
        return []
    parts = [f"missing {'; '.join(status.missing)}" if status.missing else ""]
    if status.error:
        parts.append(f"error: {status.error}")
    said = "; ".join(p for p in parts if p) or "no reason given"
    return [
        f"the profile in {directory} is incomplete ({STATUS}: {said}); "
        "the findings cover only what was recorded"
    ]
