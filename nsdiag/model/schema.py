"""The Session's data contract: each table's columns (dtype, unit, meaning, required or not) and
the vocabularies of its coded columns, written down once, so that a reader can be written from
this file alone and an analysis knows what it may rely on.

- A table with rows has every required column of its schema; an optional column may be absent
  (an analysis that reads one tests that it is there). Columns the schema does not name are
  allowed and carry nothing an analysis may rely on.
- A table without rows may lack its columns (a session folder stores an empty table bare).
- A value may be missing (NaN, None) in any column unless its meaning says otherwise; integer
  ids and times use -1 for "unknown" where the column says so.
- A coded column holds only its vocabulary's values, or a missing value. A reader maps a code
  it does not recognise to `unknown` (`known`), never invents one.
- Times are ns since the recording started (one report per rank: since the earliest rank's
  start); sizes are bytes; every metric is in its base unit.

`check_session` (nsdiag/model/session.py) checks a Session against the contract: `readers.load`
calls it on every reader's output and on a merge of several, `model.store.load` on every session
folder read.
A reader that breaks the contract is a bug in nsdiag: `SchemaError` names the reader, the table
and the column.

The kernels table (ncu) holds identity columns, the canonical metrics of the catalogue
(nsdiag/model/catalogue.py: each metric's name, unit and meaning; numeric, in base units) and
the timeline's weights; the `raw` table holds every ncu metric by its ncu name, one row per
kernel row, its units in `Session.raw_units`. The session's `meta` is typed by
nsdiag/model/meta.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from nsdiag.model.catalogue import CATALOGUE

UNKNOWN = "unknown"

# What a row of the timeline is.
ACTIVITY_KINDS: Mapping[str, str] = {
    "kernel": "a kernel launch",
    "memcpy": "a memory copy",
    "memset": "a memory set",
}
# A copy's direction (CUPTI's CUpti_ActivityMemcpyKind, as nsys labels it): H host, D device,
# A CUDA array, P peer device, UVM_ a unified-memory migration.
COPY_KINDS: Mapping[str, str] = {
    "HtoD": "host to device",
    "DtoH": "device to host",
    "HtoA": "host to CUDA array",
    "AtoH": "CUDA array to host",
    "AtoA": "CUDA array to CUDA array",
    "AtoD": "CUDA array to device",
    "DtoA": "device to CUDA array",
    "DtoD": "device to device (same GPU)",
    "HtoH": "host to host",
    "PtoP": "peer to peer (between GPUs)",
    "UVM_HtoD": "unified memory migrated host to device",
    "UVM_DtoH": "unified memory migrated device to host",
    "UVM_DtoD": "unified memory migrated device to device",
    UNKNOWN: "a direction the profiler did not record or nsdiag does not know",
}
# The memory on either side of a copy or under a memset (CUPTI's CUpti_ActivityMemoryKind).
MEMORY_KINDS: Mapping[str, str] = {
    "pageable": "pageable host memory (a copy from it is staged through a pinned buffer)",
    "pinned": "page-locked host memory (cudaMallocHost, cudaHostRegister)",
    "device": "device memory (cudaMalloc)",
    "array": "a CUDA array",
    "managed": "unified memory (cudaMallocManaged)",
    "device_static": "statically allocated device memory (__device__ variables)",
    "managed_static": "statically allocated unified memory (__managed__ variables)",
    UNKNOWN: "a kind the profiler did not record or nsdiag does not know",
}
# What a synchronising CUDA call waited on (CUPTI's synchronisation records; informational).
SYNC_TYPES: Mapping[str, str] = {
    "event_synchronize": "cudaEventSynchronize",
    "stream_wait_event": "cudaStreamWaitEvent (nsys 2025.3 labels cudaStreamSynchronize so too)",
    "stream_synchronize": "cudaStreamSynchronize",
    "context_synchronize": "cudaDeviceSynchronize, cudaCtxSynchronize",
    UNKNOWN: "a type the profiler did not record or nsdiag does not know",
}

# Column dtypes: what a reader writes. A column is compatible when its pandas dtype is of the
# same family (any integer for int64, any number for float64, object or string for str), or
# when all its values are missing.
INT = "int64"
FLOAT = "float64"
TEXT = "str"
BOOL = "bool"


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # INT, FLOAT, TEXT or BOOL
    unit: str  # ns, bytes, id, count, ... ("" for text)
    meaning: str
    required: bool = True
    vocabulary: Mapping[str, str] | None = None  # the values it may hold (or missing)


@dataclass(frozen=True)
class TableSchema:
    name: str
    meaning: str
    columns: tuple[Column, ...]
    # kernels: numeric columns named in the metric catalogue (not listed here)
    catalogue_metrics: bool = False

    @property
    def required(self) -> tuple[str, ...]:
        """The required columns' names, in the order readers write them."""
        return tuple(c.name for c in self.columns if c.required)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


