"""Issue 39 item 2: the region's sequence search, its weights and the fusion analysis, made fast,
give what a straightforward implementation of their definitions gives, on real recordings and
on synthetic edge cases (period 1, a period as long as the run, no repetition, a chain that ends
the run). No wall time is asserted: benchmarks/bench_latency.py --kinds floor measures them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.program import fusion
from nsdiag.analysis.program.analyses import FUSION_CANDIDATES
from nsdiag.analysis.region import scope, sequence
from nsdiag.analysis.region.choose import choose_region
from nsdiag.analysis.region.scope import restrict, weigh_by_region
from nsdiag.analysis.region.sequence import (
    MIN_MATCH,
    _candidate_periods,
    _offset_medians,
    _periodic_stretches,
    _signature_codes,
    sequence_iterations,
    synced_before,
)
from nsdiag.analysis.region.steady import FEW_ITERATIONS, MIN_ITERATIONS
from nsdiag.analysis.region.windows import counts, kernels_in_launch_order
from nsdiag.model.launches import kernel_launches
from nsdiag.model.signature import SEPARATOR, signature_keys
from tests.test_latency_fusion import _by_definition, _key

DATA = Path(__file__).parent / "data"
# The recordings with the longest steps: the foreach=False optimizer step (1,992 launches a
# period, 50,106 launches), a GPT-2 training step, the logging training loop, GPT-2 decode
# (27,274 launches a period; its longest periods are checked by definition, not by convolution).
RECORDINGS = [
    "idioms/optim_step",
    "programs/lm_train_full",
    "third_party/train_logging",
    "idioms/decode.sqlite.gz",
]
CONVOLVE_BUDGET = 4e8  # launches x period: the convolution's cost


def _convolved(codes: np.ndarray, period: int, least: int) -> list[tuple[int, int]]:
    """_periodic_stretches as first written: each window's match share by convolution."""
    n = len(codes)
    match = np.zeros(n, dtype="float64")
    match[period:] = codes[period:] == codes[:-period]
    window = np.convolve(match, np.ones(period), "full")[period - 1 : n + period - 1] / period
    return _stretches(window, period, least, n)


def _defined(codes: np.ndarray, period: int, least: int) -> list[tuple[int, int]]:
    """_periodic_stretches by its definition, one launch at a time: the share of the `period`
    launches from each one (fewer at the end, over `period` all the same) that repeat one period
    later; a share counted in integers."""
    n = len(codes)
    repeats = [int(period <= i and codes[i] == codes[i - period]) for i in range(n)]
    count = sum(repeats[:period])
    window = np.empty(n)
    for i in range(n):
        window[i] = count / period
        count += (repeats[i + period] if i + period < n else 0) - repeats[i]
    return _stretches(window, period, least, n)


def _stretches(window: np.ndarray, period: int, least: int, n: int) -> list[tuple[int, int]]:
    good = np.concatenate([[False], window >= MIN_MATCH, [False]]).astype("int8")
    edges = np.flatnonzero(np.diff(good))
    out = []
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        a, b = max(int(start) - period, 0), min(int(stop) + period - 1, n)
        if b - a >= least * period:
            out.append((a, b))
    return out


def _codes(recording: str) -> tuple[np.ndarray, pd.DataFrame, np.ndarray, np.ndarray]:
    session = nsdiag.load(DATA / recording)
    timeline = session.timeline
    rows, launches = kernels_in_launch_order(timeline)
    kernels = timeline.iloc[rows]
    synced = synced_before(launches, session.api_calls)
    return _signature_codes(kernels, synced), kernels, synced, launches


@pytest.mark.slow
@pytest.mark.parametrize("recording", RECORDINGS)
def test_stretches_are_the_convolutions_on_recordings(recording: str) -> None:
    codes, _, _, _ = _codes(recording)
    checked = 0
    for least in (MIN_ITERATIONS, FEW_ITERATIONS):
        for period in _candidate_periods(codes, least):
            got = _periodic_stretches(codes, period, least)
            if len(codes) * period <= CONVOLVE_BUDGET:
                assert got == _convolved(codes, period, least), (least, period)
                checked += 1
            elif period > 10_000:  # the long decode period: by definition (O(launches))
                assert got == _defined(codes, period, least), (least, period)
                checked += 1
    assert checked


