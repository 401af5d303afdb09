"""Profiled launches weighted by the phase-1 timeline, and the plan's coverage
(collect/weights.py)."""

from __future__ import annotations

import pandas as pd
import pytest

import nsdiag
from nsdiag.collect import plan, rounds
from nsdiag.model import launches as signatures
from tests.conftest import (
    G1,
    G2,
    STEP,
    B,
    timeline,
)


def test_timeline_weights_give_profiled_launches_their_real_share() -> None:
    from nsdiag.collect.weights import timeline_weights

    kernels = pd.DataFrame(
        {
            "name": ["void ew<Mul>(int)", "void gemm<1>(float)", "void unknown()"],
            "grid": [G1, G2, G1],
            "block": [B, "(256, 1, 1)", B],
        }
    )
    out = timeline_weights(kernels, signatures.kernel_launches(STEP))
    assert out["timeline_launches"].tolist()[:2] == [2, 1] and out["timeline_total_ns"].tolist()[
        :2
    ] == [600.0, 40.0]
    assert out["timeline_launches"].isna().tolist() == [False, False, True]


def test_duration_groups_are_planned_matched_and_weighted() -> None:
    from nsdiag.analysis.kernel.signatures import aggregate
    from nsdiag.collect.weights import coverage, timeline_weights

    # one GEMM kernel and grid doing two amounts of work (10 ns and 30 ns launches, alternating)
    t = timeline([("void gemm<1>(float)", "gemm", G1, B, d) for d in (10.0, 30.0, 10.0, 30.0)])
    p = plan.make_plan(t, rounds.PlanSettings(coverage=1.0))
    # the 30 ns group is chosen; the 10 ns group's first launch comes along (first of its
    # configuration)
    assert [(s.variant, s.variants, s.launches, s.total_ns) for s in p.signatures] == [
        (1, 2, 2, 60.0)
    ]
    # the 30 ns group's first launch is the second of the configuration: counting 2 reaches it
    assert [(r.launch_count, r.launches, len(r.profiled)) for r in p.rounds] == [(2, 2, 2)]
    assert any("duration groups" in n for n in p.notes) and p.planned_share == 1.0
    launches = signatures.kernel_launches(t)
    profiled = pd.DataFrame(
        {
            "id": [0, 1],
            "name": ["void gemm<1>(float)"] * 2,
            "grid": [G1, G1],
            "block": [B, B],
            "duration_ns": [11.0, 29.0],
            "x": [1.0, 3.0],
        }
    )
    weighted = timeline_weights(profiled, launches)
    assert weighted["timeline_variant"].tolist() == [0, 1] and weighted[
        "timeline_total_ns"
    ].tolist() == [20.0, 60.0]
    row = aggregate(weighted).iloc[0]
    assert (
        row["x"] == pytest.approx((1 * 20 + 3 * 60) / 80)
        and row["total_duration_ns"] == 80
        and row["launches"] == 4
    )
    # with the short launch alone, the long group is reported missing
    only_short = nsdiag.Session(kernels=timeline_weights(profiled.iloc[:1], launches))
    assert coverage(p, only_short)["missing"] == [
        {"name": "void gemm<1>(float)", "grid": G1, "block": B, "share": 0.75}
    ]
    short_row = aggregate(only_short.kernels).iloc[0]
    assert short_row["total_duration_ns"] == 20  # what the profiled group stands for
    assert (row["duration_groups"], row["duration_groups_profiled"]) == (2, 2)
    assert (short_row["duration_groups"], short_row["duration_groups_profiled"]) == (2, 1)
    from nsdiag.analysis.engine import diagnose

    assert "only 1 profiled" in diagnose(only_short).kernels[0].verdict_note
    assert (
        "weighted by GPU time" in diagnose(nsdiag.Session(kernels=weighted)).kernels[0].verdict_note
    )
    assert coverage(p, nsdiag.Session(kernels=weighted))["missing"] == []
