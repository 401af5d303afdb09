"""Phase 2 picks its launches inside the analysed region (collect/phase1.mark_region and the
launch skip of collect/rounds.py), on the phase-1 timelines of real programs."""

from __future__ import annotations

import gzip
import itertools
from functools import cache

import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.records.region import Region
from nsdiag.collect import argv as cmd
from nsdiag.collect import rounds
from nsdiag.collect.phase1 import mark_region
from nsdiag.collect.plan import Plan, plan_launches
from nsdiag.collect.rounds import PlanSettings
from nsdiag.model.launches import kernel_launches
from tests.conftest import DATA


@cache
def _phase1(name: str, profile_from_start: bool | None = None) -> tuple[pd.DataFrame, Region]:
    session = nsdiag.load(DATA / "programs" / name)
    launches, region, _ = mark_region(
        session, kernel_launches(session.timeline), "auto", profile_from_start
    )
    return launches, region


def _profiled_positions(launches: pd.DataFrame, plan: Plan) -> set[int]:
    return {p for r in plan.rounds for p in rounds.launch_positions(launches, r)}


def test_lm_training_profiles_a_steady_step_not_the_warm_up() -> None:
    """The first train_step is warm-up (1.8 s: autotuning, allocation); every chosen signature
    gets a launch inside the steady steps, and the plan steps over the warm-up ones."""
    launches, region = _phase1("lm_train_full")
    assert region.method == "nvtx-iterations" and len(region.warmup) == 1
    plan = plan_launches(launches)
    positions = _profiled_positions(launches, plan)
    inside = set(launches.index[launches["in_region"]])
    for s in plan.signatures:
        assert set(s.positions) <= inside
        assert s in plan.declined or positions & set(s.positions), s.name
    # it steps over the warm-up: ignoring every launch before the region's first (ncu's
    # --launch-skip-before-match), or skipping launches of each configuration
    assert any(r.launch_skip > 0 or r.skip_before_match > 0 for r in plan.rounds)
    assert len(plan.rounds) == 1  # one ncu run reaches every chosen signature
    # Without the region, a plan takes every signature's first launch: in the warm-up step.
    whole = launches.drop(columns="in_region")
    old = plan_launches(whole)
    assert not (_profiled_positions(whole, old) & inside)


def test_the_skip_reaches_the_steady_launch_on_the_command_line() -> None:
    # the policy for a signature that must be reached inside the region (duration groups)
    launches, _ = _phase1("lm_train_full")
    plan = plan_launches(launches, PlanSettings(earliest_of_config=False))
    skipped = next(r for r in plan.rounds if r.skip_before_match > 0)
    first_inside = int(launches.index[launches["in_region"]][0])
    assert skipped.skip_before_match == first_inside
    argv = cmd.ncu_targeted(
        "ncu", "out", ["python3", "x.py"], names=skipped.names, launch_count=1,
        launch_skip=skipped.launch_skip, skip_before_match=skipped.skip_before_match,
        metrics=["gpu__time_duration.sum"],
    )  # fmt: skip
    at = argv.index("--launch-skip-before-match")
    assert argv[at - 2 : at + 4] == [
        "--filter-mode", "per-launch-config", "--launch-skip-before-match", str(first_inside),
        "--launch-count", "1",
    ]  # fmt: skip
    # where ncu cannot count phase 1's launches (a cudaProfilerStart range, another process's
    # launches), the plan keeps to per-configuration skips
    without = plan_launches(launches, PlanSettings(before_match=False, earliest_of_config=False))
    assert all(r.skip_before_match == 0 for r in without.rounds)
    assert any(r.launch_skip > 0 for r in without.rounds)


def test_a_profiler_range_makes_ncu_start_there_and_count_only_its_launches() -> None:
    """step_range.py calls cudaProfilerStart/Stop around one step (120 launches) after 20
    warm-up steps: with auto, ncu starts at cudaProfilerStart, so the launches it counts are
    the range's, and the plan needs no skip."""
    launches, region = _phase1("step_range")
    assert region.method == "profiler-range"
    assert len(launches) == 120 and launches["in_region"].all()
    plan = plan_launches(launches)
    assert all(r.launch_skip == 0 for r in plan.rounds)
    session = nsdiag.load(DATA / "programs" / "step_range")
    _, _, from_start = mark_region(session, kernel_launches(session.timeline), "auto", None)
    assert from_start is False
    # Asked to profile from the start, ncu counts every launch: the range's launches come late.
    every, _ = _phase1("step_range", True)
    assert len(every) > 10_000 and every["in_region"].sum() == 120


