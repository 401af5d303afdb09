"""Reader for `nsys stats --format csv` reports (plain or gzipped).

cuda_gpu_trace becomes the Session's timeline (one row per kernel, copy and memset; no NVTX
ranges or API calls: nsys stats does not print them per activity). Summary reports
(cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, nvtx_sum) have
no start times, so they cannot be placed on a timeline: their rows go to
meta.nsys_<report>, in base units; cuda_gpu_kern_sum also becomes the kernel table, one row per
kernel by total time, and the others a line each on what took the most time
(readers/nsys_summary.py).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.meta import SessionMeta, Source
from nsdiag.model.schema import COPY_KINDS, MEMORY_KINDS, UNKNOWN, known
from nsdiag.model.session import Session
from nsdiag.readers.csv_header import report_kind
from nsdiag.readers.csv_table import CsvTable, open_table
from nsdiag.readers.nsys_summary import kernel_summary, summary_lines
from nsdiag.readers.validate import intervals

_UNIT = re.compile(r"^(?P<name>.*?)\s*\((?P<unit>[^()]*)\)$")
_SCALE = {
    "ns": 1.0,
    "us": 1e3,
    "ms": 1e6,
    "s": 1e9,
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "kib": 1024.0,
    "mib": 1024.0**2,
    "gib": 1024.0**3,
    "%": 1.0,
}
_COPY_KINDS = {
    "Host-to-Device": "HtoD",
    "Device-to-Host": "DtoH",
    "Device-to-Device": "DtoD",
    "Host-to-Host": "HtoH",
    "Peer-to-Peer": "PtoP",
    "Unified Host-to-Device": "UVM_HtoD",
    "Unified Device-to-Host": "UVM_DtoH",
    "Unified Device-to-Device": "UVM_DtoD",
}
_DEVICE = re.compile(r"\((\d+)\)\s*$")


def read(path: Path) -> Session:
    with open_table(path, expect="nsys-stats") as table:
        return read_table(table)


def read_table(table: CsvTable) -> Session:
    """The Session of an open nsys stats report (its rows are streamed to pandas once)."""
    path = table.path
    report = report_kind(table.header_line)
    frame = table.frame(f"{report} CSV", "re-export the report", skip_blank_lines=True)
    meta = SessionMeta(sources=(Source(str(path), f"nsys-stats-{report}"),))
    if report == "cuda_gpu_kern_sum":  # a kernel table by total time (readers/nsys_summary.py)
        session = kernel_summary(_base_units(frame), path)
        session.meta = replace(
            session.meta,
            nsys_cuda_gpu_kern_sum=tuple(_summary(frame)),
            warnings=(*table.warnings, *session.meta.warnings),
        )
        return session
    if report != "cuda_gpu_trace":
        rows = _summary(frame)
        summary: dict[str, Any] = {f"nsys_{report}": tuple(rows)}
        shown = (*table.warnings, *summary_lines(str(report), rows, str(path)))
        return Session(meta=replace(meta, **summary, warnings=shown))
    timeline, device_name = _trace(frame, path)
    timeline, warnings = intervals(timeline, "GPU activities", str(path))
    timeline = timeline.astype(dict.fromkeys(("start_ns", "end_ns", "duration_ns"), "int64"))
    meta = replace(
        meta,
        device={"name": device_name} if device_name else None,
        warnings=(*table.warnings, *warnings),
    )
    return Session(timeline=timeline, meta=meta)


def _base_units(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns renamed to snake_case with their unit, values scaled to ns and bytes."""
    out = {}
    for column in frame.columns:
        match = _UNIT.match(str(column))
        name, unit = (match["name"], match["unit"].lower()) if match else (str(column), "")
        values = frame[column]
        if unit.endswith("/s") and unit[:-2] in _SCALE:
            values, unit = pd.to_numeric(values, errors="coerce") * _SCALE[unit[:-2]], "bytes_per_s"
        elif unit in _SCALE:
            values = pd.to_numeric(values, errors="coerce") * _SCALE[unit]
            unit = {"%": "pct"}.get(unit, "ns" if unit in ("ns", "us", "ms", "s") else "bytes")
        key = re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")
        out[f"{key}_{unit}" if unit else key] = values
    return pd.DataFrame(out)


def _summary(frame: pd.DataFrame) -> list[dict[str, Any]]:
    table = _base_units(frame)
    return [
        {
            str(k): (None if pd.isna(v) else (v.item() if hasattr(v, "item") else v))
            for k, v in row.items()
        }
        for row in table.to_dict("records")
    ]


