"""Why the late rank is late (analysis/program/lateness.py) and when rank-imbalance holds back: on
the two-GPU DDP recordings (tests/data/multi_gpu), balanced runs whose ranks drift apart under the
profiler are not diagnosed as imbalanced; deliberate stragglers are, with their cause."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program.lateness import STALL_NS, host_stalls
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.render.ranks import caption

DATA = Path(__file__).parent / "data" / "multi_gpu"
NOISE, VERIFY2 = DATA / "noise", DATA / "verify2"
RUNS: dict[str, list[Path]] = {
    # balanced: the same program on both ranks
    "part_e": [DATA / "ddp_balanced.sqlite.gz"],
    "e2e_osrt": [DATA / "verify" / "ddp_balanced"],  # rank 0 last at 53 of 54, 6.5 ms a step
    "osrt": [NOISE / "ddp_balanced_osrt.sqlite.gz"],  # rank 0 last at 54 of 54, 4.4 ms a step
    "lean": [NOISE / "ddp_balanced_lean.sqlite.gz"],  # the last arrival changes hands
    "e2e": [VERIFY2 / "ddp_balanced"],
    "rank_files": [VERIFY2 / f"ddp_balanced_rank{r}.sqlite.gz" for r in (0, 1)],
    # rank 1 late: 12 ms of sleep in NVTX load_batch, or 12 ms of extra matmuls
    "sleep": [DATA / "ddp_straggler.sqlite.gz"],
    "sleep_e2e": [VERIFY2 / "ddp_straggler"],
    "compute": [VERIFY2 / "ddp_straggler_compute.sqlite.gz"],
}
BALANCED = ["part_e", "e2e_osrt", "osrt", "lean", "e2e", "rank_files"]


@pytest.fixture(scope="module")
def runs() -> dict[str, Diagnosis]:
    return {name: diagnose(nsdiag.load(paths)) for name, paths in RUNS.items()}


def _causes(diagnosis: Diagnosis) -> list[str]:
    return [f.cause for f in diagnosis.program_findings]


def _held_back(diagnosis: Diagnosis) -> str | None:
    return next((s.reason for s in diagnosis.skipped_rules if s.rule == "NSD420"), None)


@pytest.mark.parametrize("name", BALANCED)
def test_balanced_runs_are_not_imbalanced(runs: dict[str, Diagnosis], name: str) -> None:
    assert "rank-imbalance" not in _causes(runs[name])


@pytest.mark.parametrize("name", ["e2e_osrt", "osrt"])
def test_lateness_nothing_explains_is_held_back_with_its_reason(
    runs: dict[str, Diagnosis], name: str
) -> None:
    """One rank arrives last nearly every time and the other loses over 20% of the step: the
    size alone would fire NSD420. Nothing on the late rank explains it (no host stall, no extra
    GPU work, no longer range), so it is held back and listed with the figures."""
    ranks = runs[name].ranks
    assert ranks is not None and ranks.lateness is not None
    late = ranks.lateness
    assert late.share >= 0.75 and late.last_at >= 0.95 * late.collectives
    assert late.cause is None
    assert late.stall_ns < 0.5e6 and late.extra_compute_ns < 0 and not late.ranges
    waiting = [s for s in ranks.steps if not s.late]
    assert min(s.wait_ns for s in waiting) / waiting[0].wall_ns >= 0.2  # large enough to fire
    reason = _held_back(runs[name])
    assert reason is not None
    assert f"rank {ranks.late_rank} arrives last at {late.last_at} of" in reason
    assert "nothing on it explains it" in reason and "without the profiler" in reason
    assert "nothing on it to explain it" in caption(runs[name])


def test_a_last_arrival_that_changes_hands_is_no_straggler(runs: dict[str, Diagnosis]) -> None:
    ranks = runs["lean"].ranks
    assert ranks is not None and ranks.lateness is not None
    assert ranks.late_rank is None and ranks.lateness.share < 0.75
    assert all(s.wait_ns > 1e6 for s in ranks.steps)  # both wait for the other in turn
    assert not any(s.late for s in ranks.steps)
    assert "no rank is late consistently" in caption(runs["lean"])


@pytest.mark.parametrize("name", ["sleep", "sleep_e2e"])
def test_a_sleeping_rank_is_late_through_host_stalls(runs: dict[str, Diagnosis], name: str) -> None:
    diagnosis = runs[name]
    first = diagnosis.top_findings(1)[0][1]
    assert first.cause == "rank-imbalance" and first.message.startswith("Rank 1 (device 1")
    late = diagnosis.ranks.lateness  # type: ignore[union-attr]
    assert late is not None and late.cause in ("host-stall", "nvtx-range")
    assert 10e6 <= late.stall_ns <= 13e6  # the 12 ms sleep, as gaps with no CUDA call
    assert 12e6 <= late.largest_stall_ns <= 13e6
    assert late.ranges[0][0] == "load_batch"
    assert "Its host stalls" in first.message and "'load_batch'" in first.message
    assert "(straggler: " in caption(diagnosis)


def test_a_rank_with_extra_gpu_work_is_late_through_computation(
    runs: dict[str, Diagnosis],
) -> None:
    diagnosis = runs["compute"]
    first = diagnosis.top_findings(1)[0][1]
    assert first.cause == "rank-imbalance" and first.message.startswith("Rank 1 (device 1")
    late = diagnosis.ranks.lateness  # type: ignore[union-attr]
    assert late is not None and late.cause == "extra-gpu-work"
    assert 11e6 <= late.extra_compute_ns <= 16e6  # --straggler-ms 12 of 4096^2 matmuls
    assert late.stall_ns < 1e6
    assert "Its GPU computes" in first.message and "Its host stalls" not in first.message
    assert 10e6 <= first.saved_ns / diagnosis.iterations <= 14e6


def _calls(rows: list[tuple[int, int, str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["rank", "thread_id", "name", "start_ns", "end_ns"])


def test_host_stalls_are_gaps_on_the_launching_threads() -> None:
    """A 5 ms gap between rank 0's launches is one stall even while NCCL's watchdog thread
    polls its events inside it; gaps on a thread that launches nothing are not stalls; a gap
    shorter than STALL_NS is overhead, not a stall; gaps across windows are not counted."""
    ms = 1e6
    rows = [(0, 10, "cudaLaunchKernel", t * ms, t * ms + 5e3) for t in (0, 1, 2, 7, 8)]
    rows += [(0, 11, "cudaEventQuery", t * ms, t * ms + 2e3) for t in (2.5, 3, 3.5, 4, 5, 6)]
    rows += [(0, 12, "cudaStreamSynchronize", 10 * ms, 10 * ms + 1e3)]  # no launches
    rows += [(0, 12, "cudaEventQuery", 30 * ms, 30 * ms + 1e3)]
    rows += [(1, 20, "cuLaunchKernelEx", t * ms, t * ms + 5e3) for t in (0, 0.5, 1.2, 1.9)]
    rows += [(1, 20, "cudaLaunchKernel", 25 * ms, 25 * ms + 5e3)]  # in the second window
    rows += [(1, 20, "cudaLaunchKernel", 27 * ms, 27 * ms + 5e3)]
    found = host_stalls(_calls(rows), ((0, 9 * ms), (20 * ms, 40 * ms)))
    total, longest = found[0]
    assert total == pytest.approx(5 * ms - 5e3) and longest == total
    assert found[1] == (pytest.approx(2 * ms - 5e3), pytest.approx(2 * ms - 5e3))
    assert host_stalls(_calls(rows), ((0, 9 * ms), (20 * ms, 40 * ms)), only=[1]) == {1: found[1]}
    assert STALL_NS == 1e6
    assert host_stalls(_calls([]), ((0, 1),)) == {}
