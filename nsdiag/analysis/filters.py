"""Select part of a session (kernel name filters) before diagnosing it."""

from __future__ import annotations

import re

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
    index = mask[mask].index
    rules = session.rule_results
    kept_ids = set(session.kernels.loc[index, "id"])
    return Session(
        kernels=session.kernels.loc[index].reset_index(drop=True),
        raw=session.raw.loc[index].reset_index(drop=True) if len(session.raw) else session.raw,
        raw_units=session.raw_units,
        rule_results=rules[rules["id"].isin(kept_ids)] if len(rules) else rules,
        timeline=session.timeline,
        api_calls=session.api_calls,
        nvtx_ranges=session.nvtx_ranges,
        meta=session.meta,
    )
