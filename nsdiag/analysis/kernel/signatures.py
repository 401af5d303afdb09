"""Group kernel launches into signatures (name + grid + block, keyed by model/signature.py) and
aggregate their metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsdiag.model.signature import SEPARATOR, signature_keys

__all__ = ["SIGNATURE", "aggregate", "signature_keys"]

SIGNATURE = ("name", "grid", "block")
_SIGNATURE_KEY = "_signature"
_TIMELINE_COLUMNS = (
    "timeline_total_ns",
    "timeline_launches",
    "timeline_variant",
    "timeline_variants",
)


def aggregate(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per signature, in order of total duration (longest first): the signature's
    typical launch, and what was aggregated.

    Per-launch metrics keep their catalogue names and are duration-weighted means over the
    launches that have them (per-launch counts stay per launch, so ratios between them keep
    their meaning); other columns come from the first launch. The aggregate's own columns:
    `total_duration_ns` (all launches; the timeline's total where a targeted session knows it),
    `profiled_mean_ns` (the mean profiled launch; the catalogue's `duration_ns` holds the same,
    since the verdict, the roofline and the rules read a launch), `launches` and `launch_ids`,
    and `region_mean_ns` (`total_duration_ns` / `launches`: the mean launch where the timeline
    counted them, in the region being diagnosed; the profiled mean without a timeline).
    """
    k = kernels.reset_index(drop=True).copy()
    for col in SIGNATURE:
        if col not in k:
            k[col] = ""
    if k.empty:
        return k.assign(
            total_duration_ns=pd.Series(dtype="float64"),
            profiled_mean_ns=pd.Series(dtype="float64"),
            launches=pd.Series(dtype="int64"),
            launch_ids=pd.Series(dtype=object),
            region_mean_ns=pd.Series(dtype="float64"),
        )
    keys = signature_keys(k).rename(_SIGNATURE_KEY)
    timeline = _timeline_groups(k, keys)
    out = _weighted_means(k, keys, _weights(k, timeline))
    grouped = k.groupby(keys, sort=False)
    if "duration_ns" in k:
        durations = k["duration_ns"].groupby(keys, sort=False)
        out["total_duration_ns"] = durations.sum(min_count=1)
        out["profiled_mean_ns"] = durations.mean()
        out["duration_ns"] = out["profiled_mean_ns"]  # not the duration-weighted mean
    else:
        out["total_duration_ns"] = float("nan")
        out["profiled_mean_ns"] = float("nan")
    out["launches"] = grouped.size()
    out["launch_ids"] = k["id"].astype(int).groupby(keys, sort=False).agg(list)
    if timeline is not None:
        out = _timeline_totals(out, k, keys, timeline)
    # as KernelDiagnosis.region_mean_ns computes it, for the rules' messages (one concat: the
    # inserts above leave a raw full-set table fragmented)
    region_mean = out["total_duration_ns"] / out["launches"].clip(lower=1)
    out = pd.concat([out, region_mean.rename("region_mean_ns")], axis=1)
    out = out.sort_values("total_duration_ns", ascending=False, na_position="last", kind="stable")
    return out.reset_index(drop=True)


def _weights(k: pd.DataFrame, timeline: pd.DataFrame | None) -> pd.Series:
    """Each launch's weight in the means: its duration, or its share of its timeline group."""
    weight = (
        k["duration_ns"].fillna(0).clip(lower=1e-9)
        if "duration_ns" in k
        else pd.Series(1.0, index=k.index)
    )
    if timeline is not None:
        # Profiled launches stand for their duration group of the timeline: each group weighs
        # what it took there, shared among its profiled launches.
        weight = (timeline["total"] / timeline["profiled"]).where(timeline["total"].notna(), weight)
    return weight


def _weighted_means(k: pd.DataFrame, keys: pd.Series, weight: pd.Series) -> pd.DataFrame:
    """One row per signature: the first launch's non-numeric columns, then the weighted mean
    of each numeric column (launches lacking a metric left out of its mean)."""
    numeric = [
        c
        for c, dtype in k.dtypes.items()
        if c != "id"
        and pd.api.types.is_numeric_dtype(dtype)
        and not pd.api.types.is_bool_dtype(dtype)
    ]
    # On plain arrays: a signature's row is a frame of a hundred-odd metric columns, where each
    # pandas operation pays per column. pandas' grouped sum still adds; over one 2-D block its
    # order may differ from the fragmented frame's in the last bit (docs/latency.md).
    codes, uniques = pd.factorize(keys, sort=False)
    values = k[numeric].to_numpy(dtype="float64")
    w = weight.reindex(k.index).to_numpy(dtype="float64")[:, None]

    def grouped_sum(a: np.ndarray, min_count: int = 0) -> np.ndarray:
        return pd.DataFrame(a).groupby(codes, sort=False).sum(min_count=min_count).to_numpy()

    first = k.iloc[np.unique(codes, return_index=True)[1]].drop(columns=numeric)
    first.index = pd.Index(uniques, name=keys.name)
    if not numeric:
        return first
    with np.errstate(all="ignore"):  # as pandas' arithmetic: a corrupt 1e308 cell gives inf
        weighted_sum = grouped_sum(values * w, min_count=1)
        weight_sum = grouped_sum(~np.isnan(values) * w)
        means = weighted_sum / np.where(weight_sum > 0, weight_sum, np.nan)
    return pd.concat([first, pd.DataFrame(means, index=first.index, columns=numeric)], axis=1)


def _timeline_totals(
    out: pd.DataFrame, k: pd.DataFrame, keys: pd.Series, timeline: pd.DataFrame
) -> pd.DataFrame:
    """A targeted session profiles a few launches per signature; the timeline (phase 1) knows
    how many there were and how long they took in all, so that is what the shares use."""
    groups = (
        timeline[timeline["total"].notna()]
        .drop_duplicates("group")
        .groupby(_SIGNATURE_KEY, sort=False)
    )
    total, count = groups["total"].sum(), groups["launches"].sum()
    out.loc[total.index, "total_duration_ns"] = total
    out.loc[count.index, "launches"] = count.round().astype(int)
    if "timeline_variants" in k:
        # how many duration groups the timeline saw for the signature, and how many of them
        # were profiled
        out["duration_groups"] = k["timeline_variants"].groupby(keys, sort=False).max()
        out["duration_groups_profiled"] = (
            timeline["group"].where(timeline["total"].notna()).groupby(keys, sort=False).nunique()
        )
    return out.drop(columns=[c for c in _TIMELINE_COLUMNS if c in out])


def _timeline_groups(k: pd.DataFrame, keys: pd.Series) -> pd.DataFrame | None:
    """Per launch: its timeline duration group (signature + `timeline_variant`), that group's
    timeline total and launch count, and how many profiled launches share the group."""
    if "timeline_total_ns" not in k or not k["timeline_total_ns"].notna().any():
        return None
    variant = (
        k["timeline_variant"].fillna(0).astype(int).astype(str) if "timeline_variant" in k else "0"
    )
    group = keys + SEPARATOR + variant
    return pd.DataFrame(
        {
            _SIGNATURE_KEY: keys,
            "group": group,
            "total": k["timeline_total_ns"],
            "launches": k.get("timeline_launches", pd.Series(float("nan"), index=k.index)),
            "profiled": group.map(group.value_counts()),
        },
        index=k.index,
    )
