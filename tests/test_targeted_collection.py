"""Targeted collection against real H200 recordings (tests/data/profile, see its README entry):
the rules' metric list, the plan for the benchmark's transformer step, and the verdicts of the
targeted session (the rules' metrics by name, one launch per signature) against `ncu --set full`
on every launch of the same step."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.collect import cost, metric_set, plan, rounds, session_dir
from nsdiag.collect.weights import timeline_weights
from nsdiag.model import launches as signatures
from nsdiag.model import names
from nsdiag.model.catalogue import CATALOGUE
from nsdiag.readers.merge import merge_sessions
from tests.conftest import DATA, load_benchmark

STEP = DATA / "profile" / "transformer_step.sqlite.gz"


def full_set_header() -> list[str]:
    with gzip.open(DATA / "reference" / "raw.csv.gz", "rt") as f:
        return next(iter(f)).strip().strip('"').split('","')


# ------------------------------------------------------------------------------- the metric list


def test_query_output_parses_in_csv_and_table_form() -> None:
    # the first lines of `ncu --query-metrics --csv` on the H200, then the same in table form
    csv_text = (
        '"Metric name","Metric type","Metric unit","Metric description","NVIDIA H200"\n'
        '"FBSP.TriageCompute.dramc__cycles_elapsed","Counter","cycle","","1"\n'
        '"dram__bytes_read","Counter","byte","# of bytes read from DRAM","1"\n'
        '"sm__cycles_active","Counter","cycle","# of cycles with at least one warp in flight","1"\n'
    )
    assert metric_set.parse_query(csv_text) == {"dram__bytes_read", "sm__cycles_active"}
    table = (
        "Device NVIDIA H200 (GH100)\n----\nMetric Name  Metric Type  Metric Unit\n"
        "dram__bytes_read  Counter  byte\n"
    )
    assert metric_set.parse_query(table) == {"dram__bytes_read"}
    assert metric_set.parse_query("==ERROR== no device found\n") == set()


def test_rule_metrics_take_the_first_name_the_chip_knows() -> None:
    chosen = metric_set.rule_metrics(
        {
            "dram__throughput",
            "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off",
            "launch__grid_size",
        }
    )
    # gpu__dram_throughput (preferred) is unknown here: its fallback dram__throughput is taken
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" in chosen
    assert (
        "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum" in chosen
    )  # pattern entry
    assert not any(m.startswith("launch__") for m in chosen)  # from LaunchStats
    assert metric_set.rule_metrics(set()) == []


def test_rule_metrics_on_the_h200_cover_what_the_full_set_records() -> None:
    header = full_set_header()
    chosen = metric_set.rule_metrics({metric_set.base_name(h) for h in header if "__" in h})
    assert len(chosen) >= 110 and all(metric_set.requestable(m) for m in chosen)
    recorded = set(header)
    # every catalogue metric the full set recorded, except those the three base sections bring and
    # the section-computed ones no rule reads (memory_l2_theoretical_sectors_global, derived__*)
    for spec in CATALOGUE.values():
        name = next((n for n in spec.ncu if n in recorded), None)
        from_sections = ("launch__", "device__", "sm__maximum_warps", "profiler__", "derived__")
        if name and "__" in name and not name.startswith(from_sections):
            assert any(metric_set.base_name(c) == metric_set.base_name(name) for c in chosen), (
                spec.name
            )
    assert "dram__bytes.sum.peak_sustained.per_second" not in chosen  # not a name ncu accepts


# ------------------------------------------------------------------ the plan for a real step


@pytest.fixture(scope="module")
def step_timeline() -> pd.DataFrame:
    """The recorded step's timeline, read once (the plans copy what they change)."""
    return nsdiag.load(STEP).timeline


def coverage_first(program_s: float) -> rounds.PlanSettings:
    """Leaving a signature out costs far more than a program run: every chosen one is reached."""
    return rounds.PlanSettings(coverage=0.9, program_s=program_s, unprofiled_runs_per_share=1e6)


def test_one_run_leaves_the_later_groups_out(step_timeline: pd.DataFrame) -> None:
    """By default a second program run under ncu (14 s) is not spent on 4.2% of the GPU time:
    the two-K GEMMs' later duration groups stay unprofiled, and the plan says so."""
    p = plan.make_plan(step_timeline, rounds.PlanSettings(coverage=0.9, program_s=14.0))
    assert [(r.launch_count, r.launches) for r in p.rounds] == [(1, 46)]
    later = [s for s in p.uncovered if s not in p.declined]
    assert len(later) == 2 and all(s.variant for s in later)
    assert sum(s.share for s in later) == pytest.approx(0.042, abs=0.001)
    assert any("another ncu run" in n and "4.2%" in n for n in p.notes), p.notes
    # and the fp16 copy kernel (2.5%): its one chosen shape would bring 8 more along (54 -> 46)
    assert [s.function for s in p.declined] == ["vectorized_elementwise_kernel"]
    assert p.declined[0].share == pytest.approx(0.0255, abs=0.001)
    assert any("every launch shape" in n and "float16_copy_kernel" in n for n in p.notes)


