"""Reader for session folders (nsdiag profile's, nsdiag load's): the tables through
nsdiag.model.store, after checking that each file is a plausible regular file, and what the
folder's status.json says about the profile behind them.

A profile that ended incomplete (a kernel signature the plan wanted was never reached, a step
failed) still has a diagnosis, of what was recorded: its status becomes a warning on it.
"""

from __future__ import annotations

import json
from pathlib import Path

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
    parts = [f"missing {'; '.join(map(str, missing))}" if missing else ""]
    if status.get("error"):
        parts.append(f"error: {status['error']}")
    said = "; ".join(p for p in parts if p) or "no reason given"
    return [
        f"the profile in {directory} is incomplete ({STATUS}: {said}); "
        "the findings cover only what was recorded"
    ]
