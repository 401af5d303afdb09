"""Reader for `ncu --csv --page details` exports: section metrics by label, plus ncu's rule results.

Metric rows carry a section display name and a label ("Duration") or, with
`--print-metric-name name`, the ncu metric name; rule rows carry the rule id, its type
(OPT/WRN/INF), message and estimated speedup. Both are kept.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.canonical import canonical_from_labels
from nsdiag.model.session import RULE_RESULT_COLUMNS, Session
from nsdiag.model.units import parse_unit
from nsdiag.readers.csv_table import CsvTable, open_table
from nsdiag.readers.kernel_table import build_session
from nsdiag.readers.ncu_raw_csv import IDENTITY_HEADERS, NVTX_PREFIXES, innermost_nvtx_range

_RULE_COLUMNS = {
    "Rule Name": "rule",
    "Rule Type": "type",
    "Rule Description": "message",
    "Estimated Speedup Type": "speedup_type",
    "Estimated Speedup": "speedup",
}


def read(path: Path) -> Session:
    with open_table(path, expect="ncu-details") as table:
        return read_table(table)


def read_table(table: CsvTable) -> Session:
    """The Session of an open details-page export (its rows are streamed to pandas once)."""
    path = table.path
    frame = _launch_rows(table)
    # ID identifies a launch; keep first-seen order.
    ids = list(dict.fromkeys(frame["ID"]))
    raw, raw_units, extra, warnings = _metrics(frame, ids, str(path))
    return build_session(
        _identity(frame, ids),
        raw,
        raw_units,
        source=str(path),
        fmt="ncu-details-csv",
        rule_results=_rule_results(frame, ids),
        extra_canonical=extra,
        warnings=[*table.warnings, *warnings],
    )


def _launch_rows(table: CsvTable) -> pd.DataFrame:
    """The export's rows that belong to a launch, as text, after checking the columns."""
    path = table.path
    frame = table.frame(
        "ncu details table",
        "re-export it with ncu --csv --page details",
        dtype=str,
        keep_default_na=False,
    )
    needed = {"ID", "Section Name", "Metric Name", "Metric Unit", "Metric Value"}
    if not needed <= set(frame.columns):
        missing = ", ".join(sorted(needed - set(frame.columns)))
        raise InputError(
            f"{path} is not an ncu details-page export (missing columns: {missing})",
            "export with ncu --csv --page details --print-details all",
        )
    # With --print-details all, ncu also prints section tables (NVLink topology, ...) as
    # free-form lines inside the CSV; the launch rows are the ones with a numeric ID.
    frame = frame[frame["ID"].str.strip().str.isdigit()]
    if frame.empty:
        raise InputError(f"{path} has a header but no rows", "profile at least one kernel launch")
    return frame


def _identity(frame: pd.DataFrame, ids: list[str]) -> pd.DataFrame:
    """One row per launch: its name, grid, block, ... and innermost NVTX range."""
    identity_cols = [h for h in frame.columns if h in IDENTITY_HEADERS]
    first_rows = frame.drop_duplicates("ID").set_index("ID").loc[ids]
    identity = first_rows.reset_index()[identity_cols].rename(columns=IDENTITY_HEADERS)
    nvtx_cols = [h for h in frame.columns if h.startswith(NVTX_PREFIXES)]
    if nvtx_cols:
        identity["nvtx_range"] = (
            first_rows[nvtx_cols]
            .fillna("")
            .agg(" ".join, axis=1)
            .map(innermost_nvtx_range)
            .to_numpy()
        )
    return identity