def _same_configuration(launches: pd.DataFrame, sig: rounds.Signature) -> set[int]:
    """Positions of the launches of `sig`'s kernel and configuration, warm-up included."""
    same = (
        (launches["name"] == sig.name)
        & (launches["grid"] == sig.grid)
        & (launches["block"] == sig.block)
    )
    return set(launches.index[same])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["train_loader", "infer_cnn", "elementwise"])
def test_every_chosen_signature_is_reached_at_its_earliest_configuration(name: str) -> None:
    """Each chosen signature is reached at a launch of its kernel and configuration (ncu replays
    it alone: the iteration it came in does not change its metrics), the region's own where its
    launches fall in duration groups; the run ends no later than one that must reach the
    region (by the cost model), and sooner where the configurations came in the warm-up."""
    launches, region = _phase1(name)
    assert region.iterations
    plan = plan_launches(launches)
    positions = _profiled_positions(launches, plan)
    reached = [
        s
        for s in plan.signatures
        if positions & (set(s.positions) if s.variants > 1 else _same_configuration(launches, s))
    ]
    assert len(reached) == len(plan.signatures) - len(plan.uncovered)
    inside = plan_launches(launches, PlanSettings(earliest_of_config=False))

    def cost(p: Plan) -> float:  # the planner's own measure: runs, and what is left unprofiled
        return p.estimated_s + rounds._unprofiled_s(p.uncovered, PlanSettings())

    assert cost(plan) <= cost(inside) + 1e-9
    if name == "elementwise":  # its kernels' configurations all come before the region
        assert max(positions) < int(launches.index[launches["in_region"]][0])


@pytest.mark.slow
def test_a_decode_loop_is_profiled_in_its_first_request() -> None:
    """GPT-2 generate() at batch 1 (163,644 launches, the region from the third request on): the
    38 planned launches were the region's first, 27,594 launches into the run, where each
    profiled launch cost ncu 5-15 s on the H200 (tools/probes/probe_decode_phase2.py); their
    configurations all come in the first request's first tokens, where each cost 0.7 s
    (probe_profiled_launch_cost.py): the plan now ends there, with the same signatures."""
    session = nsdiag.load(DATA / "idioms" / "decode.sqlite.gz")
    launches, _, _ = mark_region(session, kernel_launches(session.timeline), "auto", None)
    first_inside = int(launches.index[launches["in_region"]][0])
    assert first_inside > 27_000
    plan = plan_launches(launches, PlanSettings(program_s=36.0))
    inside = plan_launches(launches, PlanSettings(program_s=36.0, earliest_of_config=False))
    assert {s.key for s in plan.signatures} == {s.key for s in inside.signatures}
    assert not plan.uncovered and len(plan.rounds) == 1
    (r,) = plan.rounds
    assert r.skip_before_match == 0 and r.launches == 38
    assert max(rounds.launch_positions(launches, r)) < 1_000 < first_inside
    assert inside.rounds[0].skip_before_match == first_inside


def _gaps_s(log: str) -> list[float]:
    """Seconds between consecutive profiled launches in a stamped probe log."""
    with gzip.open(DATA / "idioms" / "logs" / "probe_phase2" / log, "rt") as f:
        stamps = [float(line.split()[0]) for line in f if "==PROF== Profiling" in line]
    return [b - a for a, b in itertools.pairwise(stamps)]


def test_the_probe_shows_a_profiled_launch_costs_more_late_in_the_run() -> None:
    """The decision above rests on these H200 logs: the same argv profiles a launch every 4.5 s
    or more after 27,275 launches, every second or less in the first request."""
    late, early = _gaps_s("plan_late_launch.log.gz"), _gaps_s("plan_skip0_base.log.gz")
    assert len(late) >= 30 and min(late) > 4.0 and max(late[-10:]) > 10.0
    assert len(early) == 5 and sorted(early)[len(early) // 2] < 1.0
