"""Profiled kernels matched back to phase 1's signatures: the timeline weights a targeted session
needs (it profiles one launch of a signature that ran many times), and the plan's coverage."""

from __future__ import annotations

from typing import Any

import pandas as pd

from nsdiag.collect.plan import Plan
from nsdiag.model.launches import Signature
from nsdiag.model.matching import timeline_weights
from nsdiag.model.session import Session
from nsdiag.model.signature import signature_key

__all__ = ["coverage", "timeline_weights"]


def coverage(plan: Plan, session: Session) -> dict[str, Any]:
    """Which planned signatures the ncu reports hold (matched by their signature key,
    model/signature.py, or its shape where the key differs; a signature split into duration
    groups needs a launch matched to its own group)."""
    k = session.kernels
    variant = (
        k["timeline_variant"].fillna(0).astype(int)
        if "timeline_variant" in k
        else pd.Series(0, index=k.index)
    )
    profiled = (
        {
            (signature_key(n, g, b), v)
            for n, g, b, v in zip(k["name"], k["grid"], k["block"], variant, strict=True)
        }
        if len(k)
        else set()
    )
    keys = {p[0] for p in profiled}
    shapes = {p[0].shape for p in profiled}
    found: list[Signature] = []
    missing: list[Signature] = []
    # the plan chose not to reach these (its notes say why): left out, not missing
    left_out = list(plan.uncovered)
    for s in plan.signatures:
        key = s.key  # key.shape: its demangled name's bare function, grid and block
        hit = (key, s.variant) in profiled if s.variants > 1 else key in keys or key.shape in shapes
        if hit:
            found.append(s)
        elif s not in left_out:
            missing.append(s)
    return {
        "left_out": len(left_out),
        "left_out_share": round(sum(s.share for s in left_out), 6),
        "planned": len(plan.signatures),
        "profiled": len(found),
        "profiled_share": round(sum(s.share for s in found), 6),
        "missing_share": round(sum(s.share for s in missing), 6),
        "missing": [
            {"name": s.name, "grid": s.grid, "block": s.block, "share": round(s.share, 6)}
            for s in missing
        ],
    }