def _metrics(
    frame: pd.DataFrame, ids: list[str], source: str
) -> tuple[pd.DataFrame, dict[str, str], pd.DataFrame, list[str]]:
    """Metric values in base units: rows named by ncu metric name as raw metrics (with their
    units), rows named by label as canonical metrics through the catalogue's label table; and
    a warning for values with a unit that are not numbers."""
    metric_rows = frame[frame["Metric Name"] != ""]
    text = metric_rows["Metric Value"].str.replace(",", "", regex=False).str.strip()
    # 'nan' and '-nan' read as missing already; only cells read as missing can be those words
    values = pd.to_numeric(text, errors="coerce")
    warnings = _not_numbers(metric_rows, values, source)
    # each distinct unit parsed once (a page of 100,000 rows has a few dozen)
    codes, units = pd.factorize(metric_rows["Metric Unit"], use_na_sentinel=False)
    parsed = [parse_unit(u) for u in units]
    factors = pd.Series(
        np.array([factor for _, factor in parsed], dtype="float64")[codes],
        index=metric_rows.index,
    )
    metric_rows = metric_rows.assign(
        value=values * factors,
        base_unit=np.array([unit for unit, _ in parsed], dtype=object)[codes],
    )
    by_name = metric_rows["Metric Name"].str.contains("__", regex=False)

    # Rows named by ncu metric name go to `raw` as they are.
    named = metric_rows[by_name]
    raw = named.pivot_table(index="ID", columns="Metric Name", values="value", aggfunc="first")
    raw = raw.reindex(ids).reset_index(drop=True)
    raw.columns.name = None
    raw_units = dict(zip(named["Metric Name"], named["base_unit"], strict=True))

    # Rows named by label are mapped through the catalogue's label table.
    # Labels identify a metric only in a section's header and body tables, not inside charts
    # and breakdowns (Body Item Label set), where the same label can mean another metric.
    in_chart = metric_rows["Body Item Label"] != "" if "Body Item Label" in metric_rows else False
    labelled = metric_rows[~by_name & ~in_chart]
    labelled = labelled.assign(key=labelled["Section Name"] + "/" + labelled["Metric Name"])
    per_launch = {
        launch_id: canonical_from_labels(dict(zip(group["key"], group["value"], strict=True)))
        for launch_id, group in labelled.groupby("ID", sort=False)
    }
    extra = pd.DataFrame([per_launch.get(launch_id, {}) for launch_id in ids])
    return raw, raw_units, extra, warnings


def _not_numbers(metric_rows: pd.DataFrame, values: pd.Series, source: str) -> list[str]:
    """A metric value that says it is not a number ('-nan', 'nan'): that value is missing.
    (Text values are many and legitimate here: chart data, names, 'n/a'.)"""
    missing = values.isna()
    text = metric_rows["Metric Value"][missing].str.strip()
    bad = text.str.lower().str.lstrip("+-").eq("nan").reindex(values.index, fill_value=False)
    if not bad.any():
        return []
    shown = [
        f"{r['Section Name']}/{r['Metric Name']} = {r['Metric Value']!r} (ID {r['ID']})"
        for _, r in metric_rows[bad].head(3).iterrows()
    ]
    more = int(bad.sum()) - len(shown)
    return [
        f"{source}, column Metric Value: {int(bad.sum())} value(s) are not numbers "
        f"({'; '.join(shown)}{f' and {more} more' if more > 0 else ''}); they are left out"
    ]


def _rule_results(frame: pd.DataFrame, ids: list[str]) -> pd.DataFrame:
    if "Rule Name" not in frame:
        return pd.DataFrame(columns=list(RULE_RESULT_COLUMNS))
    rows = frame[frame["Rule Name"] != ""]
    out = rows[["ID", "Section Name", *[c for c in _RULE_COLUMNS if c in rows]]].rename(
        columns={"Section Name": "section", **_RULE_COLUMNS}
    )
    position = {launch_id: i for i, launch_id in enumerate(ids)}
    out.insert(0, "id", out.pop("ID").map(position))
    if "speedup" in out:
        out["speedup"] = pd.to_numeric(
            out["speedup"].str.replace(",", "", regex=False), errors="coerce"
        )
    for col in RULE_RESULT_COLUMNS:
        if col not in out:
            out[col] = None
    return out[list(RULE_RESULT_COLUMNS)].reset_index(drop=True)
