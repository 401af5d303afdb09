"""Merging several inputs (readers/merge.py) on the recordings: one capture read through two
exports is merged by launch, a repeat is counted once, inputs that disagree or lack each
other's metrics say so."""

from __future__ import annotations

import shutil
from pathlib import Path

from nsdiag.analysis.engine import diagnose
from nsdiag.readers import load
from nsdiag.readers.merge import disagreements, same_launches
from tests.bad_input_corpus import (
    REFERENCE_DETAILS,
    REFERENCE_RAW,
    SMALL_RAW,
    SMALL_REP,
    SYNC_HEAVY,
    raw_and_edited_details,
)


def test_raw_and_details_of_one_capture_merge_by_launch() -> None:
    raw, details = load(REFERENCE_RAW), load(REFERENCE_DETAILS)
    assert same_launches(raw, details) and not disagreements(raw.kernels, details.kernels)
    merged = load([REFERENCE_RAW, REFERENCE_DETAILS])
    assert len(merged.kernels) == len(raw.kernels) == 42
    assert len(merged.rule_results) == len(details.rule_results) > 0
    assert not merged.meta.warnings
    # verdicts are those of the raw page alone: the details page adds ncu's rules, nothing else
    alone = {k.name: (k.bound, k.limiter) for k in diagnose(raw).kernels}
    both = {k.name: (k.bound, k.limiter) for k in diagnose(merged).kernels}
    assert alone == both


def test_details_first_still_uses_the_raw_values() -> None:
    merged = load([REFERENCE_DETAILS, REFERENCE_RAW])
    raw = load(REFERENCE_RAW)
    assert merged.kernels["duration_ns"].tolist() == raw.kernels["duration_ns"].tolist()
    assert len(merged.raw.columns) >= len(raw.raw.columns)


def test_disagreeing_pages_are_named(tmp_path: Path) -> None:
    raw_path, details_path = raw_and_edited_details(tmp_path)
    merged = load([raw_path, details_path])
    (warning,) = merged.meta.warnings
    assert "disagree" in warning and "duration_ns on 1 launch(es), by up to 50%" in warning
    assert merged.kernels["duration_ns"].iloc[0] == load(REFERENCE_RAW).kernels["duration_ns"][0]


def test_report_and_its_csv_are_one_capture() -> None:
    merged = load([SMALL_REP, SMALL_RAW])
    assert len(merged.kernels) == 2 and not merged.meta.warnings


def test_the_same_capture_twice_counts_once(tmp_path: Path) -> None:
    copy = tmp_path / "copy.csv.gz"
    shutil.copy(REFERENCE_RAW, copy)
    for inputs in ([REFERENCE_RAW, REFERENCE_RAW], [REFERENCE_RAW, copy]):
        merged = load(inputs)
        assert len(merged.kernels) == 42 and len(merged.meta.warnings) == 1


def test_ncu_and_nsys_still_append() -> None:
    merged = load([REFERENCE_RAW, SYNC_HEAVY])
    assert len(merged.kernels) == 42 and merged.has_timeline()
    assert {s.format for s in merged.meta.sources} == {"ncu-raw-csv", "nsys-sqlite"}


def test_different_metric_sets_say_whose_verdicts_rest_on_less(data_dir: Path) -> None:
    basic = data_dir / "console/basic_raw.csv.gz"
    merged = load([REFERENCE_RAW, basic])
    assert len(merged.kernels) == 42 + len(load(basic).kernels)
    (warning,) = merged.meta.warnings
    assert str(basic) in warning and "lacks metrics" in warning
    diagnose(merged)  # rows whose stall metrics are all missing: no crash
