"""Choosing the analysed region (analysis/region/choose.py) on synthetic timelines whose loop,
warm-up and start-up are known by construction; tests/test_predictions.py checks the same on
recordings."""

from __future__ import annotations

import pandas as pd
import pytest

from nsdiag.analysis.records.region import Iteration
from nsdiag.analysis.region.choose import choose_region
from nsdiag.analysis.region.startup import summarise
from nsdiag.analysis.region.steady import split_warmup
from nsdiag.analysis.region.windows import within
from nsdiag.errors import InputError

MS = 1_000_000
BODY = ["gemm", "bias", "relu", "softmax", "copy"]  # one iteration's kernels, in order
NO_API = pd.DataFrame(columns=["name", "start_ns", "end_ns"])
NO_NVTX = pd.DataFrame(columns=["name", "start_ns", "end_ns", "depth", "process_id", "thread_id"])


def _kernel(name: str, at: int, length: int = 100_000) -> dict[str, object]:
    return {
        "kind": "kernel",
        "name": name,
        "grid": "(132, 1, 1)",
        "block": "(256, 1, 1)",
        "start_ns": at + 5_000,
        "end_ns": at + 5_000 + length,
        "api_start_ns": at,
    }


def _program(warmup_ms: list[float], steady: int, step_ms: float = 10) -> tuple[pd.DataFrame, list]:
    """Start-up (one-off kernels over 1 s), then one iteration of BODY per entry of warmup_ms
    (that long) and `steady` iterations of step_ms. Returns the timeline and each iteration's
    (start, end)."""
    rows = [_kernel(f"init_{i}", i * 200 * MS) for i in range(5)]
    t = 1_000 * MS
    spans = []
    for length in [*warmup_ms, *[step_ms] * steady]:
        spans.append((t, t + int(length * MS)))
        rows += [_kernel(name, t + k * 50_000) for k, name in enumerate(BODY)]
        t += int(length * MS)
    return pd.DataFrame(rows), spans


def _nvtx(spans: list, name: str = "step") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"name": f"{name} {i}", "start_ns": s, "end_ns": e, "depth": 0, "process_id": 1,
             "thread_id": 1}
            for i, (s, e) in enumerate(spans)
        ]
    )  # fmt: skip


def test_the_repeating_kernel_sequence_is_the_region_and_start_up_is_left_out() -> None:
    timeline, spans = _program(warmup_ms=[40, 30], steady=12)
    region = choose_region(timeline, NO_API, NO_NVTX)
    assert region.method == "kernel-sequence"
    assert "repeating sequence of 5 kernel launches" in region.description
    assert len(region.warmup) == 2
    assert region.start_ns == spans[2][0]  # the first steady iteration, after the slow two
    assert len(region.iterations) >= 10
    assert region.iteration_median_ns == pytest.approx(10 * MS)
    assert not within(
        timeline["api_start_ns"][timeline["name"].str.startswith("init")], region.windows
    ).any()


def test_a_repeating_nvtx_range_gives_the_iterations_and_its_name() -> None:
    timeline, spans = _program(warmup_ms=[35], steady=8)
    region = choose_region(timeline, NO_API, _nvtx(spans))
    assert region.method == "nvtx-iterations"
    assert region.description.startswith("8 steady-state iterations of NVTX range 'step'")
    assert region.description.endswith("after 1 warm-up iteration")
    assert region.windows == ((spans[1][0], spans[-1][1]),)
    assert region.to_json()["iterations"] == 8


def test_the_profiler_range_wins_over_loops() -> None:
    timeline, spans = _program(warmup_ms=[], steady=10)
    start, stop = spans[4][0] - 1_000, spans[5][1]
    api = pd.DataFrame(
        [
            {"name": "cudaProfilerStart", "start_ns": start - 2_000, "end_ns": start},
            {"name": "cudaProfilerStop", "start_ns": stop, "end_ns": stop + 2_000},
        ]
    )
    region = choose_region(timeline, api, _nvtx(spans))
    assert region.method == "profiler-range"
    assert region.windows == ((start, stop),)


