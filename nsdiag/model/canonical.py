"""Build the canonical kernel table from raw ncu metrics (already in base units)."""

from __future__ import annotations

import re

import pandas as pd

from nsdiag.model.catalogue import CATALOGUE, IDENTITY_COLUMNS, label_index


def canonical_metrics(raw: pd.DataFrame) -> pd.DataFrame:
    """One column per catalogue metric found in `raw`; the first listed ncu name that has data wins.

    Later fallbacks fill rows the preferred metric leaves empty, so reports that mix ncu versions
    still get one column.
    """
    columns: dict[str, pd.Series] = {}
    available = set(raw.columns)
    for spec in CATALOGUE.values():
        found = [n for n in spec.ncu if n in available]
        if not found or spec.pattern:
            continue
        if spec.groups:
            columns[spec.name] = _first_group_sum(raw, spec.groups)
            continue
        series = pd.to_numeric(raw[found[0]], errors="coerce")
        for fallback in found[1:]:
            series = series.fillna(pd.to_numeric(raw[fallback], errors="coerce"))
        if series.notna().any():
            columns[spec.name] = series.astype("float64")
    for spec in CATALOGUE.values():
        if spec.pattern:
            matched = [c for c in raw.columns if re.search(spec.pattern, str(c))]
            if matched:
                columns[spec.name] = (
                    raw[matched].apply(pd.to_numeric, errors="coerce").sum(axis=1, min_count=1)
                )
    return pd.DataFrame(columns, index=raw.index)


def _first_group_sum(raw: pd.DataFrame, groups: tuple[tuple[str, ...], ...]) -> pd.Series:
    """Per row, the sum of the first group of which any metric was collected (a later group
    fills only rows the earlier ones leave empty, so no operation is counted twice)."""
    total = pd.Series(float("nan"), index=raw.index, dtype="float64")
    for group in groups:
        present = [n for n in group if n in raw.columns]
        if present:
            values = raw[present].apply(pd.to_numeric, errors="coerce")
            total = total.fillna(values.sum(axis=1, min_count=1).astype("float64"))
    return total


def canonical_from_labels(values: dict[str, float]) -> dict[str, float]:
    """Details-page values keyed 'Section/Label' -> canonical values."""
    index = label_index()
    return {index[key]: value for key, value in values.items() if key in index}


def order_columns(kernels: pd.DataFrame) -> pd.DataFrame:
    identity = [c for c in IDENTITY_COLUMNS if c in kernels.columns]
    rest = [c for c in kernels.columns if c not in identity]
    return kernels[identity + rest]
