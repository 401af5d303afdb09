"""Phase 2's plan (collect/plan.py with rounds.py): the ncu runs and launch counts that reach the
chosen signatures, with mangled and with bare function names."""

from __future__ import annotations

import json

import pytest

import nsdiag
from nsdiag.collect import argv as cmd
from nsdiag.collect import cost, plan, rounds
from tests.conftest import (
    DATA,
    G1,
    G2,
    STEP,
    B,
    timeline,
)


def test_plan_covers_a_template_variant_behind_another() -> None:
    # ew<Mul> is the second launch of (ew, G1, B): one run counting 2 launches per shape reaches it.
    settings = rounds.PlanSettings(coverage=0.9, program_s=5.0, seconds_per_launch=1.0)
    p = plan.make_plan(
        STEP, settings, argv_for=lambda i, r, base: ["ncu", base, str(i), str(r.launch_count)]
    )
    assert [(r.names, r.launch_count, r.launches, r.argv) for r in p.rounds] == [
        (("ew", "gemm", "norm"), 2, 5, ("ncu", "function", "1", "2"))
    ]
    assert {s.name for s in p.rounds[0].wanted} == {
        "void ew<Mul>(int)",
        "void gemm<1>(float)",
        "void norm(float *)",
    }
    assert p.uncovered == () and p.launches == 5 and p.total_launches == 6
    # the program, ncu's interception of the 6 launches up to the last planned one, 5 replays
    assert p.rounds[0].intercepted == 6 and p.estimated_s == pytest.approx(
        5.0 + 6 * cost.SECONDS_PER_INTERCEPTED + 5 * 1.0
    )
    assert p.full_estimated_s == 5.0 + 6 * rounds.SECONDS_PER_LAUNCH["full"]
    # counting 2 per shape also reaches ew<Fill> and the second gemm shape: every signature
    assert p.planned_share == 1.0 and len(p.rounds[0].profiled) == 5
    json.dumps(plan.describe(p))


def test_plan_shared_shape_across_functions_depends_on_the_key() -> None:
    # a: f@G1 then g@G1; both wanted. If ncu's key has no name, g waits behind f.
    t = timeline([("f()", "f", G1, B, 100.0), ("g()", "g", G1, B, 100.0)])
    without = plan.make_plan(t, rounds.PlanSettings(coverage=1.0, key_has_name=False))
    assert [(r.names, r.launch_count) for r in without.rounds] == [(("f", "g"), 2)]
    with_name = plan.make_plan(t, rounds.PlanSettings(coverage=1.0, key_has_name=True))
    assert [(r.names, r.launch_count, r.launches) for r in with_name.rounds] == [(("f", "g"), 1, 2)]


DEEP_VARIANT = [(f"void ew<v{i}>()", "ew", G1, B, 1.0) for i in range(7)] + [
    ("void ew<v7>()", "ew", G1, B, 500.0),
    ("void big()", "big", G2, B, 1000.0),
]


def test_plan_with_mangled_names_needs_one_run() -> None:
    # nsys gives mangled names: ncu counts each template instance apart, so v7 is first of its kind.
    t = timeline(DEEP_VARIANT).assign(
        mangled_name=lambda d: d["name"].map(lambda n: "_Z" + n.replace(" ", ""))
    )
    p = plan.make_plan(
        t,
        rounds.PlanSettings(coverage=0.99),
        argv_for=lambda i, r, base: cmd.ncu_targeted(
            "ncu",
            f"t-{i}",
            ["a"],
            names=r.names,
            metrics=["m"],
            launch_count=r.launch_count,
            name_base=base,
        ),
    )
    assert p.name_base == "mangled" and p.uncovered == ()
    assert [(r.names, r.launch_count, r.launches) for r in p.rounds] == [
        (("_Zvoidbig()", "_Zvoidew<v7>()"), 1, 2)
    ]
    argv = p.rounds[0].argv
    assert argv[argv.index("--kernel-name-base") + 1] == "mangled"
    assert argv[argv.index("-k") + 1] == r"regex:^(_Zvoidbig\(\)|_Zvoidew<v7>\(\))$"


def test_plan_without_mangled_names_cannot_reach_a_deep_variant() -> None:
    # bare function names: v7 is the 8th launch of (ew, G1), beyond max_launch_count.
    p = plan.make_plan(
        timeline(DEEP_VARIANT), rounds.PlanSettings(coverage=0.99, max_launch_count=4)
    )
    assert p.name_base == "function" and [r.names for r in p.rounds] == [("big",)]
    assert [s.name for s in p.uncovered] == ["void ew<v7>()"] and "shadowed" in p.notes[0]


def test_plan_leaves_unreachable_names_out_of_the_filter() -> None:
    # Were the name not part of ncu's key, v7 would still be the 8th launch of its shape: no run
    # reaches it, and the run for big does not filter on ew (it would only profile other variants).
    p = plan.make_plan(
        timeline(DEEP_VARIANT),
        rounds.PlanSettings(coverage=0.99, max_launch_count=4, max_rounds=3, key_has_name=False),
    )
    assert [s.name for s in p.signatures] == ["void big()", "void ew<v7>()"]
    assert p.rounds[0].names == ("big",) and p.rounds[0].launch_count == 1 and p.launches == 1
    assert [s.name for s in p.rounds[0].wanted] == ["void big()"]
    assert [s.name for s in p.uncovered] == ["void ew<v7>()"] and p.notes


def test_plan_last_run_still_prefers_coverage() -> None:
    settings = rounds.PlanSettings(coverage=0.9, max_rounds=1, program_s=5.0)
    p = plan.make_plan(STEP, settings)
    assert len(p.rounds) == 1 and p.rounds[0].launch_count == 2 and p.uncovered == ()


def test_plan_from_a_recorded_nsys_timeline() -> None:
    session = nsdiag.load(DATA / "nsys/pipeline.sqlite.gz")
    p = plan.make_plan(session.timeline, rounds.PlanSettings(coverage=0.9))
    assert {s.function for s in p.signatures} == {
        "float4_kernel",
        "distribution_elementwise_grid_stride_kernel",
    }
    assert p.uncovered == () and len(p.rounds) == 1 and p.rounds[0].launch_count == 1