def _interval(what: str) -> tuple[Column, ...]:
    return (
        Column("start_ns", INT, "ns", f"When the {what} started."),
        Column("end_ns", INT, "ns", f"When the {what} ended (at or after its start)."),
        Column("duration_ns", INT, "ns", "end_ns - start_ns."),
    )


_RANK = Column(
    "rank",
    INT,
    "id",
    "The rank of the process (distributed runs only: absent for one process; -1 for a "
    "process that is not a rank).",
    required=False,
)

KERNELS = TableSchema(
    "kernels",
    "One row per profiled kernel launch (ncu), in report order; the canonical metrics of "
    "nsdiag/model/catalogue.py follow the identity columns, numeric, in the catalogue's units "
    "(a metric the report lacks is absent or NaN).",
    (
        Column("id", INT, "id", "The launch's row number in the session (0, 1, ...), unique."),
        Column("ncu_id", TEXT, "id", "ncu's launch ID in its report.", required=False),
        Column(
            "process_id", TEXT, "id", "The profiled process's id, as ncu prints it.", required=False
        ),
        Column("process_name", TEXT, "", "The profiled process's name.", required=False),
        Column("host", TEXT, "", "The host it ran on.", required=False),
        Column("name", TEXT, "", "The kernel's function name (ncu's base name)."),
        Column("demangled", TEXT, "", "The demangled name with its arguments (else the name)."),
        Column("context", TEXT, "id", "CUDA context id.", required=False),
        Column("stream", TEXT, "id", "CUDA stream id.", required=False),
        Column("grid", TEXT, "", "Grid size, '(x, y, z)'.", required=False),
        Column("block", TEXT, "", "Block size, '(x, y, z)'.", required=False),
        Column("device", TEXT, "id", "The GPU's index.", required=False),
        Column("cc", TEXT, "", "Compute capability, 'major.minor'.", required=False),
        Column(
            "nvtx_range",
            TEXT,
            "",
            "The innermost NVTX range around the launch (ncu --nvtx).",
            required=False,
        ),
        Column("source", TEXT, "", "The input file the launch was read from."),
        # The timeline's weights, set by nsdiag profile (model/matching.py timeline_weights).
        Column(
            "timeline_launches",
            FLOAT,
            "count",
            "Launches of the kernel's signature in the phase-1 timeline.",
            required=False,
        ),
        Column(
            "timeline_total_ns",
            FLOAT,
            "ns",
            "Their total GPU time in the phase-1 timeline.",
            required=False,
        ),
        Column(
            "timeline_variant",
            FLOAT,
            "id",
            "Which of the signature's duration groups the launch belongs to.",
            required=False,
        ),
        Column(
            "timeline_variants",
            FLOAT,
            "count",
            "How many duration groups the signature's launches fall in.",
            required=False,
        ),
    ),
    catalogue_metrics=True,
)

RAW = TableSchema(
    "raw",
    "Every ncu metric of each launch by its ncu name (base units, Session.raw_units), one row "
    "per kernels row in the same order, so nothing a report held is lost.",
    (),
)

RULE_RESULTS = TableSchema(
    "rule_results",
    "ncu's own rule results (a second opinion), one row per rule message.",
    (
        Column("id", INT, "id", "The launch's kernels.id."),
        Column("section", TEXT, "", "The ncu section the rule belongs to."),
        Column("rule", TEXT, "", "ncu's rule identifier."),
        Column("type", TEXT, "", "OPT, WRN, INF, ERR or NONE, as ncu's CSV export prints them."),
        Column("message", TEXT, "", "The rule's message (ncu's link markup flattened)."),
        Column("speedup_type", TEXT, "", "local, global or '' (none estimated)."),
        Column("speedup", FLOAT, "%", "ncu's estimated speedup."),
    ),
)

