"""The Session: tidy tables of one profiled program, independent of the input format, and its
check against the schema (nsdiag/model/schema.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from nsdiag.model.catalogue import IDENTITY_COLUMNS
from nsdiag.model.meta import SessionMeta
from nsdiag.model.schema import (
    API_CALLS,
    NVTX_RANGES,
    RULE_RESULTS,
    TABLES,
    TIMELINE,
    SchemaError,
    table_problems,
)

# The tables' columns as readers write them (nsdiag/model/schema.py says what each holds).
RULE_RESULT_COLUMNS = RULE_RESULTS.required
TIMELINE_COLUMNS = TIMELINE.required
API_COLUMNS = API_CALLS.required
NVTX_COLUMNS = NVTX_RANGES.required


def empty_frame(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


@dataclass
class Session:
    """One profiled program. Each table's columns: nsdiag/model/schema.py.

    kernels:      one row per profiled kernel launch: identity columns and canonical metrics
                  (base units). Missing metrics are NaN columns or absent, never errors.
    raw:          every ncu metric of each launch by its ncu name, base units, same row order as
                  `kernels` (so nothing a report held is lost).
    raw_units:    ncu metric name -> base unit.
    rule_results: ncu's own rule results (a second opinion), one row per rule message.
    timeline:     GPU activities from nsys (kernels, copies, memsets).
    api_calls:    CUDA runtime/driver calls from nsys (synchronisation among them).
    nvtx_ranges:  NVTX push/pop and start/end ranges.
    meta:         device, tool versions, command line, sources (nsdiag/model/meta.py); frozen:
                  derive a changed one with dataclasses.replace.
    """

    kernels: pd.DataFrame = field(default_factory=lambda: empty_frame(IDENTITY_COLUMNS))
    raw: pd.DataFrame = field(default_factory=pd.DataFrame)
    raw_units: dict[str, str] = field(default_factory=dict)
    rule_results: pd.DataFrame = field(default_factory=lambda: empty_frame(RULE_RESULT_COLUMNS))
    timeline: pd.DataFrame = field(default_factory=lambda: empty_frame(TIMELINE_COLUMNS))
    api_calls: pd.DataFrame = field(default_factory=lambda: empty_frame(API_COLUMNS))
    nvtx_ranges: pd.DataFrame = field(default_factory=lambda: empty_frame(NVTX_COLUMNS))
    meta: SessionMeta = field(default_factory=SessionMeta)

    def __post_init__(self) -> None:
        if not isinstance(self.meta, SessionMeta):
            raise TypeError(
                f"Session.meta is a SessionMeta, not {type(self.meta).__name__} "
                "(SessionMeta.from_json reads a dict)"
            )
        # The model checks its own invariant: raw rows line up with kernel rows.
        if len(self.raw) and len(self.raw) != len(self.kernels):
            raise ValueError(f"raw has {len(self.raw)} rows but kernels has {len(self.kernels)}")

    def has_kernels(self) -> bool:
        return len(self.kernels) > 0

    def has_timeline(self) -> bool:
        return len(self.timeline) > 0

    def metric(self, name: str) -> pd.Series:
        """A canonical metric column, NaN where the reports lacked it."""
        if name in self.kernels.columns:
            return self.kernels[name]
        return pd.Series(float("nan"), index=self.kernels.index, name=name)


def session_problems(session: Session) -> list[str]:
    """What in the session's tables breaks the schema ([] when nothing does)."""
    return [p for name, t in TABLES.items() for p in table_problems(getattr(session, name), t)]


def check_session(session: Session, reader: str) -> Session:
    """The session, after checking it against the schema; `reader` names who made it (for the
    error: a module, and the input it read)."""
    problems = session_problems(session)
    if problems:
        raise SchemaError(reader, problems)
    return session