def test_nothing_repeating_is_the_timeline_after_start_up() -> None:
    """No loop: the region starts at the first kernel launch; the host's second of imports and
    CUDA initialisation before it is start-up (summarised, never ranked)."""
    timeline = pd.DataFrame([_kernel(f"k{i}", 1_000 * MS + i * MS) for i in range(12)])
    api = pd.DataFrame(
        [
            {"name": "cuInit", "start_ns": 0, "end_ns": 300 * MS},
            {"name": "cuLibraryLoadData", "start_ns": 400 * MS, "end_ns": 600 * MS},
        ]
    )
    region = choose_region(timeline, api, NO_NVTX)
    assert region.method == "whole" and not region.is_whole
    assert region.start_ns == 1_000 * MS and "start-up" in region.description
    startup = summarise(region, api)
    assert startup is not None and startup.time_ns == pytest.approx(1_000 * MS)
    assert "module loading" in startup.line()
    # a trace that starts with its first launch is the whole timeline
    bare = pd.DataFrame([_kernel(f"k{i}", i * MS) for i in range(12)])
    assert choose_region(bare, NO_API, NO_NVTX).is_whole


@pytest.mark.parametrize(("warmup", "steady"), [([30.0], 2), ([], 3), ([25.0], 3), ([], 4)])
def test_a_short_run_of_three_or_four_steps_is_iterations(warmup: list[float], steady: int) -> None:
    """A script that runs its step three or four times: every repetition is an iteration (the
    last one too, ended by its GPU work), the first one warm-up when it is slower."""
    timeline, spans = _program(warmup_ms=warmup, steady=steady)
    region = choose_region(timeline, NO_API, NO_NVTX)
    assert region.method == "kernel-sequence", region.description
    assert len(region.warmup) == len(warmup)
    assert len(region.iterations) == steady
    assert region.start_ns == spans[len(warmup)][0]
    assert region.iteration_median_ns == pytest.approx(10 * MS, rel=0.01)


def test_irregular_repeats_are_not_a_steady_state() -> None:
    # the same body every time, but iterations of 5 to 60 ms: not a loop's steady state
    timeline, _ = _program(warmup_ms=[5, 60, 7, 45, 6, 50, 9, 40, 5, 55], steady=0)
    assert choose_region(timeline, NO_API, NO_NVTX).method == "whole"


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ("nvtx:forward", "no NVTX range 'forward' launches kernels"),
        ("9:3", "END must be after START"),
        ("steady", "is not auto, all, nvtx:NAME or START:END"),
    ],
)
def test_a_bad_region_request_is_one_clear_error(request_: str, message: str) -> None:
    timeline, spans = _program(warmup_ms=[], steady=4)
    with pytest.raises(InputError, match=message):
        choose_region(timeline, NO_API, _nvtx(spans), request=request_)


def test_user_regions() -> None:
    timeline, spans = _program(warmup_ms=[30], steady=6)
    nvtx = _nvtx(spans)
    assert choose_region(timeline, NO_API, nvtx, request="all").is_whole
    named = choose_region(timeline, NO_API, nvtx, request="nvtx:step")
    assert named.method == "user" and len(named.iterations) == 6 and len(named.warmup) == 1
    first = int(timeline["start_ns"].min())
    window = choose_region(timeline, NO_API, nvtx, request="1000:1020")
    assert window.windows == ((first + 1_000 * MS, first + 1_020 * MS),)


def _iterations(walls_ms: list[float], kernels: list[int] | None = None) -> list[Iteration]:
    out, t = [], 0
    for i, wall in enumerate(walls_ms):
        out.append(Iteration(i, t, t + int(wall * MS), (kernels or [5] * len(walls_ms))[i]))
        t += int(wall * MS)
    return out


def test_warm_up_is_the_slow_or_different_leading_iterations_only() -> None:
    warmup, steady = split_warmup(_iterations([30, 14, 10, 10, 11, 10, 10, 10]))
    assert [i.index for i in warmup] == [0, 1] and len(steady) == 6
    # a slow iteration later in the run is steady state (a checkpoint), not warm-up
    warmup, steady = split_warmup(_iterations([10, 10, 30, 10, 10, 10]))
    assert warmup == [] and len(steady) == 6
    # autotuning: the first iteration launched other kernels, at the usual speed
    warmup, _ = split_warmup(_iterations([10, 10, 10, 10, 10], kernels=[40, 5, 5, 5, 5]))
    assert len(warmup) == 1