TIMELINE = TableSchema(
    "timeline",
    "One row per GPU activity (nsys): kernels, copies and memsets, ordered by start.",
    (
        Column("kind", TEXT, "", "What ran.", vocabulary=ACTIVITY_KINDS),
        *_interval("activity"),
        Column("device", INT, "id", "The GPU's index (CUDA device id)."),
        Column("context", INT, "id", "CUDA context id (-1: unknown)."),
        Column("stream", INT, "id", "CUDA stream id (-1: unknown)."),
        Column(
            "name",
            TEXT,
            "",
            "A kernel's name (demangled where known); '[CUDA memcpy Host-to-Device]' and the "
            "like for copies, '[CUDA memset]' for memsets.",
        ),
        Column("bytes", FLOAT, "bytes", "Bytes copied or set (missing for kernels)."),
        Column(
            "copy_kind", TEXT, "", "A copy's direction (missing for others).", vocabulary=COPY_KINDS
        ),
        Column(
            "src_kind",
            TEXT,
            "",
            "A copy's source memory (missing for others).",
            vocabulary=MEMORY_KINDS,
        ),
        Column(
            "dst_kind",
            TEXT,
            "",
            "A copy's or memset's destination memory.",
            vocabulary=MEMORY_KINDS,
        ),
        Column(
            "correlation_id",
            INT,
            "id",
            "CUPTI's correlation id: the same as its launching CUDA call's (-1: unknown).",
        ),
        Column("grid", TEXT, "", "A kernel's grid size, '(x, y, z)' (missing or '' for others)."),
        Column("block", TEXT, "", "A kernel's block size, '(x, y, z)'."),
        Column(
            "nvtx_range",
            TEXT,
            "",
            "The innermost NVTX range open on the launching thread when its launch call started "
            "(missing: none, or unknown).",
        ),
        Column("process_id", INT, "id", "The process that launched it (-1: unknown)."),
        Column(
            "short_name", TEXT, "", "A kernel's function name without arguments.", required=False
        ),
        Column(
            "mangled_name",
            TEXT,
            "",
            "A kernel's mangled name (what ncu --kernel-name-base mangled matches).",
            required=False,
        ),
        Column("thread_id", INT, "id", "The launching thread (-1: unknown).", required=False),
        Column(
            "api_start_ns",
            INT,
            "ns",
            "When its launching CUDA call started (-1: unknown).",
            required=False,
        ),
        Column(
            "api_end_ns",
            INT,
            "ns",
            "When its launching CUDA call ended (-1: unknown).",
            required=False,
        ),
        _RANK,
    ),
)

API_CALLS = TableSchema(
    "api_calls",
    "CUDA runtime and driver calls (nsys), ordered by start.",
    (
        Column("name", TEXT, "", "The function's name, without its _vN version suffix."),
        *_interval("call"),
        Column("thread_id", INT, "id", "The calling thread."),
        Column("process_id", INT, "id", "The calling process."),
        Column("correlation_id", INT, "id", "CUPTI's correlation id (its GPU activity's)."),
        Column(
            "is_sync",
            BOOL,
            "",
            "Whether the call blocks its thread until GPU work finishes (synchronisations and "
            "synchronous copies; not cudaStreamWaitEvent).",
        ),
        Column(
            "sync_type",
            TEXT,
            "",
            "What a synchronisation waited on (missing: no record).",
            required=False,
            vocabulary=SYNC_TYPES,
        ),
        Column(
            "stream",
            INT,
            "id",
            "The stream a synchronisation waited on (-1: no record).",
            required=False,
        ),
        Column(
            "nvtx_range",
            TEXT,
            "",
            "The innermost NVTX range open on its thread when it started.",
            required=False,
        ),
        _RANK,
    ),
)

