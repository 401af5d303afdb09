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
from typing import Any

from nsdiag.errors import InputError
from nsdiag.model import store
from nsdiag.model.session import Session
from nsdiag.readers import source
from nsdiag.readers.merge import add_warnings

STATUS = "status.json"


def read(directory: Path) -> Session:
    for path in (directory / store.MANIFEST, *(directory / "tables").glob("*")):
        source.check_file(path)
    session = store.load(directory)
    add_warnings(session, status_warnings(directory))
    return session


def not_a_session(directory: Path) -> InputError:
    """The error for a folder without session.json: what its status.json says happened when
    `nsdiag profile` wrote it (stopped before anything was recorded), else that it is no session."""
    status = _status(directory)
    if status is None:
        return InputError(
            f"{directory} is a folder but not an nsdiag session (no session.json)",
            "pass the session folder nsdiag profile wrote, or the report files themselves",
        )
    missing = status.get("missing")
    listed = "; ".join(map(str, missing)) if isinstance(missing, list) else ""
    said = str(status.get("error") or listed or "no reason given")
    nsys_rep = directory / "reports" / "timeline.nsys-rep"
    hint = "run nsdiag profile again" + (
        f", or explain the timeline nsys wrote: nsdiag explain {nsys_rep}"
        if nsys_rep.is_file()
        else ""
    )
    return InputError(
        f"the profile in {directory} recorded nothing to explain ({STATUS}: {said})", hint
    )


def _status(directory: Path) -> dict[str, Any] | None:
    """The folder's status.json if it is one nsdiag wrote and is readable, else None."""
    path = directory / STATUS
    if not path.is_file() or path.is_symlink():
        return None
    try:
        with source.open_text(path) as handle:
            status = json.loads(handle.read())
    except (InputError, ValueError, OSError):
        return None
    ok = isinstance(status, dict) and str(status.get("schema", "")).startswith("nsdiag.status/")
    return status if ok else None


def status_warnings(directory: Path) -> list[str]:
    """What status.json says is missing from the profile ([] when it is complete or absent:
    folders written by `nsdiag load` have none)."""
    path = directory / STATUS
    if not path.exists() and not path.is_symlink():
        return []
    try:
        with source.open_text(path) as handle:
            status = json.loads(handle.read())
    except (InputError, ValueError) as exc:
        return [f"{path} is unreadable ({exc}): whether the profile completed is unknown"]
    if not isinstance(status, dict) or not isinstance(status.get("complete", True), bool):
        return [f"{path} is not a status nsdiag wrote: whether the profile completed is unknown"]
    if status.get("complete", True):
        return []
    missing = status.get("missing") or []
    if not isinstance(missing, list):  # a hand-edited status: say what it holds
        missing = [missing]
    parts = [f"missing {'; '.join(map(str, missing))}" if missing else ""]
    if status.get("error"):
        parts.append(f"error: {status['error']}")
    said = "; ".join(p for p in parts if p) or "no reason given"
    return [
        f"the profile in {directory} is incomplete ({STATUS}: {said}); "
        "the findings cover only what was recorded"
    ]
