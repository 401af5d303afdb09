"""Reader for Nsight Systems SQLite exports (`nsys export --type sqlite`), plain or gzipped.

Only the standard library's sqlite3 touches the file. Numeric columns are read in SQL and
string ids are mapped in pandas (StringIds is read once), so a million launches cost one
query per table and no per-row Python. Every table is optional: a missing one is an empty frame.
"""
from __future__ import annotations

import contextlib
import gzip
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.session import API_COLUMNS, NVTX_COLUMNS, TIMELINE_COLUMNS, Session, empty_frame

# Fallbacks for exports without the ENUM_* tables (values from CUPTI's headers, stable for years).
MEMCPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
                8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM_HtoD", 12: "UVM_DtoH", 13: "UVM_DtoD"}
MEM_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device_static",
             6: "managed_static", 7: "unknown"}
SYNC_TYPES = {0: "unknown", 1: "event_sync", 2: "stream_wait_event", 3: "stream_sync", 4: "context_sync"}
NVTX_RANGE_TYPES = {59: "NvtxPushPopRange", 60: "NvtxStartEndRange", 70: "NvtxtPushPopRange", 71: "NvtxtStartEndRange"}
COPY_NAMES = {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "DtoD": "Device-to-Device",
              "HtoH": "Host-to-Host", "PtoP": "Peer-to-Peer"}
# Calls that block the calling host thread until GPU work finishes. cudaStreamWaitEvent is not
# one (it orders streams on the GPU); synchronous cudaMemcpy* is (only the *Async ones return early).
BLOCKING_SYNC = re.compile(
    r"^(cuda(Device|Stream|Event|Thread|Ctx)Synchronize|cu(Ctx|Stream|Event)Synchronize"
    r"|cudaMemcpy(?!\w*Async)\w*|cuMemcpy(?!\w*Async)\w*)$")
_VERSION_SUFFIX = r"_v\d+$"
_TID_BITS = 0xFFFFFF  # nsys serialises ids as hw(8) | vm(8) | pid(24) | tid(24)
_ACTIVITY_COLUMNS = TIMELINE_COLUMNS + ("short_name", "thread_id", "api_start_ns", "api_end_ns")


@contextlib.contextmanager
def _database_file(path: Path) -> Iterator[Path]:
    """The path to an uncompressed database: `.gz` exports go to a temporary file first."""
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    if not gzipped:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="nsdiag-") as tmp:
        target = Path(tmp) / "export.sqlite"
        try:
            with gzip.open(path, "rb") as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (OSError, EOFError) as exc:
            raise InputError(f"{path} looks gzipped but cannot be decompressed", "re-export the file") from exc
        yield target


def read(path: Path) -> Session:
    if not path.is_file():
        raise InputError(f"{path} does not exist", "check the path")
    with _database_file(path) as db_path:
        try:
            con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open {path}: {exc}", "pass an nsys SQLite export") from exc
        try:
            return read_connection(con, source=str(path))
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{path} is not a readable SQLite database: {exc}",
                             "export it with: nsys export --type sqlite report.nsys-rep") from exc
        finally:
            con.close()


def read_connection(con: sqlite3.Connection, source: str = "") -> Session:
    """The Session held by an open nsys export."""
    schema = _schema(con)
    if not any(t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "TARGET_INFO")) for t in schema):
        raise InputError(f"{source or 'database'} has no Nsight Systems tables",
                         "export the report with: nsys export --type sqlite report.nsys-rep")
    strings = _strings(con, schema)
    api = _api_calls(con, schema, strings)
    nvtx = _nvtx(con, schema, strings)
    timeline = _activities(con, schema, strings)
    timeline = _attribute(timeline, api, nvtx)
    api = api.assign(nvtx_range=_range_names(nvtx, api["thread_key"], api["start_ns"]))
    return Session(
        timeline=timeline.reset_index(drop=True),
        api_calls=api.drop(columns=["thread_key"]).reset_index(drop=True),
        nvtx_ranges=nvtx.drop(columns=["thread_key"]).reset_index(drop=True),
        meta=_meta(con, schema, source),
    )


# ---------------------------------------------------------------- generic SQL helpers

