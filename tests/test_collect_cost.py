"""Phase 2's cost model (collect/cost.py) against what the H200 recorded, its estimate, --budget's
cut of the plan (collect/budget.py) and the breakdown (collect/breakdown.py), old folders too."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

import nsdiag
from nsdiag.collect import breakdown, budget, cost, plan, rounds
from nsdiag.collect.phase1 import mark_region
from nsdiag.collect.runner import _PROGRESS
from nsdiag.model.launches import kernel_launches
from nsdiag.readers.session_folder import read_status, status_warnings
from tests.conftest import DATA, G1, B, timeline


def _passes(log: Path) -> Counter[int]:
    found = (_PROGRESS.match(line) for line in log.read_text(errors="replace").splitlines())
    return Counter(int(m.group("passes")) for m in found if m)


def test_pass_counts_are_what_ncu_printed_on_the_h200() -> None:
    full = _passes(DATA / "logs/reference.log") + _passes(DATA / "logs/calibration.log")
    assert full.most_common(1)[0][0] == cost.PASSES["full"] and full[38] >= 100
    assert set(_passes(DATA / "profile/probe_ncu_filters.log")) == {cost.PASSES["duration"]}
    sections = (DATA / "profile/probe_sections.log").read_text()
    assert re.search(rf"targeted: 5 launches, .* {cost.PASSES['sections']} passes", sections)
    rules = (DATA / "profile/duration-groups/probe_metric_passes.log").read_text()
    assert re.search(rf"all \+ 3 sections: .* {cost.PASSES['rules']} passes", rules)
    # the raw export says the same per launch (profiler__replayer_passes): the benchmark's
    # targeted runs and the full set
    for path, kind in (
        ("profile/targeted.raw.csv.gz", "rules"),
        ("profile/duration-groups/session", "rules"),
        ("reference/raw.csv.gz", "full"),
    ):
        assert set(nsdiag.load(DATA / path).kernels["replay_passes"]) == {cost.PASSES[kind]}


def _recorded_runs() -> dict[str, list[float]]:
    """Seconds per profiled launch beyond the nsys phase, per collection, of every targeted run of
    20 or more launches in the recorded sessions."""
    out: dict[str, list[float]] = {}
    for path in sorted(DATA.glob("**/status.json")):
        steps = json.loads(path.read_text())["steps"]
        nsys = next((s["wall_s"] for s in steps if s["name"] == "1-timeline"), None)
        for s in steps:
            if not s["name"].startswith("2-targeted") or s.get("profiled", 0) < 20 or not nsys:
                continue
            argv = " ".join(s.get("argv") or [])
            kind = (
                "rules" if "--metrics" in argv else "full" if "--set full" in argv else "sections"
            )
            out.setdefault(kind, []).append((s["wall_s"] - nsys) / s["profiled"])
    return out


def test_seconds_per_launch_agree_with_the_recorded_runs() -> None:
    runs = _recorded_runs()
    assert len(runs["rules"]) >= 15
    assert statistics.median(runs["rules"]) == pytest.approx(cost.SECONDS_PER_LAUNCH["rules"], 0.1)
    assert statistics.median(runs["full"]) == pytest.approx(cost.SECONDS_PER_LAUNCH["full"], 0.15)
    probe = (DATA / "profile/probe_sections.log").read_text()
    plain = float(re.search(r"plain wall: ([\d.]+) s", probe).group(1))  # type: ignore[union-attr]

    def per_launch(name: str) -> float:
        wall = re.search(rf"{name}: 5 launches, wall ([\d.]+) s", probe)
        assert wall
        return (float(wall.group(1)) - plain) / 5

    assert per_launch("full") == pytest.approx(cost.SECONDS_PER_LAUNCH["full"], 0.05)
    assert per_launch("targeted") == pytest.approx(cost.SECONDS_PER_LAUNCH["sections"], 0.05)
    for kind, passes in cost.PASSES.items():  # the planner's per-launch cost is passes x per pass
        assert passes * cost.SECONDS_PER_PASS[kind] == pytest.approx(cost.SECONDS_PER_LAUNCH[kind])


def test_estimate_is_runs_times_program_plus_launches_times_passes_times_cost() -> None:
    e = cost.estimate("rules", 15.0, [54, 4])
    assert (e.runs, e.launches, e.passes) == (2, 58, 24)
    assert e.replay_s == pytest.approx(58 * 24 * cost.SECONDS_PER_PASS["rules"]) == 29.0
    assert e.export_s == pytest.approx(max((0.5 + 54 * 0.03 + 0.5 + 4 * 0.03) / 2, 0.5 + 54 * 0.03))
    assert e.total_s == pytest.approx(2 * 15.0 + 29.0 + e.export_s)
    assert "2 ncu run(s) x 15.0 s of program + 58 launches x 24 passes" in e.describe()
    assert json.loads(json.dumps(e.to_json()))["total_s"] == round(e.total_s, 1)
    assert cost.estimate("full", 5.0, [10], passes=37).replay_s == pytest.approx(10 * 37 * 2.2 / 38)


def test_the_program_run_ahead_is_taken_off_the_estimate() -> None:
    """A program started beside phase 1 (standby.py) has run its start-up when the first ncu
    run attaches: those seconds come off that run, never below nothing."""
    plain = cost.estimate("rules", 15.0, [10], reach=[0.9])
    ahead = cost.estimate("rules", 15.0, [10], reach=[0.9], ahead_s=12.0)
    assert plain.runs_s - ahead.runs_s == pytest.approx(12.0)
    assert "- 12.0 s it ran ahead" in ahead.describe() and ahead.to_json()["ahead_s"] == 12.0
    assert "ahead" not in plain.describe() and "ahead_s" not in plain.to_json()
    assert cost.estimate("rules", 15.0, [10], ahead_s=60.0).runs_s == pytest.approx(plain.replay_s)


def test_launches_ncu_intercepts_are_priced_in_the_estimate() -> None:
    """Every launch up to a run's last planned one costs ncu's interception (the probe on the
    H200: ~0.25 ms a launch with the plan's filter), profiled or not."""
    e = cost.estimate("rules", 10.0, [30, 8], reach=[0.5, 0.5], intercepted=[20_000, 4_000])
    assert e.intercepted == 24_000
    assert e.intercept_s == pytest.approx(24_000 * cost.SECONDS_PER_INTERCEPTED) == 6.0
    assert e.runs_s == pytest.approx(1.0 * 10.0 + 6.0 + 38 * cost.SECONDS_PER_LAUNCH["rules"])
    assert "+ 24,000 launches intercepted x 0.25 ms" in e.describe()
    assert e.to_json()["intercepted"] == 24_000 and e.to_json()["intercept_s"] == 6.0
    plain = cost.estimate("rules", 10.0, [30, 8], reach=[0.5, 0.5])
    assert "intercepted" not in plain.describe() and "intercepted" not in plain.to_json()


def test_seconds_per_intercepted_launch_is_what_the_probe_measured() -> None:
    """tools/probes/probe_ncu_filter_cost.sh: GPT-2 generate() per request plain and under ncu
    with the plan's filter of mangled names matching none of its launches; 27,274 launches a
    request (the steady period of tests/data/idioms/decode.sqlite.gz)."""
    log = (DATA / "idioms/logs/probe_filter_decode.log").read_text()
    found = re.findall(r'^decode (\w+) rc=0 .*"median_ms": ([\d.]+)', log, re.M)
    median = {variant: float(ms) / 1e3 for variant, ms in found}
    per_launch = (median["mangled"] - median["plain"]) / 27_274
    assert per_launch == pytest.approx(cost.SECONDS_PER_INTERCEPTED, rel=0.1)
    assert median["trivial"] < median["mangled"] < median["function"]  # what the filter costs


def test_the_planner_prefers_runs_that_reach_their_launches_sooner() -> None:
    """The ViT-S step with foreach=False AdamW (~2,000 launches a step): without the
    interception's price the plan counted 96 launches into each configuration and intercepted
    16,547 launches; priced, it starts counting at the region's first launch and reaches more
    of the GPU time after 4,314."""
    session = nsdiag.load(DATA / "idioms/optim_nsys_only.sqlite.gz")
    marked, _, _ = mark_region(session, kernel_launches(session.timeline), "auto", None)

    def first(seconds_per_intercepted: float) -> rounds.Round:
        settings = rounds.PlanSettings(
            program_s=10.0, seconds_per_intercepted=seconds_per_intercepted
        )
        p = plan.plan_launches(marked, settings)
        assert len(p.rounds) == 1
        return p.rounds[0]

    free, priced = first(0.0), first(cost.SECONDS_PER_INTERCEPTED)
    assert priced.intercepted < free.intercepted / 2
    assert priced.skip_before_match > 0 and priced.launch_skip == 0 < free.launch_skip
    assert len(priced.wanted) >= len(free.wanted)


# Ten kernels launched once each, the first the most expensive: one signature each.
TEN = timeline([(f"void k{i}()", f"k{i}", G1, B, 1000.0 - 50 * i) for i in range(10)])
SETTINGS = rounds.PlanSettings(coverage=1.0, program_s=5.0)


def _fit(budget_s: float) -> tuple[plan.Plan, budget.Fitted]:
    launches = kernel_launches(TEN)
    whole = plan.plan_launches(launches, SETTINGS)

    def estimate(p: plan.Plan) -> cost.Estimate:
        return cost.estimate(
            "rules",
            SETTINGS.program_s,
            [r.launches for r in p.rounds],
            intercepted=[r.intercepted for r in p.rounds],
        )

    def replan(chosen: object) -> plan.Plan:
        return plan.plan_launches(launches, SETTINGS, None, chosen)  # type: ignore[arg-type]

    return whole, budget.fit(whole, budget_s, replan, estimate)


def test_the_planner_and_the_estimate_agree() -> None:
    whole, fitted = _fit(1e9)
    assert len(whole.signatures) == 10 and whole.launches == 10
    assert fitted.whole.runs_s == pytest.approx(whole.estimated_s)  # the planner's cost model
    assert fitted.whole.total_s == pytest.approx(whole.estimated_s + fitted.whole.export_s)
    assert fitted.plan is whole and not fitted.left_out and fitted.missing() is None


def test_budget_keeps_the_most_valuable_signatures_first() -> None:
    # 5 s of program + 0.5 s per launch + 0.5 s + 0.03 s per launch of exports: 4 fit in 8 s
    whole, fitted = _fit(8.0)
    assert fitted.plan is not None and fitted.estimate is not None
    assert fitted.estimate.total_s <= 8.0 < cost.estimate("rules", 5.0, [5]).total_s
    assert fitted.plan.signatures == whole.signatures[:4]
    assert fitted.left_out == whole.signatures[4:]
    assert fitted.left_out_share == pytest.approx(sum(s.share for s in whole.signatures[4:]))
    recorded = json.loads(json.dumps(fitted.to_json()))
    assert recorded["kept"] == 4 and [s["name"] for s in recorded["left_out"]] == [
        f"void k{i}()" for i in range(4, 10)
    ]
    assert "least GPU time were left out" in recorded["reason"]
    assert "metrics of 6 planned kernel signature(s)" in (fitted.missing() or "")
    assert "left out by --budget 8 s" in (fitted.missing() or "")


def test_a_budget_below_one_run_skips_phase_2() -> None:
    _, fitted = _fit(5.0)  # the program alone takes 5 s under ncu
    assert fitted.plan is None and fitted.estimate is None and len(fitted.left_out) == 10
    assert "phase 2 was skipped" in fitted.reason()


def test_breakdown_from_steps() -> None:
    steps = [
        {"name": "1-timeline", "ok": True, "wall_s": 19.3, "profiled": 0},
        {"name": "1-timeline-export", "ok": True, "wall_s": 0.1, "profiled": 0},
        {
            "name": "2-targeted-1",
            "ok": True,
            "wall_s": 64.9,
            "profiled": 92,
            "collection": "rules",
            "intercepted": 301,
            "passes": breakdown.passes_summary([24] * 90 + [25, 25]),
        },
        {
            "name": "2-targeted-2",
            "ok": False,
            "wall_s": 3.0,
            "profiled": 0,
            "interrupted": "SIGTERM",
        },
        {"name": "export-targeted-1-raw", "ok": True, "wall_s": 1.4},
        {"name": "export-targeted-1-details", "ok": True, "wall_s": 2.9},
    ]
    b = breakdown.summarise(steps, {"phase1": 19.5, "phase2": 67.9})
    first = b["ncu_runs"][0]
    assert first["passes_per_launch"] == {"min": 24, "max": 25, "mean": 24.0}
    assert first["passes_total"] == 2210 and first["launches_intercepted"] == 301
    assert first["replay_s_est"] == pytest.approx(2210 * 0.5 / 24, abs=0.05)
    assert first["program_s_est"] == pytest.approx(64.9 - 2210 * 0.5 / 24, abs=0.1)
    assert b["launches_profiled"] == 92 and b["second_ncu_runs"] == 1
    assert b["export_steps_s"] == 4.4 and b["timeline_s"] == 19.3
    assert b["phases_s"] == {"phase1": 19.5, "phase2": 67.9}


def test_a_folder_written_before_the_breakdown_still_reads() -> None:
    folder = DATA / "programs/verify/lm_train"
    recorded = json.loads((folder / "status.json").read_text())
    assert "breakdown" not in recorded and "interrupted" not in recorded
    status = read_status(folder)
    assert status is not None and status.breakdown is None
    b = breakdown.of_status(status)
    assert [r["step"] for r in b["ncu_runs"]] == ["2-targeted-1", "2-targeted-2"]
    assert b["launches_profiled"] == 52 and b["second_ncu_runs"] == 1
    assert "passes_per_launch" not in b["ncu_runs"][0] and b["launches_intercepted"] is None
    assert status_warnings(folder) == []  # complete, as it was
    from nsdiag.cli.breakdown import lines

    text = "\n".join(lines(b, status.estimate))
    assert "ncu run 2-targeted-1: 45.1 s, 51 launches profiled" in text
