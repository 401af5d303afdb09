"""Combine sessions read from several inputs (several ncu reports, ncu + nsys), and say where
they disagree.

- Two ncu inputs holding the same launches (same IDs and kernel names, in order: the raw and
  details pages of one capture, a .ncu-rep and its CSV export, one file copied) are one capture:
  their launches are merged by launch, not counted twice. The first input's values win; a metric
  only the second has fills in. Where both have a value and they differ by more than rounding,
  a warning says so. Exports of the same format whose values agree are the same capture given
  twice: counted once, with a warning.
- Other ncu inputs are appended; where one lacks metrics the verdicts read and another has
  them, a warning says whose verdicts rest on fewer metrics.
- Inputs from different GPUs: a warning (the first input's device is the session's).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from nsdiag.model.catalogue import IDENTITY_COLUMNS
from nsdiag.model.gpu_units import COMPUTE_UNITS, MEMORY_UNITS
from nsdiag.model.meta import first_present
from nsdiag.model.session import Session

# Two readings of one value agree within the rounding of ncu's printed values (auto units print
# 3-4 significant digits; stall counts and percentages 2 decimals, so 0.004 may read 0.00).
AGREE_RELATIVE = 0.05
AGREE_ABSOLUTE = 0.1
# Canonical metrics the bound and limiter are decided from (analysis/kernel/verdict.py reads these).
VERDICT_METRICS: tuple[str, ...] = (
    *MEMORY_UNITS.values(),
    *COMPUTE_UNITS.values(),
    "memory_throughput_pct",
    "sm_throughput_pct",
    "duration_ns",
)


def add_warnings(session: Session, warnings: list[str]) -> None:
    """Append warnings to the session's list (each once)."""
    if not warnings:
        return
    existing = session.meta.warnings
    added = tuple(w for w in dict.fromkeys(warnings) if w not in existing)
    session.meta = replace(session.meta, warnings=existing + added)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _source(session: Session) -> str:
    return ", ".join(s.path or "?" for s in session.meta.sources) or "an input"


def _formats(session: Session) -> set[str]:
    return {s.format for s in session.meta.sources}


def same_launches(a: Session, b: Session) -> bool:
    """Both hold the same ncu launches: same count, IDs, kernel names and process, in order."""
    if not (a.has_kernels() and b.has_kernels()) or len(a.kernels) != len(b.kernels):
        return False
    for column in ("ncu_id", "demangled", "process_id"):
        if column not in a.kernels or column not in b.kernels:
            if column == "process_id":  # a .ncu-rep's launches do not carry it
                continue
            return False
        if a.kernels[column].astype(str).tolist() != b.kernels[column].astype(str).tolist():
            return False
    return True


