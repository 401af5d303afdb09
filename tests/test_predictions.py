"""nsdiag's estimates against what the fixes saved on the H200 (benchmarks/predictions.py,
docs/predictions.md), and what nsdiag says first about each realistic program."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from tests.conftest import diagnosis, load_benchmark

PREDICTIONS = load_benchmark("predictions")


@cache
def table() -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["program"], r["fix"]): r for r in PREDICTIONS.rows()}


@pytest.mark.parametrize("pair", PREDICTIONS.PAIRS, ids=lambda p: f"{p.program}: {p.fix[:30]}")
def test_the_measured_saving_is_within_a_factor_of_two_of_the_prediction(pair: Any) -> None:
    """Measured in the conditions the prediction was made in (both runs under nsys, or the
    benchmark of the same session)."""
    row = table()[(pair.program, pair.fix)]
    assert row["predicted_ms"] > 0 and row["measured_ms"] > 0
    assert 0.5 <= row["ratio"] <= 2.0, row


# The realistic programs: what nsdiag says first is about the step, and it is what the fix
# applied addresses. `verify/` holds `nsdiag profile` sessions made as a user makes them, with
# the region chosen automatically and phase 2's launches picked inside it.
FIRST = {
    "programs/train_loader": ("NSD407", "kernel-sequence"),
    "programs/verify/train_loader": ("NSD407", "kernel-sequence"),
    "programs/infer_cnn": ("NSD410", "nvtx-iterations"),
    "programs/step_range": ("NSD406", "profiler-range"),
    "programs/verify/step_range": ("NSD406", "profiler-range"),
    "programs/elementwise": ("NSD410", "kernel-sequence"),
    "programs/verify/elementwise": ("NSD410", "kernel-sequence"),
    "programs/lm_train_full": ("NSD208", "nvtx-iterations"),
    "programs/verify/lm_train": ("NSD208", "nvtx-iterations"),
    # third-party model code (tests/data/third_party): the cause's own change first
    "third_party/bert_serve": ("NSD406", "kernel-sequence"),
    "third_party/infer_cnn_cl.sqlite.gz": ("NSD406", "nvtx-iterations"),
    "third_party/vit_fp32": ("NSD204", "kernel-sequence"),
}


@pytest.mark.parametrize("recording", sorted(FIRST))
def test_the_first_finding_is_about_the_step(recording: str) -> None:
    rule, method = FIRST[recording]
    d = diagnosis(recording)
    assert d.region is not None and d.region.method == method
    # What nsdiag says first is a change (its findings grouped, analysis/changes.py).
    first = d.top_changes(1)[0]
    assert rule in first.rules, [c.rules for c in d.top_changes(5)]
    assert first.saved_ns and first.saved_ns <= d.wall_ns
    # start-up is summarised on one line, before the region
    assert d.startup is not None and d.startup.time_ns > 0 and "not ranked" in d.startup.line()


def test_start_up_is_never_ranked() -> None:
    """The DataLoader program's 2 s of start-up (imports, model construction, cuDNN loading)
    were its largest idle gap; in the region they are neither idle time nor a finding."""
    d = diagnosis("programs/train_loader")
    cpu = next(f for _, f in d.top_findings(20) if f.cause == "cpu-bound")
    stretches = cpu.details["longest_stretches"]
    assert stretches and all(s["end_ns"] >= d.region.start_ns for s in stretches)
    assert all(s["end_ns"] - s["start_ns"] < 1e9 for s in stretches)
    assert d.startup is not None and d.startup.time_ns > 2e9


def test_every_pair_names_the_rules_it_predicts_with() -> None:
    rules = {r["rules"][0] for r in table().values()}
    assert {"NSD407", "NSD410", "NSD411", "NSD406", "NSD208", "NSD403", "NSD204"} <= rules


@pytest.mark.parametrize("pair", PREDICTIONS.FAILING, ids=lambda p: f"{p.program}: {p.fix[:30]}")
def test_the_pairs_shown_as_failing_still_fail_under_nsys_and_hold_without(pair: Any) -> None:
    """docs/predictions.md shows them with why; if one starts to hold it belongs in PAIRS."""
    (row,) = PREDICTIONS.rows((pair,))
    assert not 0.5 <= row["ratio"] <= 2.0, row
    assert 0.5 <= row["ratio_plain"] <= 2.0, row
