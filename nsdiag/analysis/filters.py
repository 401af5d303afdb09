"""Select part of a session (kernel name filters) before diagnosing it."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.session import Session


def keep_kernels(session: Session, pattern: str) -> Session:
    """Only the launches whose name or demangled name matches `pattern` (a regular expression,
    matched without regard to case, as the HTML report's filter does).

    A timeline-only input (nsys) has no per-launch metrics to select: its timeline analyses need
    every activity, so it is kept whole, with a warning saying how many launches matched."""
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise InputError(
            f"--kernel {pattern!r} is not a valid regular expression: {exc}",
            "e.g. --kernel 'gemm|conv'",
        ) from exc
    if not session.has_kernels() and session.has_timeline():
        return _timeline_only(session, pattern, regex)
    names = session.kernels["name"]
    demangled = session.kernels.get("demangled", names)
    # numpy booleans: pandas 3's string arrays have no `|`
    mask = _matches(names, regex) | _matches(demangled, regex)
    if not mask.any():
        raise InputError(
            f"no kernel matches --kernel {pattern!r}", "run without --kernel to list the kernels"
        )
    return _keep_launches(session, pd.Series(mask, index=session.kernels.index))


def _matches(names: pd.Series, regex: re.Pattern[str]) -> np.ndarray:
    """Whether each name matches, tested once per distinct name."""
    codes, distinct = pd.factorize(names.astype("object").fillna("").astype(str).to_numpy())
    hits = np.array([bool(regex.search(n)) for n in distinct] + [False], dtype=bool)
    return hits[codes]


def _timeline_only(session: Session, pattern: str, regex: re.Pattern[str]) -> Session:
    timeline = session.timeline
    kernels = timeline[(timeline["kind"] == "kernel").to_numpy()]
    matched = int(_matches(kernels["name"], regex).sum()) if len(kernels) else 0
    if not matched:
        raise InputError(
            f"no kernel on the timeline matches --kernel {pattern!r}",
            "run without --kernel to see the timeline's kernels",
        )
    warning = (
        f"--kernel {pattern!r} matched {matched} of {len(kernels)} kernel launches on the "
        "timeline; a timeline has no per-kernel metrics to select, so its analyses still see "
        "every activity"
    )
    return replace(session, meta=replace(session.meta, warnings=(*session.meta.warnings, warning)))


def keep_nvtx_range(session: Session, name: str) -> Session:
    """Only the profiled launches made inside the NVTX range `name` (ncu's `--nvtx` column, a
    range or one level of a nested `outer/inner` path): `--region nvtx:NAME` for an input with
    no timeline."""
    ranges = session.kernels.get("nvtx_range")
    if ranges is None or not ranges.notna().any():
        raise InputError(
            f"--region nvtx:{name}: the input has neither a timeline nor NVTX ranges per kernel",
            "record it with nsys, or with ncu --nvtx",
        )
    paths = ranges.fillna("").astype(str)
    mask = paths.map(lambda p: p == name or name in p.split("/"))
    if not mask.any():
        known = ", ".join(sorted(set(paths) - {""})[:8])
        raise InputError(f"no kernel ran in NVTX range {name!r}", f"the ranges are: {known}")
    return _keep_launches(session, mask)


def _keep_launches(session: Session, mask: pd.Series) -> Session:
    """The session with only the profiled launches `mask` selects (raw metrics and ncu's rule
    results with them); the timeline as it is."""
    index = mask[mask].index
    rules = session.rule_results
    kept_ids = set(session.kernels.loc[index, "id"])
    return replace(
        session,
        kernels=session.kernels.loc[index].reset_index(drop=True),
        raw=session.raw.loc[index].reset_index(drop=True) if len(session.raw) else session.raw,
        rule_results=rules[rules["id"].isin(kept_ids)] if len(rules) else rules,
    )