def _numeric_shared(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    return [
        str(c)
        for c in a.columns
        if c in b.columns
        and c not in IDENTITY_COLUMNS
        and pd.api.types.is_numeric_dtype(a[c])
        and pd.api.types.is_numeric_dtype(b[c])
    ]


def disagreements(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, tuple[int, float]]:
    """Metric -> (launches where both have a value and they differ beyond rounding, the largest
    relative difference)."""
    out: dict[str, tuple[int, float]] = {}
    for column in _numeric_shared(a, b):
        x = a[column].to_numpy(dtype="float64", na_value=np.nan)
        y = b[column].to_numpy(dtype="float64", na_value=np.nan)
        scale = np.maximum(np.abs(x), np.abs(y))
        with np.errstate(invalid="ignore", divide="ignore"):
            relative = np.where(scale > 0, np.abs(x - y) / scale, 0.0)
        differ = (
            np.isfinite(relative) & (relative > AGREE_RELATIVE) & (np.abs(x - y) > AGREE_ABSOLUTE)
        )
        if differ.any():
            out[column] = (int(differ.sum()), float(relative[differ].max()))
    return out


def _fill(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """`first`, with the columns and missing cells it lacks taken from `second` (same rows)."""
    if second.empty:
        return first
    if first.empty:
        return second.reset_index(drop=True)
    first, second = first.reset_index(drop=True), second.reset_index(drop=True)
    out = first.copy()
    for column in second.columns:
        if column not in out:
            out[column] = second[column]
        elif column not in IDENTITY_COLUMNS and out[column].isna().any():
            out[column] = out[column].where(out[column].notna(), second[column])
    return out


def _merge_launches(a: Session, b: Session, warnings: list[str]) -> Session:
    """One capture read twice: merged into the input with more metrics (the raw page rather
    than the details page, whose values are rounded)."""
    if len(b.kernels.columns) + len(b.raw.columns) > len(a.kernels.columns) + len(a.raw.columns):
        a, b = b, a
    differ = disagreements(a.kernels, b.kernels)
    if not differ and _formats(a) == _formats(b):
        warnings.append(
            f"{_source(b)} holds the same {len(a.kernels)} launches as {_source(a)} "
            "(the same capture given twice?); they are counted once"
        )
    elif differ:
        shown = ", ".join(
            f"{metric} on {n} launch(es), by up to {worst:.0%}"
            for metric, (n, worst) in sorted(differ.items(), key=lambda kv: -kv[1][0])[:4]
        )
        more = f" and {len(differ) - 4} more metric(s)" if len(differ) > 4 else ""
        warnings.append(
            f"{_source(a)} and {_source(b)} hold the same launches but disagree ({shown}{more}); "
            f"nsdiag uses the values of {_source(a)}"
        )
    rules = a.rule_results if len(a.rule_results) else b.rule_results
    meta = replace(first_present([a.meta, b.meta]), sources=a.meta.sources + b.meta.sources)
    return Session(
        kernels=_fill(a.kernels, b.kernels.drop(columns=["id", "source"], errors="ignore")),
        raw=_fill(a.raw, b.raw),
        raw_units={**b.raw_units, **a.raw_units},
        rule_results=rules,
        timeline=a.timeline,
        api_calls=a.api_calls,
        nvtx_ranges=a.nvtx_ranges,
        meta=meta,
    )


def _fold_captures(sessions: list[Session], warnings: list[str]) -> list[Session]:
    """Sessions with each capture once (see the module's docstring)."""
    out: list[Session] = []
    for session in sessions:
        match = next((i for i, s in enumerate(out) if same_launches(s, session)), None)
        if match is None:
            out.append(session)
            continue
        out[match] = _merge_launches(out[match], session, warnings)
    return out


def _metric_set_warnings(sessions: list[Session]) -> list[str]:
    """Inputs whose launches lack verdict metrics that other inputs have."""
    profiled = [s for s in sessions if s.has_kernels()]
    have = {
        id(s): {m for m in VERDICT_METRICS if m in s.kernels and s.kernels[m].notna().any()}
        for s in profiled
    }
    union = set().union(*have.values()) if have else set()
    out = []
    for s in profiled:
        lacking = sorted(union - have[id(s)])
        if lacking:
            out.append(
                f"{_source(s)} lacks metrics that other inputs have ({', '.join(lacking)}): "
                "the verdicts of its kernels rest on fewer metrics (profile it with the same "
                "sections as the others)"
            )
    return out


def _device_warnings(sessions: list[Session]) -> list[str]:
    devices = [s.meta.device or {} for s in sessions]
    names = {str(d["name"]) for d in devices if d.get("name")}
    if len(names) < 2:
        return []
    return [
        f"the inputs come from different GPUs ({', '.join(sorted(names))}); nsdiag describes "
        "the first one's"
    ]


def merge_sessions(sessions: list[Session]) -> Session:
    warnings: list[str] = [w for s in sessions for w in s.meta.warnings]
    sessions = _fold_captures(sessions, warnings)
    warnings += _metric_set_warnings(sessions) + _device_warnings(sessions)
    merged = sessions[0] if len(sessions) == 1 else _append(sessions)
    merged.meta = replace(merged.meta, warnings=())
    add_warnings(merged, warnings)
    return merged


def _append(sessions: list[Session]) -> Session:
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
    for s in sessions:
        raw_units.update(s.raw_units)
    # the sources of all, the first GPU named, else the first input's values
    meta = replace(
        first_present(s.meta for s in sessions),
        sources=tuple(source for s in sessions for source in s.meta.sources),
        device=next((s.meta.device for s in sessions if s.meta.device), {}),
    )
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
