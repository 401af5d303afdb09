"""Short runs (issue 23, item 3): two to four repetitions of a step are iterations, the first one
warm-up when it is slower, found from the kernel sequence or from a repeating NVTX range, on
synthetic GPU-bound timelines whose steps are known by construction. A step that runs twice
counts only where nothing repeats three times or more, so a loop is never cut into pairs.
tests/test_region_third_party.py checks the four-step ViT and Llama recordings."""

from __future__ import annotations

import pandas as pd
import pytest

from nsdiag.analysis.records.region import Region
from nsdiag.analysis.region.choose import choose_region
from tests.test_region import BODY, MS, NO_API, NO_NVTX, _kernel, _nvtx


def _run(walls_ms: list[float]) -> tuple[pd.DataFrame, list[tuple[int, int]]]:
    """Start-up (one-off kernels over 1 s), then one step per entry of walls_ms: BODY's kernels
    back to back filling it (the GPU-bound step of a script that runs it a few times)."""
    rows = [_kernel(f"init_{i}", i * 200 * MS) for i in range(5)]
    t, spans = 1_000 * MS, []
    for wall in walls_ms:
        length = int(wall * MS)
        share = length // len(BODY)
        rows += [_kernel(name, t + k * share, share - 10_000) for k, name in enumerate(BODY)]
        spans.append((t, t + length))
        t += length
    return pd.DataFrame(rows), spans


def _regions(walls_ms: list[float]) -> tuple[Region, Region, list[tuple[int, int]]]:
    timeline, spans = _run(walls_ms)
    by_sequence = choose_region(timeline, NO_API, NO_NVTX)
    by_range = choose_region(timeline, NO_API, _nvtx(spans, name="step"))
    return by_sequence, by_range, spans


@pytest.mark.parametrize(
    ("walls", "steady", "warmup"),
    [
        ([10, 10], 2, 0),
        ([40, 10], 1, 1),  # the first of two, slower: warm-up; the second is the steady state
        ([10, 10, 10], 3, 0),
        ([40, 10, 10], 2, 1),
        ([10, 10, 10, 10], 4, 0),
        ([40, 10, 10, 10], 3, 1),
    ],
)
def test_two_to_four_repetitions_are_iterations(
    walls: list[float], steady: int, warmup: int
) -> None:
    by_sequence, by_range, spans = _regions(walls)
    assert by_sequence.method == "kernel-sequence", by_sequence.description
    assert by_range.method == "nvtx-iterations", by_range.description
    assert by_range.description.startswith(f"{steady} steady-state iterations of NVTX range")
    for region in (by_sequence, by_range):
        assert (len(region.iterations), len(region.warmup)) == (steady, warmup)
        assert region.iteration_median_ns == pytest.approx(10 * MS, rel=0.01)
        assert region.start_ns == pytest.approx(spans[warmup][0], abs=10_000)
        assert region.start_ns >= 1_000 * MS  # start-up is never part of it


def test_a_loop_is_never_cut_into_pairs() -> None:
    """Six steps: six iterations (a period of two steps repeats three times too)."""
    by_sequence, by_range, _ = _regions([10] * 6)
    assert len(by_sequence.iterations) == 6 and len(by_range.iterations) == 6


def test_one_step_is_no_loop() -> None:
    by_sequence, by_range, _ = _regions([10])
    assert by_sequence.method == "whole" and not by_sequence.iterations
    assert by_range.method == "nvtx-annotated" and not by_range.iterations
