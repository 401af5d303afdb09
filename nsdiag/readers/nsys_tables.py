"""The tables of an nsys SQLite export decoded into the Session's frames: CUDA API calls (with
their synchronisation records), NVTX ranges, GPU activities (kernels, copies, memsets) and the
GPUs. Numeric columns are read in SQL (readers/sqlite_query.py) and string ids mapped in pandas,
once per distinct id. Every table is optional: a missing one is an empty frame.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.model.schema import COPY_KINDS, MEMORY_KINDS, SYNC_TYPES, known_labels
from nsdiag.model.session import API_COLUMNS, NVTX_COLUMNS, TIMELINE_COLUMNS, empty_frame
from nsdiag.readers.sqlite_query import Schema, fetch_ints, ints, query, select

# Fallbacks for exports without the ENUM_* tables (values from CUPTI's headers, stable for years).
# Labels the schema's vocabularies lack (a newer CUPTI's) become 'unknown' in the tables.
MEMCPY_KINDS = {
    0: "unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM_HtoD",
    12: "UVM_DtoH",
    13: "UVM_DtoD",
}
MEM_KINDS = {
    0: "pageable",
    1: "pinned",
    2: "device",
    3: "array",
    4: "managed",
    5: "device_static",
    6: "managed_static",
    7: "unknown",
}
SYNC_TYPE_CODES = {
    0: "unknown",
    1: "event_synchronize",
    2: "stream_wait_event",
    3: "stream_synchronize",
    4: "context_synchronize",
}
NVTX_RANGE_TYPES = {
    59: "NvtxPushPopRange",
    60: "NvtxStartEndRange",
    70: "NvtxtPushPopRange",
    71: "NvtxtStartEndRange",
}
COPY_NAMES = {
    "HtoD": "Host-to-Device",
    "DtoH": "Device-to-Host",
    "DtoD": "Device-to-Device",
    "HtoH": "Host-to-Host",
    "PtoP": "Peer-to-Peer",
}
# Calls that block the calling host thread until GPU work finishes. cudaStreamWaitEvent is not
# one (it orders streams on the GPU); synchronous cudaMemcpy* is (only the *Async ones return
# early).
BLOCKING_SYNC = re.compile(
    r"^(cuda(Device|Stream|Event|Thread|Ctx)Synchronize|cu(Ctx|Stream|Event)Synchronize"
    r"|cudaMemcpy(?!\w*Async)\w*|cuMemcpy(?!\w*Async)\w*)$"
)
_VERSION_SUFFIX = r"_v\d+$"
_TID_BITS = 0xFFFFFF  # nsys serialises ids as hw(8) | vm(8) | pid(24) | tid(24)
# mangled_name: what ncu matches with `--kernel-name-base mangled` (unique per template instance)
ACTIVITY_COLUMNS = (
    *TIMELINE_COLUMNS,
    "short_name",
    "mangled_name",
    "thread_id",
    "api_start_ns",
    "api_end_ns",
)


def string_ids(con: sqlite3.Connection, schema: Schema) -> dict[int, str]:
    return dict(select(con, "StringIds", "id, value")) if "StringIds" in schema else {}


def _enum(
    con: sqlite3.Connection, schema: Schema, table: str, fallback: dict[int, str]
) -> dict[int, str]:
    """id -> label from an ENUM_* table (CUDA_MEMCPY_KIND_HTOD -> HtoD, ..._KIND_PAGEABLE ->
    pageable, ..._TYPE_STREAM_SYNCHRONIZE -> stream_synchronize), or the CUPTI values when it is
    missing."""
    if "name" not in schema.get(table, {}):
        return dict(fallback)
    out = {}
    for i, name in select(con, table, "id, name"):
        label = re.split(r"_(?:KIND|TYPE)_", str(name))[-1]
        out[int(i)] = (
            label.replace("TO", "to")
            if table == "ENUM_CUDA_MEMCPY_OPER" and label != "UNKNOWN"
            else label.lower()
        )
    return out


def _split_ids(global_id: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(process id, thread id) from nsys's serialised global ids."""
    values = ints(global_id, 0)
    return (values >> 24) & _TID_BITS, values & _TID_BITS