@pytest.mark.slow
@pytest.mark.parametrize("recording", RECORDINGS[:3])
def test_iterations_are_those_of_the_convolutions(
    recording: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole search (candidate periods, stretches, cuts, the main loop's choice) gives the
    same iterations with the convolution's stretches and the per-offset medians one at a time."""
    _, kernels, synced, launches = _codes(recording)
    got = sequence_iterations(kernels, synced, launches)
    monkeypatch.setattr(sequence, "_periodic_stretches", _convolved)
    monkeypatch.setattr(sequence, "_offset_medians", _medians_one_at_a_time)
    assert got is not None
    assert got == sequence_iterations(kernels, synced, launches)


def _medians_one_at_a_time(gaps: np.ndarray, period: int) -> np.ndarray:
    return np.array([float(np.median(gaps[o::period])) for o in range(period)])


@pytest.mark.parametrize(
    ("codes", "period"),
    [
        ([7] * 40, 1),  # one kernel, over and over: period 1
        (list(range(5)) * 8, 5),
        (list(range(5)) * 8, 40),  # the period is the run: nothing to compare with
        (list(range(5)) * 8, 39),
        (list(range(40)), 3),  # no repetition
        (list(range(6)) * 3 + [99] + list(range(6)) * 5, 6),  # one stray launch
        ([1, 2, 3] * 3 + [4, 5] * 10 + [1, 2, 3] * 4, 3),  # two loops
        ([0], 1),
    ],
)
def test_stretches_on_edge_cases(codes: list[int], period: int) -> None:
    array = np.asarray(codes, dtype="int64")
    for least in (MIN_ITERATIONS, FEW_ITERATIONS, 1):
        got = _periodic_stretches(array, period, least)
        assert got == _convolved(array, period, least) == _defined(array, period, least)


@pytest.mark.parametrize(("length", "period"), [(40, 1), (40, 7), (41, 40), (5, 5), (12, 5)])
def test_offset_medians_are_each_offsets_median(length: int, period: int) -> None:
    gaps = np.random.default_rng(length * period).integers(0, 1_000, length)
    got = _offset_medians(gaps, period)
    assert got.tolist() == _medians_one_at_a_time(gaps, period).tolist()


def _synthetic(names: list[str], step_ns: int = 1_000) -> pd.DataFrame:
    launches = np.arange(len(names), dtype="int64") * step_ns
    return pd.DataFrame(
        {
            "name": names,
            "grid": "(1, 1, 1)",
            "block": "(128, 1, 1)",
            "end_ns": launches + step_ns // 2,
        }
    )


@pytest.mark.parametrize(
    "names",
    [
        ["k"] * 30,  # period 1
        [f"k{i}" for i in range(30)],  # no repetition
        [f"k{i % 10}" for i in range(30)],  # the period a third of the run
        [f"k{i % 15}" for i in range(30)],  # twice: a short run's step
    ],
)
def test_search_on_edge_cases(names: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = _synthetic(names)
    launches = np.arange(len(names), dtype="int64") * 1_000
    synced = np.zeros(len(names), dtype=bool)
    got = [sequence_iterations(kernels, synced, launches, least) for least in (3, 2)]
    monkeypatch.setattr(sequence, "_periodic_stretches", _convolved)
    monkeypatch.setattr(sequence, "_offset_medians", _medians_one_at_a_time)
    assert got == [sequence_iterations(kernels, synced, launches, least) for least in (3, 2)]


# --- fusion ------------------------------------------------------------------------------------

PARAMS = FUSION_CANDIDATES.defaults
MB = 1e6


def _launch(name: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "process_id": 1,
        "stream": 7,
        "name": name,
        "synced_before": False,
        "kind": "elementwise",
        "read_bytes": 64 * MB,
        "write_bytes": 64 * MB,
        "duration_ns": 20_000.0,
        "best_bytes_per_s": 3e12,
        "dram_pct": 60.0,
        "tensor_pct": 0.0,
        "bound": "memory",
        "range": "step",
    }
    return {**row, **values}


FUSION_CASES = {
    "one launch": [_launch("a")],
    "two linked": [_launch("a"), _launch("b")],
    "a chain to the end": [_launch("x", kind="gemm", bound="compute")]
    + [_launch(f"e{i}") for i in range(5)],
    "no links": [_launch(f"g{i}", kind="gemm", bound="compute") for i in range(4)],
    "runs of one kernel": [_launch("a"), _launch("a"), _launch("a"), _launch("b"), _launch("b")],
    "cut by a sync": [_launch("a"), _launch("b"), _launch("c", synced_before=True), _launch("d")],
    "at the roof, not elementwise": [
        _launch("c0", kind="", dram_pct=95.0),
        _launch("c1", kind="", dram_pct=96.0),
    ],
    "by names, no bytes": [
        _launch(f"e{i}", read_bytes=math.nan, write_bytes=math.nan, range=f"r{i % 2}")
        for i in range(4)
    ],
    "two streams interleaved": [_launch(f"s{i}", stream=7 + i % 2) for i in range(6)],
    "every step its own chain": [
        _launch("a"),
        _launch("b"),
        _launch("g", kind="gemm", bound="compute"),
        _launch("c"),
        _launch("d"),
        _launch("h", kind="gemm", bound="compute"),
        _launch("e"),
        _launch("f"),
    ],
}


@pytest.mark.parametrize("case", list(FUSION_CASES))
def test_chains_on_edge_cases(case: str) -> None:
    sequence_frame = pd.DataFrame(FUSION_CASES[case])
    got = [[_key(step) for step in chain] for chain in fusion.chains(sequence_frame, PARAMS)]
    assert got == _by_definition(sequence_frame, PARAMS, None)


def test_chains_claimed_launches() -> None:
    frame = pd.DataFrame([_launch(f"e{i}") for i in range(6)])
    claimed = np.array([False, False, True, True, False, False])
    got = [[_key(s) for s in chain] for chain in fusion.chains(frame, PARAMS, claimed)]
    assert got == _by_definition(frame, PARAMS, claimed)
    assert len(got) == 2


@pytest.mark.slow
@pytest.mark.parametrize("recording", RECORDINGS[:3])
def test_codes_number_the_key_texts(recording: str) -> None:
    """One number per launch, as pd.factorize numbers the launches' key texts with "s" appended
    where the host synchronised before it (what the codes were first made from)."""
    codes, kernels, synced, _ = _codes(recording)
    texts = signature_keys(kernels, exact=True) + np.where(synced, SEPARATOR + "s", "")
    expected, _ = pd.factorize(texts)
    assert codes.tolist() == expected.tolist()
    assert synced.any()


def test_counts_are_each_windows_launches() -> None:
    launches = np.array([5, 1, 9, 9, 3, 12, 7], dtype="int64")
    windows = [(0, 5), (5, 9), (9, 10), (13, 20), (1, 1), (-5, 100)]
    expected = [sum(a <= t < b for t in launches.tolist()) for a, b in windows]
    assert counts(launches, windows) == expected
    assert counts(np.sort(launches), windows, ordered=True) == expected
    assert counts(launches, []) == []


# --- the region's weights ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "recording", ["idioms/copy_feed", "programs/lm_train_full", "third_party/train_logging"]
)
def test_weights_from_the_profiled_shapes_alone(
    recording: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """weigh_by_region groups only the launches a profiled kernel may match: every weight is
    what grouping all the region's launches gives."""
    session = nsdiag.load(DATA / recording)
    chosen = choose_region(session.timeline, session.api_calls, session.nvtx_ranges)
    region_timeline = restrict(session, chosen).timeline
    got = weigh_by_region(session.kernels, region_timeline)
    launches = region_timeline[region_timeline["kind"] == "kernel"]
    assert len(scope._shaped_like(session.kernels, kernel_launches(launches))) < len(launches)
    monkeypatch.setattr(scope, "_shaped_like", lambda kernels, launches: launches)
    expected = weigh_by_region(session.kernels, region_timeline)
    pd.testing.assert_frame_equal(got.kernels, expected.kernels, check_exact=True)
    assert (got.outside, got.matched) == (expected.outside, expected.matched)
    assert got.matched
