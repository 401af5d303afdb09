"""Select part of a session (kernel name filters) before diagnosing it."""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd

from nsdiag.errors import InputError
from nsdiag.model.session import Session


def keep_kernels(session: Session, pattern: str) -> Session:
    """Only the launches whose name or demangled name matches `pattern` (a regular expression)."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise InputError(
            f"--kernel {pattern!r} is not a valid regular expression: {exc}",
            "e.g. --kernel 'gemm|conv'",
        ) from exc
    names = session.kernels["name"].astype(str)
    demangled = session.kernels.get("demangled", names).astype(str)
    mask = names.map(lambda n: bool(regex.search(n))) | demangled.map(
        lambda n: bool(regex.search(n))
    )
    if not mask.any():
        raise InputError(
            f"no kernel matches --kernel {pattern!r}", "run without --kernel to list the kernels"
        )
    return _keep_launches(session, mask)


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
