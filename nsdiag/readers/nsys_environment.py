"""Where and when an nsys report was recorded, and the launcher's rank variables in the
environment of the process nsys started: what merging one report per rank needs
(readers/ranks.py). Only those variables are kept: an environment holds secrets.
"""

from __future__ import annotations

import re
import sqlite3

from nsdiag.model.rank_variables import RANK_DIGITS, RANK_VARIABLES
from nsdiag.readers.sqlite_query import Schema, select

_RANK_VARIABLE = re.compile(rf"(?:^|;)({'|'.join(RANK_VARIABLES)})=\"?(\d+)")


def recording(
    con: sqlite3.Connection, schema: Schema
) -> tuple[str | None, int | None, dict[str, int] | None]:
    """Where and when the report was recorded, for merging one report per rank: the host, the
    session's start (UTC ns: every timestamp counts from it) and the launcher's rank variables
    in the environment of the process nsys started (only those: an environment holds secrets);
    None for what the export does not say."""
    host: str | None = None
    start: int | None = None
    system = (
        dict(select(con, "TARGET_INFO_SYSTEM_ENV", "name, value"))
        if {"name", "value"} <= schema.get("TARGET_INFO_SYSTEM_ENV", {}).keys()
        else {}
    )
    if system.get("Hostname"):
        host = str(system["Hostname"])
    if "utcEpochNs" in schema.get("TARGET_INFO_SESSION_START_TIME", {}):
        rows = select(con, "TARGET_INFO_SESSION_START_TIME", "utcEpochNs")
        if rows and rows[0][0] is not None:
            start = int(rows[0][0])
    captured = (
        [
            str(v)
            for (v,) in select(
                con, "META_DATA_CAPTURE", "value", "name LIKE '%ENVIRONMENT_VARIABLE'"
            )
        ]
        if {"name", "value"} <= schema.get("META_DATA_CAPTURE", {}).keys()
        else []
    )
    # nsys's own environment (DeviceEnvironment) when the capture lists none
    texts = captured or [str(system.get("DeviceEnvironment", ""))]
    # a number no launcher gives (RANK=99999999999999999999) is not a rank: left out
    found = {
        m[1]: int(m[2])
        for text in texts
        for m in _RANK_VARIABLE.finditer(text)
        if len(m[2]) <= RANK_DIGITS
    }
    return host, start, found or None
