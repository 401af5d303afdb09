"""A Session's meta: where its tables came from and what recorded them, typed and frozen.

Readers fill the fields they know and leave the others unset (None; empty for `sources` and
`warnings`); code derives a changed meta with `dataclasses.replace`. On disk (session.json,
nsdiag/model/store.py) meta is a JSON object whose keys are the field names, holding only the
fields that are set, as earlier versions wrote it: `to_json` and `from_json` convert, and a key
this version does not know is kept in `extra` (and written back), so folders written by other
versions stay readable both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Source:
    """One input a session was read from."""

    path: str
    # the reader: ncu-raw-csv, ncu-details-csv, ncu-rep, nsys-sqlite, nsys-rep,
    # nsys-stats-<report>
    format: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "format": self.format}

    @classmethod
    def from_json(cls, data: Record) -> Source:
        return cls(str(data.get("path", "")), str(data.get("format", "")))


@dataclass(frozen=True)
class Rank:
    """One rank: where it ran and how its number was found."""

    rank: int
    process_id: int
    device: int
    host: str = ""
    source: str = ""  # the report it came from
    # how the number was found: env (RANK, SLURM_PROCID, ... in its environment), file-name,
    # file-order, or process-order (the processes of one trace, by process id)
    rank_from: str = "process-order"

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "process_id": self.process_id,
            "device": self.device,
            "host": self.host,
            "source": self.source,
            "rank_from": self.rank_from,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Rank:
        return cls(
            int(data["rank"]),
            int(data.get("process_id", 0)),
            int(data.get("device", 0)),
            str(data.get("host", "")),
            str(data.get("source", "")),
            str(data.get("rank_from", "process-order")),
        )


@dataclass(frozen=True)
class SessionMeta:
    """What a session knows besides its tables. Every field is optional: None (or empty) where
    no input said."""

    sources: tuple[Source, ...] = ()
    # The (first) profiled GPU: name, cc ('9.0'), sm_count; from nsys also id, clock_hz,
    # memory_bandwidth_bytes_per_s, l2_bytes, total_memory_bytes, bus, chip, async_engines,
    # cuda_device. An input that names no GPU may give {}.
    device: Record | None = None
    devices: tuple[Record, ...] | None = None  # every GPU of the nsys report, as `device`
    warnings: tuple[str, ...] = ()  # what the readers found wrong in the inputs, each once
    nsys_version: str | None = None  # of the nsys that exported the report
    # the timeline's core tables the nsys export lacks ('kernels', 'api_calls'): what they
    # would hold is unknown, not absent
    missing_tables: tuple[str, ...] | None = None
    host: str | None = None  # the host an nsys report was recorded on
    session_start_utc_ns: int | None = None  # its start (its timestamps count from it), UTC
    rank_env: Mapping[str, int] | None = None  # launcher variables (RANK, SLURM_PROCID, ...)
    ranks: tuple[Rank, ...] | None = None  # the ranks of a distributed run (None: not assigned)
    hosts: tuple[str, ...] | None = None  # the hosts of the ranks, when several reports merged
    rank_time_axis: str | None = None  # set when the ranks' reports could not be aligned
    command: tuple[str, ...] | str | None = None  # the profiled command line (nsdiag profile)
    profiled_at: str | None = None  # when, ISO 8601 local time
    tools: Mapping[str, Mapping[str, str]] | None = None  # tool -> {path, version}
    profile_mode: str | None = None  # targeted or full
    # nsys stats summary reports: their rows in base units (no start times: not a timeline)
    nsys_cuda_gpu_kern_sum: tuple[Record, ...] | None = None
    nsys_cuda_api_sum: tuple[Record, ...] | None = None
    nsys_cuda_gpu_mem_time_sum: tuple[Record, ...] | None = None
    nsys_cuda_gpu_mem_size_sum: tuple[Record, ...] | None = None
    nsys_nvtx_sum: tuple[Record, ...] | None = None
    # keys of a session.json this version does not know, kept as they were
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON object session.json holds: the fields that are set, then `extra`."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and _is_set(f.name, value):
                out[f.name] = _TO_JSON.get(f.name, _plain)(value)
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionMeta:
        """A meta from its JSON object. Unknown keys go to `extra`; a missing key leaves its
        field unset; a value of the wrong type is a ValueError naming the key."""
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key not in _FIELDS:
                extra[str(key)] = value
            elif value is not None:
                try:
                    known[key] = _FROM_JSON.get(key, _plain)(value)
                except (TypeError, ValueError, KeyError, AttributeError) as exc:
                    raise ValueError(f"meta key {key!r} has a value of the wrong type") from exc
        return cls(**known, extra=extra)


def first_present(metas: Iterable[SessionMeta]) -> SessionMeta:
    """Each field from the first meta that sets it (the meta of several inputs merged, the
    first input's values winning); `extra` keys likewise."""
    chosen: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for meta in metas:
        for name in _FIELDS:
            value = getattr(meta, name)
            if name not in chosen and _is_set(name, value):
                chosen[name] = value
        extra = {**meta.extra, **extra}
    return replace(SessionMeta(), **chosen, extra=extra)


def _is_set(name: str, value: Any) -> bool:
    """Whether an input said it: not None (for the lists every input adds to, not empty)."""
    return bool(value) if name in _LISTS else value is not None


_LISTS = ("sources", "warnings")


def _plain(value: Any) -> Any:
    """Tuples and mappings as JSON lists and objects (nested too)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError("not an object")
    return {str(k): v for k, v in value.items()}


def _records(value: Any) -> tuple[Record, ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError("not a list")
    return tuple(_mapping(v) for v in value)


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError("not a list")
    return tuple(str(v) for v in value)


def _text(value: Any) -> str:
    return str(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("not an integer")
    return value


def _command(value: Any) -> tuple[str, ...] | str:
    return _strings(value) if isinstance(value, (list, tuple)) else str(value)


_FROM_JSON: dict[str, Callable[[Any], Any]] = {
    "sources": lambda v: tuple(Source.from_json(s) for s in _records(v)),
    "device": _mapping,
    "devices": _records,
    "warnings": _strings,
    "nsys_version": _text,
    "missing_tables": _strings,
    "host": _text,
    "session_start_utc_ns": _integer,
    "rank_env": lambda v: {k: int(n) for k, n in _mapping(v).items()},
    "ranks": lambda v: tuple(Rank.from_json(r) for r in _records(v)),
    "hosts": _strings,
    "rank_time_axis": _text,
    "command": _command,
    "profiled_at": _text,
    "tools": lambda v: {k: _mapping(t) for k, t in _mapping(v).items()},
    "profile_mode": _text,
    "nsys_cuda_gpu_kern_sum": _records,
    "nsys_cuda_api_sum": _records,
    "nsys_cuda_gpu_mem_time_sum": _records,
    "nsys_cuda_gpu_mem_size_sum": _records,
    "nsys_nvtx_sum": _records,
}
_TO_JSON: dict[str, Callable[[Any], Any]] = {
    "sources": lambda v: [s.to_json() for s in v],
    "ranks": lambda v: [r.to_json() for r in v],
}
_FIELDS = tuple(f.name for f in fields(SessionMeta) if f.name != "extra")