def test_plan_for_the_recorded_transformer_step(step_timeline: pd.DataFrame) -> None:
    timeline = step_timeline
    kernels = timeline[timeline["kind"] == "kernel"]
    # nsys's mangled names: Itanium-mangled for C++ kernels, the plain name for extern "C" ones
    # (nvjet)
    assert (kernels["mangled_name"] != "").all() and kernels["mangled_name"].str.startswith(
        "_Z"
    ).mean() > 0.8
    assert (
        kernels["mangled_name"].nunique() == 56 > kernels["short_name"].nunique() == 43
    )  # template instances
    # coverage first (the policy before issue 26; test_one_run_leaves_the_later_groups_out has
    # today's default)
    p = plan.make_plan(timeline, coverage_first(program_s=14.0))
    assert p.total_launches == 301 and p.name_base == "mangled" and p.uncovered == ()
    # One run with mangled names reaches the first launch of every launch configuration; two nvjet
    # GEMMs also ran with other K under the same grid (duration groups 1.5x apart), whose first
    # launches are second of their configuration: a second run counting 2 for those two names.
    first, second = p.rounds
    assert (first.launch_count, first.launches, second.launch_count, second.launches) == (
        1,
        54,
        2,
        4,
    )
    assert all(n.startswith("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB") for n in second.names)
    assert {(s.variant, s.variants) for s in second.wanted} <= {(1, 2), (1, 3), (2, 3)}
    assert p.planned_share >= 0.9
    assert (
        p.launches * rounds.SECONDS_PER_LAUNCH["rules"]
        < p.total_launches * rounds.SECONDS_PER_LAUNCH["full"] / 10
    )


@pytest.mark.parametrize("program_s, runs", [(16.5, [(1, 54), (2, 4)]), (25.0, [(2, 92)])])
def test_plan_weighs_a_second_program_run_against_counting_further(
    program_s: float, runs: list, step_timeline: pd.DataFrame
) -> None:
    """The two-K GEMMs' later groups cost either one more run of the program (4 launches) or a
    launch count of 2 in the one run (38 more launches, about 0.5 s each): the planner looks one
    run ahead at that run's cheapest count, so the answer turns with the program's start-up time.
    (At 16.5 s, what phase 1 measured on the H200, looking ahead at count 4 chose the single run,
    which took 59.2 s where the two runs' estimate is about 55 s.)"""
    p = plan.make_plan(step_timeline, coverage_first(program_s=program_s))
    assert [(r.launch_count, r.launches) for r in p.rounds] == runs and p.planned_share >= 0.9
    # one run counting 2 per shape reaches the step's end: it intercepts every launch
    one_run = (
        program_s
        + p.total_launches * cost.SECONDS_PER_INTERCEPTED
        + 92 * rounds.SECONDS_PER_LAUNCH["rules"]
    )
    assert p.estimated_s <= one_run + 1e-9


def test_duration_groups_split_at_large_gaps_only() -> None:
    assert signatures.duration_groups([10.0, 11.0, 28.0, 10.5, 27.0]) == [0, 0, 1, 0, 1]
    assert signatures.duration_groups([10.0, 14.0, 19.0, 26.0]) == [0, 0, 0, 0]  # steps of < 1.5x
    assert signatures.duration_groups([9.8, 236.0, 30.0]) == [0, 2, 1]


# ---------------------------------------------------- targeted and full-set verdicts, same step


def verdicts(diagnosis: Diagnosis) -> dict[tuple[str, str, str], tuple[str, str]]:
    return {
        (names.normalized(k.name), str(k.grid), str(k.block)): (k.bound, k.limiter)
        for k in diagnosis.kernels
    }


@pytest.fixture(scope="module")
def targeted_and_full() -> tuple[nsdiag.Session, nsdiag.Session]:
    folder = DATA / "profile"
    targeted = session_dir.assemble([(folder / "targeted.raw.csv.gz", None)], STEP, {})
    assert targeted is not None
    targeted.kernels = timeline_weights(
        targeted.kernels, signatures.kernel_launches(targeted.timeline)
    )
    full = merge_sessions(
        [
            session_dir.load_ncu_report(folder / f"full-{n}.raw.csv.gz", None)
            for n in ("0000", "0150")
        ]
    )
    return targeted, full