def api_calls(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    columns = {
        "start_ns": "start",
        "end_ns": "end",
        "tid": "globalTid",
        "correlation_id": "correlationId",
        "name_id": "nameId",
    }
    frames = [
        fetch_ints(con, schema, t, columns)
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
        if t in schema
    ]
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_frame((*API_COLUMNS, "sync_type", "stream", "thread_key", "nvtx_range"))
    raw = pd.concat(frames, ignore_index=True)
    # Names and the sync test are computed once per distinct name id, then spread by index.
    inverse, ids = pd.factorize(raw["name_id"].to_numpy())
    names = pd.Series(_decode(ids, strings, ""), dtype=object).str.replace(
        _VERSION_SUFFIX, "", regex=True
    )
    pid, tid = _split_ids(raw["tid"])
    api = pd.DataFrame(
        {
            "name": names.to_numpy(dtype=object)[inverse],
            "start_ns": raw["start_ns"].to_numpy(),
            "end_ns": raw["end_ns"].to_numpy(),
            "thread_id": tid,
            "process_id": pid,
            "correlation_id": raw["correlation_id"].to_numpy(),
            "thread_key": raw["tid"].to_numpy(),
            "is_sync": names.str.match(BLOCKING_SYNC).to_numpy(dtype=bool)[inverse],
        }
    )
    api["duration_ns"] = api["end_ns"] - api["start_ns"]
    api = _add_sync_records(con, schema, api)
    api = api.iloc[np.argsort(api["start_ns"].to_numpy(), kind="stable")]
    return api[[*API_COLUMNS, "sync_type", "stream", "thread_key"]]


def _add_sync_records(con: sqlite3.Connection, schema: Schema, api: pd.DataFrame) -> pd.DataFrame:
    """What each sync call waited on, from CUPTI's synchronisation records: sync_type and stream.
    Informational only: nsys 2025.3 labels cudaStreamSynchronize 'stream_wait_event' too, and
    cudaDeviceSynchronize has no record, so `is_sync` comes from the API name."""
    sync = fetch_ints(
        con,
        schema,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        {
            "correlation_id": "correlationId",
            "pid": "globalPid",
            "type": "syncType",
            "stream": "streamId",
        },
    )
    keys = pd.Index(call_key(_split_ids(sync["pid"])[0], sync["correlation_id"]))
    first = ~keys.duplicated()
    sync, keys = sync[first], keys[first]
    found = keys.get_indexer(call_key(api["process_id"], api["correlation_id"]))
    types = known_labels(_enum(con, schema, "ENUM_CUPTI_SYNC_TYPE", SYNC_TYPE_CODES), SYNC_TYPES)
    api["sync_type"] = pick(_decode(sync["type"].to_numpy(), types), found, None)
    api["stream"] = pick(sync["stream"].to_numpy(), found, -1)
    return api


def pick(values: np.ndarray, found: np.ndarray, default: object) -> np.ndarray:
    """values[found], with `default` where found is -1 (get_indexer's 'no match')."""
    picked: np.ndarray = np.append(values, np.array([default], dtype=values.dtype))[found]
    return picked


def call_key(pid: pd.Series | np.ndarray, correlation: pd.Series | np.ndarray) -> np.ndarray:
    """One int64 per (process, correlation id): pids have 24 bits, correlation ids 32 (CUPTI)."""
    return (np.asarray(pid, dtype="int64") << 38) | (
        np.asarray(correlation, dtype="int64") & ((1 << 38) - 1)
    )


def nvtx_ranges(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    """Push/pop and start/end ranges; instant markers (no end) are skipped."""
    columns = {
        "start_ns": "start",
        "end_ns": "end",
        "event_type": "eventType",
        "text": "text",
        "text_id": "textId",
        "tid": "globalTid",
        "domain_id": "domainId",
    }
    types = _range_event_types(con, schema)
    where = f'"end" IS NOT NULL AND eventType IN ({", ".join(map(str, types))})'
    raw = query(con, schema, "NVTX_EVENTS", columns, where if "NVTX_EVENTS" in schema else "")
    out_columns = [*NVTX_COLUMNS, "thread_key"]
    if not len(raw):
        return empty_frame(tuple(out_columns))
    text = raw["text"].astype("object")
    names = text.where(
        text.notna(), pd.Series(_decode(ints(raw["text_id"]), strings, ""), dtype=object)
    )
    pid, tid = _split_ids(raw["tid"])
    nvtx = pd.DataFrame(
        {
            "name": names.fillna("").to_numpy(dtype=object),
            "start_ns": ints(raw["start_ns"]),
            "end_ns": ints(raw["end_ns"]),
            "thread_id": tid,
            "process_id": pid,
            "domain": _domains(con, schema, raw["domain_id"]),
            "thread_key": ints(raw["tid"], 0),
        }
    )
    nvtx["duration_ns"] = nvtx["end_ns"] - nvtx["start_ns"]
    nvtx = nvtx.sort_values(
        ["thread_key", "start_ns", "end_ns"], ascending=[True, True, False], kind="stable"
    )
    nvtx["depth"] = _depths(nvtx)
    return nvtx[out_columns]


def _range_event_types(con: sqlite3.Connection, schema: Schema) -> list[int]:
    """Event type ids of NVTX ranges, from ENUM_NSYS_EVENT_TYPE when the export has it."""
    rows = (
        select(con, "ENUM_NSYS_EVENT_TYPE", "id, name") if "ENUM_NSYS_EVENT_TYPE" in schema else []
    )
    return [int(i) for i, n in rows if n in NVTX_RANGE_TYPES.values()] or sorted(NVTX_RANGE_TYPES)


def _domains(con: sqlite3.Connection, schema: Schema, domain_ids: pd.Series) -> np.ndarray:
    """Domain names come from NvtxDomainCreate events (eventType 75); 0 is the default domain."""
    names: dict[int, str] = {}
    if {"domainId", "text"} <= schema.get("NVTX_EVENTS", {}).keys():
        rows = select(con, "NVTX_EVENTS", "domainId, text", "eventType = 75 AND text IS NOT NULL")
        names = {int(d): str(t) for d, t in rows if d is not None}
    return _decode(ints(domain_ids, 0), names, "")


def _depths(nvtx: pd.DataFrame) -> np.ndarray:
    """Nesting depth: ranges on the same thread open at each range's start (sorted input)."""
    depth = np.zeros(len(nvtx), dtype="int64")
    starts, ends = nvtx["start_ns"].to_numpy(), nvtx["end_ns"].to_numpy()
    for rows in nvtx.groupby("thread_key", sort=False).indices.values():
        # started before it (rows are sorted by start) minus already ended
        depth[rows] = np.maximum(
            np.arange(len(rows)) - np.searchsorted(np.sort(ends[rows]), starts[rows], "right"), 0
        )
    return depth


def activities(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    frames = [
        f
        for f in (_kernels(con, schema, strings), _copies(con, schema), _memsets(con, schema))
        if len(f)
    ]
    if not frames:
        return empty_frame(ACTIVITY_COLUMNS)
    timeline = pd.concat(frames, ignore_index=True)
    timeline["duration_ns"] = timeline["end_ns"] - timeline["start_ns"]
    # Stable sort on start (exports are nearly sorted already, which timsort exploits).
    return timeline.iloc[np.argsort(timeline["start_ns"].to_numpy(), kind="stable")].reset_index(
        drop=True
    )


_COMMON = {
    "start_ns": "start",
    "end_ns": "end",
    "device": "deviceId",
    "context": "contextId",
    "stream": "streamId",
    "correlation_id": "correlationId",
    "pid": "globalPid",
}
_PACKED_DIMS = {
    "grid": "(gridX << 32) | (gridY << 16) | gridZ",
    "block": "(blockX << 32) | (blockY << 16) | blockZ",
}


def _common(raw: pd.DataFrame, kind: str) -> pd.DataFrame:
    out = raw[["start_ns", "end_ns", "device", "context", "stream", "correlation_id"]].copy()
    out.insert(0, "kind", kind)
    out["process_id"] = _split_ids(raw["pid"])[0]
    return out


def _decode(values: np.ndarray, mapping: dict[int, str], default: str = "unknown") -> np.ndarray:
    """Map codes to labels once per distinct code."""
    inverse, codes = pd.factorize(values)
    labels = np.array([mapping.get(int(c), default) for c in codes] + [default], dtype=object)
    return labels[inverse] if len(values) else np.empty(0, dtype=object)


def _dims(packed: np.ndarray) -> np.ndarray:
    """'(x, y, z)' text from (x << 32 | y << 16 | z), formatted once per distinct shape."""
    inverse, codes = pd.factorize(packed)
    text = np.array(
        [
            f"({c >> 32}, {(c >> 16) & 0xFFFF}, {c & 0xFFFF})" if c >= 0 else ""
            for c in codes.tolist()
        ]
        + [""],
        dtype=object,
    )
    return text[inverse] if len(packed) else np.empty(0, dtype=object)


def _kernels(con: sqlite3.Connection, schema: Schema, strings: dict[int, str]) -> pd.DataFrame:
    raw = fetch_ints(
        con,
        schema,
        "CUPTI_ACTIVITY_KIND_KERNEL",
        {
            **_COMMON,
            "demangled": "demangledName",
            "short": "shortName",
            "mangled": "mangledName",
            **_PACKED_DIMS,
        },
        together=(("device", "context", "stream"), ("demangled", "short")),
    )
    out = _common(raw, "kernel")
    short = _decode(raw["short"].to_numpy(), strings, "")
    name = _decode(raw["demangled"].to_numpy(), strings, "")
    out["name"] = np.where(name == "", short, name)
    out["short_name"] = short
    out["mangled_name"] = _decode(raw["mangled"].to_numpy(), strings, "")
    out["grid"], out["block"] = _dims(raw["grid"].to_numpy()), _dims(raw["block"].to_numpy())
    return out


def _copies(con: sqlite3.Connection, schema: Schema) -> pd.DataFrame:
    raw = fetch_ints(
        con,
        schema,
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        {**_COMMON, "bytes": "bytes", "copy_kind": "copyKind", "src": "srcKind", "dst": "dstKind"},
    )
    if not len(raw):
        return pd.DataFrame()
    out = _common(raw, "memcpy")
    kinds = _enum(con, schema, "ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS)
    mem = known_labels(_enum(con, schema, "ENUM_CUDA_MEM_KIND", MEM_KINDS), MEMORY_KINDS)
    out["bytes"] = raw["bytes"].to_numpy(dtype="float64")
    out["copy_kind"] = _decode(raw["copy_kind"].to_numpy(), known_labels(kinds, COPY_KINDS))
    out["src_kind"] = _decode(raw["src"].to_numpy(), mem)
    out["dst_kind"] = _decode(raw["dst"].to_numpy(), mem)
    # named by nsys's label, also where the schema calls the direction unknown
    names = {code: f"[CUDA memcpy {COPY_NAMES.get(label, label)}]" for code, label in kinds.items()}
    out["name"] = out["short_name"] = _decode(
        raw["copy_kind"].to_numpy(), names, "[CUDA memcpy unknown]"
    )
    return out


def _memsets(con: sqlite3.Connection, schema: Schema) -> pd.DataFrame:
    raw = fetch_ints(
        con, schema, "CUPTI_ACTIVITY_KIND_MEMSET", {**_COMMON, "bytes": "bytes", "mem": "memKind"}
    )
    if not len(raw):
        return pd.DataFrame()
    out = _common(raw, "memset")
    out["bytes"] = raw["bytes"].to_numpy(dtype="float64")
    out["dst_kind"] = _decode(
        raw["mem"].to_numpy(),
        known_labels(_enum(con, schema, "ENUM_CUDA_MEM_KIND", MEM_KINDS), MEMORY_KINDS),
    )
    out["name"] = out["short_name"] = "[CUDA memset]"
    return out


_GPU_FIELDS = {
    "id": "id",
    "name": "name",
    "sm_count": "smCount",
    "clock_hz": "clockRate",
    "memory_bandwidth_bytes_per_s": "memoryBandwidth",
    "l2_bytes": "l2CacheSize",
    "total_memory_bytes": "totalMemory",
    "bus": "busLocation",
    "chip": "chipName",
    "async_engines": "asyncEngines",
    "cuda_device": "cuDevice",
    "cc_major": "computeMajor",
    "cc_minor": "computeMinor",
}


# nsys 2021 exports name the GPU table TARGET_INFO_CUDA_GPU (the same columns it reads)
GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU")


def gpu_devices(con: sqlite3.Connection, schema: Schema) -> list[dict[str, Any]]:
    table = next((t for t in GPU_TABLES if t in schema), GPU_TABLES[0])
    frame = query(con, schema, table, _GPU_FIELDS)
    devices = []
    for row in frame.to_dict("records"):
        info = {
            str(k): (v.item() if hasattr(v, "item") else v)
            for k, v in row.items()
            if v is not None and not pd.isna(v)
        }
        if "cc_major" in info:
            info["cc"] = f"{int(info.pop('cc_major'))}.{int(info.pop('cc_minor', 0))}"
        devices.append(info)
    return devices
