"""Group kernel launches into signatures (name + grid + block) and aggregate their metrics."""
from __future__ import annotations

import numpy as np
import pandas as pd

SIGNATURE = ("name", "grid", "block")


def aggregate(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per signature, in order of total duration (longest first).

    Numeric metrics are duration-weighted means over launches (per-launch counts stay per launch,
    so ratios between them keep their meaning); `duration_ns` is the mean launch, and
    `total_duration_ns`, `launches` and `launch_ids` say what was aggregated.
    """
    if kernels.empty:
        return kernels.assign(launches=pd.Series(dtype="int64"), launch_ids=pd.Series(dtype=object))
    k = kernels.copy()
    for col in SIGNATURE:
        if col not in k:
            k[col] = ""
    k["_weight"] = k["duration_ns"].fillna(0) if "duration_ns" in k else 1.0
    k.loc[k["_weight"] <= 0, "_weight"] = 1e-9
    keys = k[list(SIGNATURE)].astype(str).agg("\x1f".join, axis=1)
    numeric = [c for c in k.columns if c not in ("id", "_weight") and pd.api.types.is_numeric_dtype(k[c])]
    rows = []
    for _, group in k.groupby(keys, sort=False):
        weights = group["_weight"].to_numpy()
        row = group.iloc[0].drop(labels=["_weight"]).to_dict()
        for col in numeric:
            values = group[col].to_numpy(dtype="float64")
            mask = ~np.isnan(values)
            row[col] = float(np.average(values[mask], weights=weights[mask])) if mask.any() else np.nan
        row["total_duration_ns"] = float(group["duration_ns"].sum(min_count=1)) if "duration_ns" in group else np.nan
        row["duration_ns"] = float(group["duration_ns"].mean()) if "duration_ns" in group else np.nan
        row["mean_duration_ns"] = row["duration_ns"]
        row["launches"] = len(group)
        row["launch_ids"] = [int(i) for i in group["id"]]
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.sort_values("total_duration_ns", ascending=False, na_position="last", kind="stable").reset_index(drop=True)