@pytest.fixture(scope="module")
def full_diagnosis(targeted_and_full: tuple[nsdiag.Session, nsdiag.Session]) -> Diagnosis:
    """The 301-launch full set, diagnosed once for the tests that compare against it."""
    return diagnose(targeted_and_full[1])


def test_targeted_session_profiles_each_signature_once(
    targeted_and_full: tuple[nsdiag.Session, nsdiag.Session],
) -> None:
    targeted, full = targeted_and_full
    assert len(targeted.kernels) == 55 and len(full.kernels) == 301
    assert targeted.kernels["timeline_launches"].notna().all()


def test_targeted_verdicts_match_the_full_set(
    targeted_and_full: tuple[nsdiag.Session, nsdiag.Session], full_diagnosis: Diagnosis
) -> None:
    mine, theirs = verdicts(diagnose(targeted_and_full[0])), verdicts(full_diagnosis)
    compared = {key: (v, theirs[key]) for key, v in mine.items() if key in theirs}
    assert len(compared) == len(mine) == 55
    differ = {key for key, (a, b) in compared.items() if a != b}
    # The one difference: an nvjet GEMM whose 8 launches share grid and block but not K (11 us
    # and 28 us); one launch of each size is what the full set averages over.
    assert {key[0][:40] for key in differ} <= {"nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coo"}
    assert len(differ) <= 1


def test_no_rule_lacks_a_metric_the_full_set_had(
    targeted_and_full: tuple[nsdiag.Session, nsdiag.Session], full_diagnosis: Diagnosis
) -> None:
    lacking = {s for k in diagnose(targeted_and_full[0]).kernels for s in k.skipped}
    had = {s for k in full_diagnosis.kernels for s in k.skipped}
    assert lacking <= had


def test_variant_aware_plan_agrees_with_the_full_set(
    targeted_and_full: tuple[nsdiag.Session, nsdiag.Session],
    full_diagnosis: Diagnosis,
    step_timeline: pd.DataFrame,
) -> None:
    """The launches the variant-aware plan profiles, taken from the full-set recording (every
    launch of the step, in launch order), weighted by the timeline as a targeted session is:
    every verdict matches the full set's, the two-K GEMM included."""
    _, full = targeted_and_full
    timeline = step_timeline
    launches = signatures.kernel_launches(timeline)
    p = plan.make_plan(timeline, coverage_first(program_s=14.0))
    positions = sorted({i for r in p.rounds for i in rounds.launch_positions(launches, r)})
    assert (
        55 <= len(positions) <= p.launches
    )  # the second run repeats first launches of its configurations
    rows = full.kernels.reset_index(drop=True)
    assert [
        (names.function_name(n), g, b)
        for n, g, b in zip(rows["name"], rows["grid"], rows["block"], strict=True)
    ] == [
        (f, g, b)
        for f, g, b in zip(launches["function"], launches["grid"], launches["block"], strict=True)
    ]  # same order
    picked = nsdiag.Session(
        kernels=timeline_weights(rows.iloc[positions].reset_index(drop=True), launches)
    )
    mine, theirs = verdicts(diagnose(picked)), verdicts(full_diagnosis)
    assert set(mine) <= set(theirs) and len(mine) == 55
    assert {key[0][:60]: (v, theirs[key]) for key, v in mine.items() if v != theirs[key]} == {}


def test_duration_group_session_matches_its_full_set() -> None:
    """Measured, not simulated: the session `nsdiag profile` made on the H200 with duration groups
    (count 2 for every configuration of the chosen names, 92 launches) against `ncu --set full` on
    every launch of the same step, recorded the same day (tests/data/profile/duration-groups)."""
    folder = DATA / "profile" / "duration-groups"
    targeted = nsdiag.load(folder / "session")
    full = merge_sessions(
        [
            session_dir.load_ncu_report(folder / f"full-{n}.raw.csv.gz", None)
            for n in ("0000", "0150")
        ]
    )
    assert len(targeted.kernels) == 92 and len(full.kernels) == 301
    # every planned duration group has a profiled launch matched to it (by duration)
    status = json.loads((folder / "session" / "status.json").read_text())
    groups = {
        (g["name"], g["variant"]) for g in status["plan"]["signatures"] if g.get("variants", 1) > 1
    }
    k = targeted.kernels
    matched = set(zip(k["name"], k["timeline_variant"], strict=True))
    assert len(groups) == 3 and groups <= matched
    mine, theirs = verdicts(diagnose(targeted)), verdicts(diagnose(full))
    assert len(mine) == 55 and set(mine) <= set(theirs)
    assert {key[0][:60]: (v, theirs[key]) for key, v in mine.items() if v != theirs[key]} == {}


