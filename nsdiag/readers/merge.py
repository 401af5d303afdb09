"""Combine sessions read from several inputs (several ncu reports, ncu + nsys)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from nsdiag.model.catalogue import IDENTITY_COLUMNS
from nsdiag.model.session import Session


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def merge_sessions(sessions: list[Session]) -> Session:
    kernels, raws, rules = [], [], []
    offset = 0
    for s in sessions:
        k = s.kernels.copy()
        k["id"] = k["id"] + offset if len(k) else k["id"]
        r = s.rule_results.copy()
        if len(r):
            r["id"] = r["id"] + offset
        kernels.append(k)
        raws.append(s.raw if len(s.raw) else pd.DataFrame(index=range(len(k))))
        rules.append(r)
        offset += len(k)
    raw_units: dict[str, str] = {}
    meta: dict[str, Any] = {"sources": [], "device": {}}
    for s in sessions:
        raw_units.update(s.raw_units)
        meta["sources"].extend(s.meta.get("sources", []))
        meta["device"] = meta["device"] or s.meta.get("device", {})
        for key, value in s.meta.items():
            meta.setdefault(key, value)
    merged_kernels = _concat(kernels)
    for column in IDENTITY_COLUMNS:  # a column one input lacks is "", not missing
        if column != "id" and column in merged_kernels:
            merged_kernels[column] = merged_kernels[column].fillna("")
    base = Session()
    return Session(
        kernels=merged_kernels if len(merged_kernels) else base.kernels,
        raw=pd.concat(raws, ignore_index=True) if len(merged_kernels) else pd.DataFrame(),
        raw_units=raw_units,
        rule_results=_concat(rules) if any(len(r) for r in rules) else base.rule_results,
        timeline=_concat([s.timeline for s in sessions])
        if any(s.has_timeline() for s in sessions)
        else base.timeline,
        api_calls=_concat([s.api_calls for s in sessions])
        if any(len(s.api_calls) for s in sessions)
        else base.api_calls,
        nvtx_ranges=_concat([s.nvtx_ranges for s in sessions])
        if any(len(s.nvtx_ranges) for s in sessions)
        else base.nvtx_ranges,
        meta=meta,
    )