NVTX_RANGES = TableSchema(
    "nvtx_ranges",
    "NVTX push/pop and start/end ranges (instant markers are left out).",
    (
        Column("name", TEXT, "", "The range's message."),
        *_interval("range"),
        Column("thread_id", INT, "id", "The thread that opened it."),
        Column("process_id", INT, "id", "Its process."),
        Column("domain", TEXT, "", "Its NVTX domain ('' for the default domain)."),
        Column("depth", INT, "count", "Ranges open around it on its thread (0: outermost)."),
        _RANK,
    ),
)

TABLES: Mapping[str, TableSchema] = {
    t.name: t for t in (KERNELS, RAW, RULE_RESULTS, TIMELINE, API_CALLS, NVTX_RANGES)
}


class SchemaError(RuntimeError):
    """A Session that breaks the contract above: a bug in the reader that made it."""

    def __init__(self, reader: str, problems: Sequence[str]) -> None:
        self.reader = reader
        self.problems = tuple(problems)
        shown = "; ".join(self.problems[:5])
        more = f" and {len(self.problems) - 5} more" if len(self.problems) > 5 else ""
        super().__init__(
            f"internal error: {reader} handed over a Session that breaks its schema "
            f"(nsdiag/model/schema.py): {shown}{more}. This is a bug in nsdiag, not in the input."
        )

    def __reduce__(self) -> tuple[type[SchemaError], tuple[str, tuple[str, ...]]]:
        # raised in a worker process (readers/ranks.py), it is pickled back to the caller
        return SchemaError, (self.reader, self.problems)


def known(code: object, vocabulary: Mapping[str, str]) -> object:
    """The code if `vocabulary` has it or it is missing (None, NaN), else `unknown`."""
    if code is None or (isinstance(code, float) and code != code) or code in vocabulary:
        return code
    return UNKNOWN


def known_labels(labels: Mapping[int, str], vocabulary: Mapping[str, str]) -> dict[int, str]:
    """A code -> label table with every label `vocabulary` lacks as `unknown`."""
    return {code: str(known(label, vocabulary)) for code, label in labels.items()}


def _compatible(series: pd.Series, dtype: str) -> bool:
    kind = series.dtype
    if dtype == TEXT:
        ok = isinstance(kind, pd.StringDtype) or kind.kind in "OSU"
    elif dtype == BOOL:
        ok = pd.api.types.is_bool_dtype(kind)
    else:
        numeric = pd.api.types.is_numeric_dtype(kind) and not pd.api.types.is_bool_dtype(kind)
        ok = numeric and (dtype == FLOAT or pd.api.types.is_integer_dtype(kind))
    return ok or bool(series.isna().all())


def _unknown_values(series: pd.Series, vocabulary: Mapping[str, str]) -> list[str]:
    distinct = pd.unique(series.to_numpy(dtype=object))
    return sorted(
        {str(v) for v in distinct if not (v is None or (isinstance(v, float) and v != v))}
        - set(vocabulary)
    )


def table_problems(frame: pd.DataFrame, table: TableSchema) -> list[str]:
    """What in `frame` breaks `table`'s schema ([] when nothing does)."""
    if not len(frame):
        return []
    problems: list[str] = []
    duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if duplicated:
        problems.append(f"{table.name} has duplicate columns {', '.join(duplicated)}")
    present = set(map(str, frame.columns)) - set(duplicated)
    missing = [c.name for c in table.columns if c.required and c.name not in present]
    if missing:
        problems.append(f"{table.name} lacks the required column(s) {', '.join(missing)}")
    checked = [(c.name, c.dtype, c.vocabulary) for c in table.columns if c.name in present]
    if table.catalogue_metrics:
        checked += [(str(n), FLOAT, None) for n in frame.columns if n in CATALOGUE and n in present]
    for name, dtype, vocabulary in checked:
        series = frame[name]
        if not _compatible(series, dtype):
            problems.append(f"{table.name}.{name} has dtype {series.dtype}, not {dtype}")
        elif vocabulary is not None and (unknown := _unknown_values(series, vocabulary)):
            shown = ", ".join(map(repr, unknown[:5]))
            problems.append(
                f"{table.name}.{name} holds {shown}, not in its vocabulary "
                f"({', '.join(vocabulary)})"
            )
    return problems
