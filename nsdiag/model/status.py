"""A profile's status.json: what its session folder holds and how the run went.

`nsdiag profile` rewrites it after every step (collect/session_dir.py builds it), so a run that
failed or was interrupted still says what it recorded; readers/session_folder.py reads it, to
warn about an incomplete profile or to say why a folder without session.json holds nothing.

On disk it is one JSON object; its keys, in the order they are written: schema, complete,
missing, error, steps, plan, coverage, rule_metrics, region, rank (a distributed run only),
estimate, budget, interrupted, breakdown, pytorch_ranges (a PyTorch program only), phase2_limit
(once phase 2 ran targeted). Every version wrote schema to coverage; folders
written before the later keys existed (tests/data/**/status.json) lack them, and a missing key
reads as unset. A key this version does not know is kept in `extra` (and written back), so a
status a later version wrote stays readable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

STATUS = "status.json"
SCHEMA = "nsdiag.status/1"
_FAMILY = "nsdiag.status/"  # every version's schema starts so (the first one wrote it too)

Record = Mapping[str, Any]


@dataclass(frozen=True)
class ProfileStatus:
    """What status.json says. `complete` only when every step ran, nothing is missing and no
    error stopped the run."""

    complete: bool = False
    missing: tuple[str, ...] = ()  # what the session lacks, a line each
    error: str | None = None  # what stopped the run
    steps: tuple[Record, ...] = ()  # each command run, in order: name, ok, wall_s, log, ...
    plan: Record | None = None  # phase 2's plan (collect/plan.py)
    coverage: Record | None = None  # what the profiled launches cover (collect/finish.py)
    rule_metrics: int | None = None  # rule metrics requested by name in phase 2
    region: Record | None = None  # the analysed region phase 2 picked its launches in
    rank: Record | None = None  # a distributed run: the rank phase 2 profiled
    estimate: Record | None = None  # phase 2's expected wall time, before it ran
    budget: Record | None = None  # --budget: what it kept and left out
    interrupted: Record | None = None  # the signal, and the phase and step it stopped
    breakdown: Record | None = None  # where the time went (collect/breakdown.py)
    # a PyTorch program: {"asked", "recorded"[, "reason", "log"]}, whether phase 1's timeline
    # has the PyTorch functions' NVTX ranges (collect/phase1.py: without them when they broke
    # the program)
    pytorch_ranges: Record | None = None
    # phase 2's wall-clock limit: {"seconds", "source", "reached", "skipped_runs"}
    # (collect/early_stop.py)
    phase2_limit: Record | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this version does not know

    def to_json(self) -> dict[str, Any]:
        """The JSON object status.json holds."""
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "complete": self.complete,
            "missing": list(self.missing),
            "error": self.error,
            "steps": [dict(s) for s in self.steps],
            "plan": _plain(self.plan),
            "coverage": _plain(self.coverage),
            "rule_metrics": self.rule_metrics,
            "region": _plain(self.region),
            **({"rank": _plain(self.rank)} if self.rank is not None else {}),
            "estimate": _plain(self.estimate),
            "budget": _plain(self.budget),
            "interrupted": _plain(self.interrupted),
            "breakdown": _plain(self.breakdown),
            **({"pytorch_ranges": _plain(self.pytorch_ranges)} if self.pytorch_ranges else {}),
            **({"phase2_limit": _plain(self.phase2_limit)} if self.phase2_limit else {}),
        }
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    @classmethod
    def from_json(cls, data: Any) -> ProfileStatus:
        """The status a JSON value holds. A ValueError says why it is none nsdiag wrote: not an
        object, no nsdiag.status schema, `complete` not true or false, a field of the wrong
        type. A hand-edited `missing` that is no list reads as one line."""
        if not isinstance(data, Mapping):
            raise ValueError("it is not a JSON object")
        schema = data.get("schema")
        if not (isinstance(schema, str) and schema.startswith(_FAMILY)):
            raise ValueError(f"its schema is {schema!r}, not {SCHEMA}")
        known: dict[str, Any] = {}
        for key, read in _FROM_JSON.items():
            if key in data:
                try:
                    known[key] = read(data[key])
                except TypeError as exc:
                    raise ValueError(f"its {key!r} is {exc}") from None
        if "complete" not in known:
            raise ValueError("it has no 'complete'")
        extra = {str(k): v for k, v in data.items() if k not in _FROM_JSON and k != "schema"}
        return cls(**known, extra=extra)


def _plain(value: Record | None) -> dict[str, Any] | None:
    return dict(value) if value is not None else None


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("not true or false")
    return value


def _lines(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(map(str, value)) if isinstance(value, list) else (str(value),)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _steps(value: Any) -> tuple[Record, ...]:
    if not isinstance(value, list) or not all(isinstance(s, Mapping) for s in value):
        raise TypeError("not a list of objects")
    return tuple(dict(s) for s in value)


def _object(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, Mapping):
        raise TypeError("not an object")
    return _plain(value)


def _count(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError("not a whole number")
    return value


_FROM_JSON: dict[str, Callable[[Any], Any]] = {
    "complete": _boolean,
    "missing": _lines,
    "error": _text,
    "steps": _steps,
    "plan": _object,
    "coverage": _object,
    "rule_metrics": _count,
    "region": _object,
    "rank": _object,
    "estimate": _object,
    "budget": _object,
    "interrupted": _object,
    "breakdown": _object,
    "pytorch_ranges": _object,
    "phase2_limit": _object,
}
