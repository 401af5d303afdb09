"""Group kernel launches into signatures (name + grid + block) and aggregate their metrics."""

from __future__ import annotations

import pandas as pd

SIGNATURE = ("name", "grid", "block")


def aggregate(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per signature, in order of total duration (longest first).

    Numeric metrics are duration-weighted means over launches, ignoring launches that lack the
    metric (per-launch counts stay per launch, so ratios between them keep their meaning);
    `duration_ns` is the mean launch, and `total_duration_ns`, `launches` and `launch_ids` say
    what was aggregated. Other columns come from the first launch.
    """
    k = kernels.reset_index(drop=True).copy()
    for col in SIGNATURE:
        if col not in k:
            k[col] = ""
    if k.empty:
        return k.assign(
            total_duration_ns=pd.Series(dtype="float64"),
            mean_duration_ns=pd.Series(dtype="float64"),
            launches=pd.Series(dtype="int64"),
            launch_ids=pd.Series(dtype=object),
        )
    keys = k[list(SIGNATURE)].astype(str).agg("\x1f".join, axis=1).rename("_signature")
    weight = (
        k["duration_ns"].fillna(0).clip(lower=1e-9)
        if "duration_ns" in k
        else pd.Series(1.0, index=k.index)
    )
    timeline = _timeline_groups(k, keys)
    if timeline is not None:
        # Profiled launches stand for their duration group of the timeline: each group weighs
        # what it took there, shared among its profiled launches.
        weight = (timeline["total"] / timeline["profiled"]).where(timeline["total"].notna(), weight)
    numeric = [
        c
        for c in k.columns
        if c != "id"
        and pd.api.types.is_numeric_dtype(k[c])
        and not pd.api.types.is_bool_dtype(k[c])
    ]
    values = k[numeric].astype("float64")
    present = values.notna()
    weighted_sum = values.mul(weight, axis=0).groupby(keys, sort=False).sum(min_count=1)
    weight_sum = present.mul(weight, axis=0).groupby(keys, sort=False).sum()
    means = weighted_sum / weight_sum.where(weight_sum > 0)
    grouped = k.groupby(keys, sort=False)
    head = grouped.head(1)
    first = head.set_index(keys[head.index])
    out = first.drop(columns=numeric).join(means).copy()  # one block: adding columns stays cheap
    if "duration_ns" in k:
        durations = k["duration_ns"].groupby(keys, sort=False)
        out["total_duration_ns"] = durations.sum(min_count=1)
        out["duration_ns"] = durations.mean()
    else:
        out["total_duration_ns"] = float("nan")
    out["mean_duration_ns"] = out["duration_ns"] if "duration_ns" in out else float("nan")
    out["launches"] = grouped.size()
    out["launch_ids"] = k["id"].astype(int).groupby(keys, sort=False).agg(list)
    # A targeted session profiles a few launches per signature; the timeline (phase 1) knows
    # how many there were and how long they took in all, so that is what the shares use.
    if timeline is not None:
        groups = (
            timeline[timeline["total"].notna()]
            .drop_duplicates("group")
            .groupby(keys.name, sort=False)
        )
        total, count = groups["total"].sum(), groups["launches"].sum()
        out.loc[total.index, "total_duration_ns"] = total
        out.loc[count.index, "launches"] = count.round().astype(int)
        if "timeline_variants" in k:
            # how many duration groups the timeline saw for the signature, and how many were profiled
            out["duration_groups"] = k["timeline_variants"].groupby(keys, sort=False).max()
            out["duration_groups_profiled"] = (
                timeline["group"]
                .where(timeline["total"].notna())
                .groupby(keys, sort=False)
                .nunique()
            )
        out = out.drop(
            columns=[
                c
                for c in (
                    "timeline_total_ns",
                    "timeline_launches",
                    "timeline_variant",
                    "timeline_variants",
                )
                if c in out
            ]
        )
    out = out.sort_values("total_duration_ns", ascending=False, na_position="last", kind="stable")
    return out.reset_index(drop=True)


def _timeline_groups(k: pd.DataFrame, keys: pd.Series) -> pd.DataFrame | None:
    """Per launch: its timeline duration group (signature + `timeline_variant`), that group's
    timeline total and launch count, and how many profiled launches share the group."""
    if "timeline_total_ns" not in k or not k["timeline_total_ns"].notna().any():
        return None
    variant = (
        k["timeline_variant"].fillna(0).astype(int).astype(str) if "timeline_variant" in k else "0"
    )
    group = keys + "\x1f" + variant
    return pd.DataFrame(
        {
            keys.name: keys,
            "group": group,
            "total": k["timeline_total_ns"],
            "launches": k.get("timeline_launches", pd.Series(float("nan"), index=k.index)),
            "profiled": group.map(group.value_counts()),
        },
        index=k.index,
    )
