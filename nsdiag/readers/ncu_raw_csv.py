"""Reader for `ncu --csv --page raw` exports (one row per launch, one column per metric)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.catalogue import expected_base_units
from nsdiag.model.session import Session
from nsdiag.model.units import parse_unit
from nsdiag.readers.csv_table import CsvTable, open_table
from nsdiag.readers.kernel_table import build_session
from nsdiag.readers.validate import numeric_metrics

# Header cells of the identity columns (ncu 2023+), mapped to Session identity names.
IDENTITY_HEADERS = {
    "ID": "ncu_id",
    "Process ID": "process_id",
    "Process Name": "process_name",
    "Host Name": "host",
    "Kernel Name": "name",
    "Kernel Time": "kernel_time",
    "Context": "context",
    "Stream": "stream",
    "Block Size": "block",
    "Grid Size": "grid",
    "Device": "device",
    "CC": "cc",
}


NVTX_PREFIXES = ("thread Domain:Push/Pop_Range", "Id:Domain:Start/Stop_Range")
_NVTX_ENTRY = re.compile(r'"([^"]*)"')


def read(path: Path) -> Session:
    with open_table(path, expect="ncu-raw") as table:
        return read_table(table)


def read_table(table: CsvTable) -> Session:
    """The Session of an open raw-page export (its rows are streamed to pandas once)."""
    path, header = table.path, table.header
    second = table.rows.peek()
    has_units_row = second.startswith(('""', ","))
    units_row = next(csv.reader([second])) if has_units_row else [""] * len(header)
    identity = [h for h in header if h in IDENTITY_HEADERS]
    nvtx_cols = [h for h in header if h.startswith(NVTX_PREFIXES)]
    frame = table.frame(
        "ncu CSV table",
        "re-export it with ncu --csv --page raw",
        skiprows=[1] if has_units_row else None,
        thousands=",",
        na_values=["n/a", "N/A", ""],
        keep_default_na=False,
        # Parsed in chunks: the peak stays near the table's size, not twice it. A column whose
        # chunks parse differently (one '-nan' cell) comes back as text; numeric_metrics
        # below reads its cells one by one.
        low_memory=True,
        dtype=dict.fromkeys(identity + nvtx_cols, str),
    )
    if "ID" in frame:  # launches have a numeric ID; a program's output line is not a launch
        frame = frame[frame["ID"].fillna("").str.strip().str.isdigit()].reset_index(drop=True)
    if frame.empty:
        raise InputError(
            f"{path} has a header but no kernel rows", "profile at least one kernel launch"
        )
    # a units row may be shorter than the header (trailing empty cells): those have no unit
    units = dict(zip(header, units_row, strict=False))
    metric_cols = [c for c in frame.columns if c not in IDENTITY_HEADERS and c not in nvtx_cols]
    ids = frame["ID"].tolist() if "ID" in frame else None
    # Checked before scaling: a column with one bad cell is text until its cells are numbers.
    metrics, warnings = numeric_metrics(
        frame[metric_cols],
        {c: parse_unit(units.get(c, ""))[0] for c in metric_cols},
        str(path),
        ids,
    )
    metrics, unit_warnings = _known_units(metrics, units, str(path))
    raw, raw_units = _to_base_units(metrics, units)
    ident = frame[identity].rename(columns=IDENTITY_HEADERS).fillna("")
    if nvtx_cols:
        ident["nvtx_range"] = (
            frame[nvtx_cols].fillna("").agg(" ".join, axis=1).map(innermost_nvtx_range)
        )
    return build_session(
        ident,
        raw,
        raw_units,
        source=str(path),
        fmt="ncu-raw-csv",
        warnings=[*table.warnings, *warnings, *unit_warnings],
    )


def innermost_nvtx_range(cell: str) -> str:
    """'714  "<default domain>:naive:none:..." ' -> 'naive' (with --nvtx, ncu lists the ranges
    enclosing the launch as quoted 'domain:name:payload...' entries, outermost first)."""
    names = [entry.split(":")[1] for entry in _NVTX_ENTRY.findall(cell) if entry.count(":") >= 1]
    return names[-1] if names else ""


def _known_units(
    metrics: pd.DataFrame, units: dict[str, str], source: str
) -> tuple[pd.DataFrame, list[str]]:
    """Time, size, clock and bandwidth metrics whose printed unit does not reduce to theirs
    (a duration in 'furlong' or 'cycle') are left out, with a warning: scaled by a guess they
    would be wrong numbers."""
    expected = expected_base_units()
    wrong: dict[str, str] = {}
    for column in metrics.columns:
        unit = units.get(column, "").strip()
        want = expected.get(column)
        if want and unit and parse_unit(unit)[0].split("/")[0] != want.split("/")[0]:
            wrong[column] = unit
    if not wrong:
        return metrics, []
    shown = ", ".join(f"{c} in {u!r} ({expected[c]} expected)" for c, u in list(wrong.items())[:3])
    more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
    warning = (
        f"{source}: the units row gives {shown}{more}, a unit nsdiag cannot convert; "
        "those columns are left out"
    )
    return metrics.drop(columns=list(wrong)), [warning]


def _to_base_units(
    metrics: pd.DataFrame, units: dict[str, str]
) -> tuple[pd.DataFrame, dict[str, str]]:
    raw_units: dict[str, str] = {}
    scale: dict[str, float] = {}
    for col in metrics.columns:
        base, factor = parse_unit(units.get(col, ""))
        raw_units[col] = base
        if factor != 1.0 and pd.api.types.is_numeric_dtype(metrics[col]):
            scale[col] = factor
    if scale:
        scaled = metrics[list(scale)].astype("float64").mul(pd.Series(scale))
        metrics = metrics.drop(columns=list(scale)).join(scaled)[list(metrics.columns)]
    return metrics, raw_units