def _trace(frame: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, str]:
    t = _base_units(frame)
    required = ("start_ns", "duration_ns", "name")
    missing = [c for c in required if c not in t]
    if missing:
        raise InputError(
            f"{path}: cuda_gpu_trace lacks {', '.join(missing)}", "re-export with nsys stats -f csv"
        )
    if not len(t):  # an empty trace is a cut or failed export, not a program without work
        raise InputError(
            f"{path}: cuda_gpu_trace has a header and no rows",
            "the report was cut or the program ran no GPU work; re-run nsys stats on the report",
        )
    name = t["name"].astype("object").fillna("").astype(str)
    # A start or duration that is not a number makes the interval invalid; `intervals` drops it.
    start = pd.to_numeric(t["start_ns"], errors="coerce").round()
    duration = pd.to_numeric(t["duration_ns"], errors="coerce").round()
    kind = np.select(
        [name.str.startswith("[CUDA memcpy"), name.str.startswith("[CUDA memset")],
        ["memcpy", "memset"],
        "kernel",
    )
    devices = t.get("device", pd.Series("", index=t.index)).astype("object").fillna("").astype(str)
    out = pd.DataFrame(
        {
            "kind": kind,
            "start_ns": start,
            "end_ns": start + duration,
            "duration_ns": duration,
            "device": _int_column(
                pd.DataFrame({"d": devices.str.extract(_DEVICE, expand=False)}), "d"
            ).clip(lower=0),
            "context": _int_column(t, "ctx"),
            "stream": _int_column(t, "strm"),
            "name": name,
            "bytes": _bytes(t, duration),
            "copy_kind": _copy_kinds(name, kind),
            "src_kind": _mem_kind(t, "srcmemkd"),
            "dst_kind": _mem_kind(t, "dstmemkd"),
            "correlation_id": _int_column(t, "corrid"),
            "grid": _dims(t, "grd"),
            "block": _dims(t, "blk"),
            "nvtx_range": pd.Series(np.nan, index=t.index, dtype="object"),
            "process_id": -1,
        }
    )
    out.loc[out["kind"] == "kernel", ["bytes"]] = np.nan
    device_name = devices.str.replace(_DEVICE, "", regex=True).str.strip()
    return out.sort_values(["start_ns", "end_ns"], kind="stable").reset_index(drop=True), (
        device_name.iloc[0] if len(device_name) else ""
    )


def _whole_numbers(values: pd.Series) -> pd.Series:
    """The cells that are whole numbers an int64 holds, as floats; NaN elsewhere."""
    numbers = pd.to_numeric(values, errors="coerce").astype("float64")
    ok = np.isfinite(numbers) & (numbers == numbers.round()) & (numbers.abs() < 2**62)
    return numbers.where(ok)


def _int_column(t: pd.DataFrame, column: str) -> pd.Series:
    return (
        _whole_numbers(t[column]).fillna(-1).astype("int64")
        if column in t
        else pd.Series(-1, index=t.index, dtype="int64")
    )


def _bytes(t: pd.DataFrame, duration: pd.Series) -> pd.Series:
    """Bytes moved. nsys prints MB with three decimals (small copies read 0.000), so where the
    throughput is there, bytes = throughput x duration, which keeps small copies exact enough."""
    size = pd.to_numeric(t.get("bytes_bytes", pd.Series(np.nan, index=t.index)), errors="coerce")
    rate = pd.to_numeric(
        t.get("throughput_bytes_per_s", pd.Series(np.nan, index=t.index)), errors="coerce"
    )
    from_rate = (rate * duration / 1e9).round()
    return from_rate.where(rate.notna() & (size.isna() | (size < 1e6)), size).astype("float64")


def _copy_kinds(name: pd.Series, kind: np.ndarray) -> pd.Series:
    label = name.str.extract(r"^\[CUDA memcpy (.*)\]$", expand=False)
    # older nsys print the codes (HtoD); a direction the schema lacks is 'unknown'
    codes = label.map(
        lambda v: _COPY_KINDS.get(v, known(v, COPY_KINDS)) if isinstance(v, str) else v
    )
    return codes.where(kind == "memcpy")


def _mem_kind(t: pd.DataFrame, column: str) -> pd.Series:
    if column not in t:
        return pd.Series(np.nan, index=t.index, dtype="object")
    values = t[column].astype("object")
    kinds = values.where(
        values.isna(), values.astype(str).str.strip().str.lower().str.replace(" ", "_")
    )
    return kinds.where(kinds.isna() | kinds.isin(list(MEMORY_KINDS)), UNKNOWN)


def _dims(t: pd.DataFrame, prefix: str) -> pd.Series:
    axes = [f"{prefix}{a}" for a in "xyz"]
    if not all(a in t for a in axes):
        return pd.Series(np.nan, index=t.index, dtype="object")
    parts = [_whole_numbers(t[a]) for a in axes]
    known = parts[0].notna() & parts[1].notna() & parts[2].notna()
    parts = [p.where(known) for p in parts]
    text = (
        "("
        + parts[0].astype("Int64").astype(str)
        + ", "
        + parts[1].astype("Int64").astype(str)
        + ", "
        + parts[2].astype("Int64").astype(str)
        + ")"
    )
    return text.where(parts[0].notna())