def test_eight_layer_session_against_its_full_set_differs_only_in_close_calls() -> None:
    """Measured on the H200 (tests/data/profile/layers8): the 8-layer step, 537 launches, the
    targeted session (92 launches) against `ncu --set full` on all of them in three slices. Every
    bound agrees; two limiters differ, DRAM against L2 on foreach AdamW kernels with DRAM within
    6 points of the 60% threshold, and nsdiag calls each a close call on at least one side."""
    folder = DATA / "profile" / "layers8"
    targeted = nsdiag.load(folder / "session")
    full = merge_sessions(
        [
            session_dir.load_ncu_report(folder / f"full-{n}.raw.csv.gz", None)
            for n in ("0000", "0180", "0360")
        ]
    )
    assert len(targeted.kernels) == 92 and len(full.kernels) == 537
    mine = {(names.normalized(k.name), k.grid, k.block): k for k in diagnose(targeted).kernels}
    theirs = {(names.normalized(k.name), k.grid, k.block): k for k in diagnose(full).kernels}
    assert len(mine) == 53 and set(mine) <= set(theirs)
    assert all(k.bound == theirs[key].bound for key, k in mine.items())
    differ = {key: (k, theirs[key]) for key, k in mine.items() if k.limiter != theirs[key].limiter}
    assert sorted(key[1] for key in differ) == ["(104, 1, 1)", "(320, 1, 1)"]
    assert all("multi_tensor_apply_kernel" in key[0] for key in differ)
    assert all(a.close_call or b.close_call for a, b in differ.values())


def test_bench_summary_reports_ratio_and_differences_from_the_recordings(tmp_path: Path) -> None:
    """`benchmarks/bench_profile.py summary` on the 8-layer recordings: the figures the closing
    note and docs/profile-status.md quote come from this stage."""
    bench = load_benchmark("bench_profile")
    folder = DATA / "profile" / "layers8"
    out = tmp_path / "summary.json"
    assert (
        bench.main(
            [
                "summary",
                "--out",
                str(folder),
                "--session",
                str(folder / "session"),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    figures = json.loads(out.read_text())
    assert figures["full_launches"] == 537 and round(figures["ratio"], 1) == 13.5
    assert figures["planned_launches"] == 92 and figures["runs"] == 1
    assert (figures["compared"], figures["agree"], figures["bound_agree"]) == (53, 51, 53)
    assert (figures["planned_compared"], figures["planned_agree"]) == (29, 28)
    assert [d["planned"] for d in figures["differences"]] == [True, False]
    assert all(any(d["close_call"].values()) for d in figures["differences"])


def test_signatures_the_plan_chose_not_to_reach_are_left_out_not_missing(
    step_timeline: pd.DataFrame, targeted_and_full: tuple[nsdiag.Session, nsdiag.Session]
) -> None:
    """The default plan leaves the two-K GEMMs' later groups (4.2%) unprofiled: the session that
    profiled the rest (the first run's 55 launches, no later groups) is then complete."""
    from nsdiag.collect.weights import coverage

    targeted, _ = targeted_and_full
    p = plan.make_plan(step_timeline, rounds.PlanSettings(coverage=0.9, program_s=14.0))
    covered = coverage(p, targeted)
    # the two later groups (4.2%) and the declined fp16 copy kernel (2.5%)
    assert covered["left_out"] == 3 and covered["left_out_share"] == pytest.approx(0.0675, abs=1e-3)
    assert not covered["missing"], covered["missing"]
    # the coverage-first plan wanted them, so there they are missing
    wanted = coverage(plan.make_plan(step_timeline, coverage_first(program_s=14.0)), targeted)
    assert wanted["left_out"] == 0 and len(wanted["missing"]) == 2


def test_only_small_kernels_are_declined_for_their_shapes(step_timeline: pd.DataFrame) -> None:
    """However cheap a program run (a short script's), a kernel with more than 3% of the GPU
    time is profiled even when its other shapes come along; below that, a cheap run declines
    more of them, a dear one fewer."""
    cheap = plan.make_plan(step_timeline, rounds.PlanSettings(coverage=0.9, program_s=0.1))
    dear = plan.make_plan(step_timeline, rounds.PlanSettings(coverage=0.9, program_s=60.0))
    assert cheap.declined and all(s.share <= rounds.DECLINE_MAX_SHARE for s in cheap.declined)
    assert set(dear.declined) < set(cheap.declined)
    assert cheap.launches < dear.launches