def _schema(con: sqlite3.Connection) -> dict[str, set[str]]:
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    return {t: {r[1] for r in con.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def _query(con: sqlite3.Connection, schema: dict[str, set[str]], table: str,
           columns: dict[str, str], where: str = "") -> pd.DataFrame:
    """SELECT the wanted columns (alias -> source column) that exist; missing ones are NULL."""
    present = schema.get(table, set())
    exprs = [f'"{col}" AS {alias}' if col in present else f"NULL AS {alias}" for alias, col in columns.items()]
    if not present:
        return pd.DataFrame({alias: pd.Series(dtype="float64") for alias in columns})
    sql = f'SELECT {", ".join(exprs)} FROM "{table}"' + (f" WHERE {where}" if where else "")
    rows = con.execute(sql).fetchall()
    return pd.DataFrame.from_records(rows, columns=list(columns), coerce_float=False)


def _ints(series: pd.Series, missing: int = -1) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").fillna(missing).to_numpy(dtype="int64")


def _strings(con: sqlite3.Connection, schema: dict[str, set[str]]) -> pd.Series:
    if "StringIds" not in schema:
        return pd.Series(dtype="object")
    frame = pd.DataFrame(con.execute("SELECT id, value FROM StringIds").fetchall(), columns=["id", "value"])
    return pd.Series(frame["value"].to_numpy(dtype=object), index=frame["id"].to_numpy(dtype="int64"))


def _lookup(strings: pd.Series, ids: pd.Series) -> pd.Series:
    codes = pd.to_numeric(ids, errors="coerce")
    return codes.map(strings) if len(strings) else pd.Series(np.nan, index=ids.index, dtype="object")


def _enum(con: sqlite3.Connection, schema: dict[str, set[str]], table: str, fallback: dict[int, str],
          decode: Callable[[str], str]) -> dict[int, str]:
    if table not in schema or "name" not in schema[table]:
        return dict(fallback)
    return {int(i): decode(str(n)) for i, n in con.execute(f'SELECT id, name FROM "{table}"')}


def _memcpy_code(name: str) -> str:
    suffix = name.split("_KIND_")[-1]            # CUDA_MEMCPY_KIND_HTOD -> HTOD
    return "unknown" if suffix == "UNKNOWN" else suffix.replace("TO", "to")


def _mem_kind(name: str) -> str:
    return name.split("_KIND_")[-1].lower()      # CUDA_MEMOPR_MEMORY_KIND_PAGEABLE -> pageable


def _split_ids(global_id: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(process id, thread id) from nsys's serialised global ids."""
    values = _ints(global_id, 0)
    return (values >> 24) & _TID_BITS, values & _TID_BITS


# ---------------------------------------------------------------- tables

def _api_calls(con: sqlite3.Connection, schema: dict[str, set[str]], strings: pd.Series) -> pd.DataFrame:
    columns = {"start_ns": "start", "end_ns": "end", "tid": "globalTid", "correlation_id": "correlationId",
               "name_id": "nameId"}
    frames = [_query(con, schema, t, columns) for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
              if t in schema]
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_frame(API_COLUMNS + ("sync_type", "stream", "thread_key", "nvtx_range"))
    raw = pd.concat(frames, ignore_index=True)
    names = _lookup(strings, raw["name_id"]).astype("object").fillna("").str.replace(_VERSION_SUFFIX, "", regex=True)
    pid, tid = _split_ids(raw["tid"])
    api = pd.DataFrame({
        "name": names, "start_ns": _ints(raw["start_ns"]), "end_ns": _ints(raw["end_ns"]),
        "thread_id": tid, "process_id": pid, "correlation_id": _ints(raw["correlation_id"]),
        "thread_key": _ints(raw["tid"], 0),
    })
    api["duration_ns"] = api["end_ns"] - api["start_ns"]
    unique_names = pd.Series(api["name"].unique())
    blocking = dict(zip(unique_names, unique_names.str.match(BLOCKING_SYNC)))
    api["is_sync"] = api["name"].map(blocking).astype(bool)
    api = _add_sync_records(con, schema, api)
    return api.sort_values("start_ns", kind="stable")[list(API_COLUMNS) + ["sync_type", "stream", "thread_key"]]


def _add_sync_records(con: sqlite3.Connection, schema: dict[str, set[str]], api: pd.DataFrame) -> pd.DataFrame:
    """CUPTI's synchronisation records say what each sync call waited on (stream, event, context)."""
    sync = _query(con, schema, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                  {"correlation_id": "correlationId", "pid": "globalPid", "sync_type": "syncType", "stream": "streamId"})
    if not len(sync):
        return api.assign(sync_type=pd.Series(np.nan, index=api.index, dtype="object"), stream=-1)
    types = _enum(con, schema, "ENUM_CUPTI_SYNC_TYPE", SYNC_TYPES,
                  lambda n: n.split("_TYPE_")[-1].lower())
    sync = pd.DataFrame({
        "correlation_id": _ints(sync["correlation_id"]), "process_id": _split_ids(sync["pid"])[0],
        "sync_type": _ints(sync["sync_type"]).astype(object), "stream": _ints(sync["stream"]),
    }).drop_duplicates(["process_id", "correlation_id"])
    sync["sync_type"] = sync["sync_type"].map(lambda v: types.get(int(v), "unknown"))
    merged = api.merge(sync, on=["process_id", "correlation_id"], how="left")
    merged["stream"] = merged["stream"].fillna(-1).astype("int64")
    return merged


def _nvtx(con: sqlite3.Connection, schema: dict[str, set[str]], strings: pd.Series) -> pd.DataFrame:
    """Push/pop and start/end ranges; instant markers (no end) are skipped."""
    columns = {"start_ns": "start", "end_ns": "end", "event_type": "eventType", "text": "text",
               "text_id": "textId", "tid": "globalTid", "domain_id": "domainId"}
    types = _range_event_types(con, schema)
    where = f'"end" IS NOT NULL AND eventType IN ({", ".join(map(str, types))})'
    raw = _query(con, schema, "NVTX_EVENTS", columns, where if "NVTX_EVENTS" in schema else "")
    out_columns = list(NVTX_COLUMNS) + ["thread_key"]
    if not len(raw):
        return empty_frame(tuple(out_columns))
    text = raw["text"].astype("object")
    names = text.where(text.notna(), _lookup(strings, raw["text_id"]).astype("object"))
    pid, tid = _split_ids(raw["tid"])
    nvtx = pd.DataFrame({
        "name": names.fillna("").astype("object"), "start_ns": _ints(raw["start_ns"]), "end_ns": _ints(raw["end_ns"]),
        "thread_id": tid, "process_id": pid, "domain": _domains(con, schema, raw["domain_id"]),
        "thread_key": _ints(raw["tid"], 0),
    })
    nvtx["duration_ns"] = nvtx["end_ns"] - nvtx["start_ns"]
    nvtx = nvtx.sort_values(["thread_key", "start_ns", "end_ns"], ascending=[True, True, False], kind="stable")
    nvtx["depth"] = _depths(nvtx)
    return nvtx[out_columns]


def _range_event_types(con: sqlite3.Connection, schema: dict[str, set[str]]) -> list[int]:
    if "ENUM_NSYS_EVENT_TYPE" not in schema:
        return sorted(NVTX_RANGE_TYPES)
    rows = con.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE").fetchall()
    found = [int(i) for i, n in rows if str(n) in NVTX_RANGE_TYPES.values()]
    return found or sorted(NVTX_RANGE_TYPES)


def _domains(con: sqlite3.Connection, schema: dict[str, set[str]], domain_ids: pd.Series) -> np.ndarray:
    """Domain names come from NvtxDomainCreate events (eventType 75); 0 is the default domain."""
    names: dict[int, str] = {}
    if {"domainId", "text"} <= schema.get("NVTX_EVENTS", set()):
        rows = con.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75 AND text IS NOT NULL")
        names = {int(d): str(t) for d, t in rows if d is not None}
    ids = _ints(domain_ids, 0)
    return pd.Series(ids).map(lambda d: names.get(int(d), "")).to_numpy(dtype=object) if names else np.full(len(ids), "", dtype=object)


def _depths(nvtx: pd.DataFrame) -> np.ndarray:
    """Nesting depth: ranges on the same thread open at each range's start (sorted input)."""
    depth = np.zeros(len(nvtx), dtype="int64")
    keys = nvtx["thread_key"].to_numpy()
    starts, ends = nvtx["start_ns"].to_numpy(), nvtx["end_ns"].to_numpy()
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        s, e = starts[rows], np.sort(ends[rows])
        opened = np.arange(len(rows))                       # ranges started before (sorted by start)
        closed = np.searchsorted(e, s, side="right")        # ranges already ended
        depth[rows] = np.maximum(opened - closed, 0)
    return depth


def _activities(con: sqlite3.Connection, schema: dict[str, set[str]], strings: pd.Series) -> pd.DataFrame:
    frames = [f for f in (_kernels(con, schema, strings), _copies(con, schema), _memsets(con, schema)) if len(f)]
    if not frames:
        return empty_frame(_ACTIVITY_COLUMNS)
    timeline = pd.concat(frames, ignore_index=True)
    timeline["duration_ns"] = timeline["end_ns"] - timeline["start_ns"]
    return timeline.sort_values(["start_ns", "end_ns"], kind="stable").reset_index(drop=True)


_COMMON = {"start_ns": "start", "end_ns": "end", "device": "deviceId", "context": "contextId",
           "stream": "streamId", "correlation_id": "correlationId", "pid": "globalPid"}


def _common(raw: pd.DataFrame, kind: str) -> pd.DataFrame:
    out = pd.DataFrame({c: _ints(raw[c]) for c in ("start_ns", "end_ns", "device", "context", "stream", "correlation_id")})
    out.insert(0, "kind", kind)
    out["process_id"] = _split_ids(raw["pid"])[0]
    return out


def _kernels(con: sqlite3.Connection, schema: dict[str, set[str]], strings: pd.Series) -> pd.DataFrame:
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if table not in schema:
        return pd.DataFrame()
    dims = {f"{d}{a}": f"{d}{a.upper()}" for d in ("grid", "block") for a in "xyz"}
    raw = _query(con, schema, table, {**_COMMON, "demangled": "demangledName", "short": "shortName", **dims})
    out = _common(raw, "kernel")
    out["name"] = _lookup(strings, raw["demangled"]).astype("object")
    out["short_name"] = _lookup(strings, raw["short"]).astype("object")
    out["name"] = out["name"].fillna(out["short_name"])
    for dim in ("grid", "block"):
        parts = [pd.Series(_ints(raw[f"{dim}{a}"], 1)).astype(str) for a in "xyz"]
        out[dim] = "(" + parts[0] + ", " + parts[1] + ", " + parts[2] + ")"
    return out


def _copies(con: sqlite3.Connection, schema: dict[str, set[str]]) -> pd.DataFrame:
    raw = _query(con, schema, "CUPTI_ACTIVITY_KIND_MEMCPY",
                 {**_COMMON, "bytes": "bytes", "copy_kind": "copyKind", "src": "srcKind", "dst": "dstKind"})
    if not len(raw):
        return pd.DataFrame()
    out = _common(raw, "memcpy")
    kinds = _enum(con, schema, "ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS, _memcpy_code)
    mem = _enum(con, schema, "ENUM_CUDA_MEM_KIND", MEM_KINDS, _mem_kind)
    out["bytes"] = pd.to_numeric(raw["bytes"], errors="coerce").astype("float64")
    out["copy_kind"] = pd.Series(_ints(raw["copy_kind"], 0)).map(lambda k: kinds.get(int(k), "unknown"))
    out["src_kind"] = pd.Series(_ints(raw["src"], 7)).map(lambda k: mem.get(int(k), "unknown"))
    out["dst_kind"] = pd.Series(_ints(raw["dst"], 7)).map(lambda k: mem.get(int(k), "unknown"))
    out["name"] = "[CUDA memcpy " + out["copy_kind"].map(lambda k: COPY_NAMES.get(k, k)) + "]"
    out["short_name"] = out["name"]
    return out


def _memsets(con: sqlite3.Connection, schema: dict[str, set[str]]) -> pd.DataFrame:
    raw = _query(con, schema, "CUPTI_ACTIVITY_KIND_MEMSET", {**_COMMON, "bytes": "bytes", "mem": "memKind"})
    if not len(raw):
        return pd.DataFrame()
    out = _common(raw, "memset")
    mem = _enum(con, schema, "ENUM_CUDA_MEM_KIND", MEM_KINDS, _mem_kind)
    out["bytes"] = pd.to_numeric(raw["bytes"], errors="coerce").astype("float64")
    out["dst_kind"] = pd.Series(_ints(raw["mem"], 7)).map(lambda k: mem.get(int(k), "unknown"))
    out["name"] = out["short_name"] = "[CUDA memset]"
    return out


# ---------------------------------------------------------------- attribution

def _attribute(timeline: pd.DataFrame, api: pd.DataFrame, nvtx: pd.DataFrame) -> pd.DataFrame:
    """Each activity's launching call (same process and correlation id), and the innermost NVTX
    range open on the launching thread when that call started."""
    if not len(timeline):
        return timeline
    calls = api[["process_id", "correlation_id", "start_ns", "end_ns", "thread_id", "thread_key"]]
    calls = calls[calls["correlation_id"] > 0].drop_duplicates(["process_id", "correlation_id"])
    calls = calls.rename(columns={"start_ns": "api_start_ns", "end_ns": "api_end_ns"})
    merged = timeline.drop(columns=[c for c in ("api_start_ns", "api_end_ns", "thread_id") if c in timeline])
    merged = merged.merge(calls, on=["process_id", "correlation_id"], how="left", sort=False)
    merged["nvtx_range"] = _range_names(nvtx, merged["thread_key"].fillna(0), merged["api_start_ns"].fillna(-1))
    for column in ("api_start_ns", "api_end_ns", "thread_id"):
        merged[column] = merged[column].fillna(-1).astype("int64")
    for column in _ACTIVITY_COLUMNS:
        if column not in merged:
            merged[column] = np.nan
    return merged[list(_ACTIVITY_COLUMNS)]


def _range_names(nvtx: pd.DataFrame, thread_keys: pd.Series, times: pd.Series) -> np.ndarray:
    """Name of the innermost NVTX range on `thread_keys[i]` that encloses `times[i]` (NaN if none)."""
    out = np.full(len(times), np.nan, dtype=object)
    if not len(nvtx) or not len(times):
        return out
    keys, t = _ints(pd.Series(thread_keys), 0), _ints(pd.Series(times))
    names = nvtx["name"].to_numpy(dtype=object)
    for key, rows in nvtx.groupby("thread_key", sort=False).indices.items():
        wanted = np.flatnonzero(keys == key)
        if not len(wanted):
            continue
        found = enclosing(nvtx["start_ns"].to_numpy()[rows], nvtx["end_ns"].to_numpy()[rows], t[wanted])
        hit = found >= 0
        out[wanted[hit]] = names[rows[found[hit]]]
    return out


def enclosing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time, the index of the latest-starting interval [start, end] that contains it, or -1.

    `starts` must be sorted. For nested (push/pop) ranges the latest-starting enclosing range is
    the innermost. Binary lifting over a sparse table of running maxima of `ends` finds, for each
    query, the last interval at or before its start position whose end reaches the time, in
    O(log n) vectorised steps: no Python loop over rows.
    """
    n = len(starts)
    pos = np.searchsorted(starts, t, side="right") - 1          # last interval starting at or before t
    table = [np.asarray(ends, dtype="int64")]                   # table[j][i] = max(ends[i - 2^j + 1 .. i])
    while (1 << len(table)) <= n:
        prev, step = table[-1], 1 << (len(table) - 1)
        table.append(np.concatenate([prev[:step], np.maximum(prev[step:], prev[:-step])]))
    for j in range(len(table) - 1, -1, -1):
        width = 1 << j
        can = pos - width + 1 >= 0
        idx = np.where(can, pos, 0)
        skip = can & (table[j][idx] < t)                         # all `width` intervals end before t
        pos = np.where(skip, pos - width, pos)
    valid = pos >= 0
    found = np.where(valid, pos, -1)
    found[valid] = np.where(ends[pos[valid]] >= t[valid], pos[valid], -1)
    return found


# ---------------------------------------------------------------- meta

def _meta(con: sqlite3.Connection, schema: dict[str, set[str]], source: str) -> dict:
    meta: dict = {"sources": [{"path": source, "format": "nsys-sqlite"}]}
    devices = _devices(con, schema)
    if devices:
        meta["device"] = devices[0]
        meta["devices"] = devices
    if "META_DATA_EXPORT" in schema:
        info = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
        if info.get("EXPORT_PRODUCT_VERSION"):
            meta["nsys_version"] = str(info["EXPORT_PRODUCT_VERSION"])
    return meta


_GPU_FIELDS = {"id": "id", "name": "name", "sm_count": "smCount", "clock_hz": "clockRate",
               "memory_bandwidth_bytes_per_s": "memoryBandwidth", "l2_bytes": "l2CacheSize",
               "total_memory_bytes": "totalMemory", "bus": "busLocation", "chip": "chipName",
               "async_engines": "asyncEngines", "cc_major": "computeMajor", "cc_minor": "computeMinor"}


def _devices(con: sqlite3.Connection, schema: dict[str, set[str]]) -> list[dict]:
    frame = _query(con, schema, "TARGET_INFO_GPU", _GPU_FIELDS)
    devices = []
    for row in frame.to_dict("records"):
        info = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items() if v is not None and not pd.isna(v)}
        if "cc_major" in info:
            info["cc"] = f"{int(info.pop('cc_major'))}.{int(info.pop('cc_minor', 0))}"
        devices.append(info)
    return devices
