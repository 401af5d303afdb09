"""Checks on the values that enter a Session: a value that cannot be true is left out, with a
warning that names the file, the row and the column, never reported as a fact.

- A metric column is numeric when most of its cells are numbers; its other cells (`-nan`, `inf`,
  `n/a`, text) become missing one by one, not the whole column.
- No metric is infinite; no time (ns) or size (bytes) is negative.
- An interval (a GPU activity, a CUDA call, an NVTX range) ends at or after its start.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

ROWS_NAMED = 3  # rows quoted in one warning; the rest are counted
NON_NEGATIVE_UNITS = ("ns", "byte")
_NA_TEXT = {"", "n/a", "N/A"}  # what ncu itself prints for a metric it has no value for


def _where(rows: Sequence[int], labels: Sequence[str] | None) -> str:
    named = [
        f"row {int(r) + 1}" + (f" (ID {labels[r]})" if labels is not None else "") for r in rows
    ]
    more = len(rows) - ROWS_NAMED
    return ", ".join(named[:ROWS_NAMED]) + (f" and {more} more" if more > 0 else "")


def _is_text(series: pd.Series) -> bool:
    return not pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def numeric_metrics(
    raw: pd.DataFrame,
    units: dict[str, str],
    source: str,
    labels: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """`raw` with its metric columns checked (see the module's rules), and the warnings."""
    warnings: list[str] = []
    fixed: dict[str, pd.Series] = {}
    clean = _clean_numeric_columns(raw, units)
    for position, column in enumerate(raw.columns):
        if position in clean:
            continue  # numbers already, none impossible: nothing to check one by one
        series = original = raw[column]
        if _is_text(series):
            converted = _mostly_numbers(series)
            if converted is None:
                continue
            text = series.astype("object")
            bad = converted.isna() & text.notna() & ~text.astype(str).str.strip().isin(_NA_TEXT)
            if bad.any():
                rows = np.flatnonzero(bad.to_numpy()).tolist()
                examples = sorted({str(v) for v in text[bad].head(ROWS_NAMED)})
                warnings.append(
                    f"{source}, column {column}: {len(rows)} cell(s) are not numbers "
                    f"({', '.join(map(repr, examples))} at {_where(rows, labels)}); "
                    "those cells are left out"
                )
            series = converted
        values = series.to_numpy(dtype="float64", na_value=np.nan)
        bad_mask = np.isinf(values)
        if units.get(str(column), "") in NON_NEGATIVE_UNITS:
            bad_mask |= values < 0
        if bad_mask.any():
            rows = np.flatnonzero(bad_mask).tolist()
            examples = sorted({f"{v:g}" for v in values[bad_mask][:ROWS_NAMED]})
            unit = units.get(str(column), "")
            warnings.append(
                f"{source}, column {column}: {len(rows)} impossible value(s) "
                f"({', '.join(examples)}{' ' + unit if unit else ''} at {_where(rows, labels)}); "
                "those cells are left out"
            )
            values = np.where(bad_mask, np.nan, values)
            series = pd.Series(values, index=raw.index)
        if series is not original:  # pandas 3 gives a new Series for each raw[column]
            fixed[str(column)] = series
    if fixed:
        raw = raw.assign(**fixed)
    return raw, warnings


def _clean_numeric_columns(raw: pd.DataFrame, units: dict[str, str]) -> set[int]:
    """Positions of the numeric columns with no infinite value (and no negative one where the
    unit forbids it), found in one pass over them all: a raw page has some 2,000 metric
    columns, nearly all numbers and fine, which column by column cost 50 ms a read."""
    numeric = [
        i
        for i, dtype in enumerate(raw.dtypes)
        if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
    ]
    if not numeric or not len(raw):
        return set(numeric)
    values = raw.iloc[:, numeric].to_numpy(dtype="float64", na_value=np.nan)
    non_negative = np.array(
        [units.get(str(raw.columns[i]), "") in NON_NEGATIVE_UNITS for i in numeric]
    )
    with np.errstate(invalid="ignore"):
        bad = np.isinf(values) | ((values < 0) & non_negative[None, :])
    flagged = bad.any(axis=0)
    return {i for i, f in zip(numeric, flagged, strict=True) if not f}


def _mostly_numbers(series: pd.Series) -> pd.Series | None:
    """The column as floats when most of its filled cells read as numbers (thousands
    separators allowed), else None (a text column, such as a device name)."""
    text = series.astype("object").where(series.notna(), None)
    filled = text.notna()
    if not filled.any():
        return None
    cleaned = text[filled].astype(str).str.replace(",", "", regex=False).str.strip()
    # '-nan' and 'nan' parse as floats, but they say the value is missing
    nan_words = cleaned.str.lower().str.lstrip("+-").eq("nan")
    numbers = pd.to_numeric(cleaned, errors="coerce").where(~nan_words)
    finite = int(np.isfinite(numbers.to_numpy(dtype="float64", na_value=np.nan)).sum())
    if finite == 0 or finite * 2 < int(filled.sum()):
        return None
    out = pd.Series(np.nan, index=series.index, dtype="float64")
    out[filled] = numbers.astype("float64")
    return out


def intervals(
    frame: pd.DataFrame, what: str, source: str, start: str = "start_ns", end: str = "end_ns"
) -> tuple[pd.DataFrame, list[str]]:
    """`frame` without rows whose interval is missing, infinite or reversed, and the warning."""
    if not len(frame) or start not in frame or end not in frame:
        return frame, []
    starts = pd.to_numeric(frame[start], errors="coerce").to_numpy(dtype="float64")
    ends = pd.to_numeric(frame[end], errors="coerce").to_numpy(dtype="float64")
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(starts) | ~np.isfinite(ends) | (ends < starts)
        bad |= (np.abs(starts) > 2**62) | (np.abs(ends) > 2**62)  # beyond a timestamp's int64
    if not bad.any():
        return frame, []
    rows = np.flatnonzero(bad).tolist()
    warning = (
        f"{source}: {len(rows)} {what} have no valid interval (missing, infinite, or ending "
        f"before they start; {_where(rows, None)}); they are left out"
    )
    return frame[~bad].reset_index(drop=True), [warning]
