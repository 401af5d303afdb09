"""Nesting (issue 23, item 4): the region is the outermost repeating user range, and what happens
inside it counts under the program's innermost range around it (analysis/program/user_range.py):
`forward`, `backward` or `optimizer` inside `train_step`, never a library's range (NCCL, CUB)
and never "outside NVTX ranges" because PyTorch's autograd engine launched the backward pass
from a thread of its own. A synthetic export with known nesting, then the H200 recordings."""

from __future__ import annotations

import pandas as pd
import pytest

from nsdiag.analysis.program.timeline.view import prepare
from nsdiag.analysis.program.user_range import activity_ranges
from nsdiag.analysis.region.choose import choose_region
from nsdiag.model.session import Session
from tests.conftest import diagnosis

MS = 1_000_000
MAIN, AUTOGRAD = 11, 12  # the Python thread and PyTorch's autograd engine thread


def _range(name: str, start_ms: float, end_ms: float, depth: int, tid: int = MAIN) -> dict:
    return {
        "name": name,
        "start_ns": int(start_ms * MS),
        "end_ns": int(end_ms * MS),
        "duration_ns": int((end_ms - start_ms) * MS),
        "depth": depth,
        "process_id": 7,
        "thread_id": tid,
        "domain": "",
    }


def _step_ranges(at_ms: float) -> list[dict]:
    """One 30 ms step: forward, backward (the main thread blocked in loss.backward(), NCCL's
    all-reduce range inside it), optimizer; CUB's range on the autograd thread."""
    t = at_ms
    return [
        _range("train_step", t, t + 30, 0),
        _range("forward", t + 1, t + 10, 1),
        _range("backward", t + 10, t + 25, 1),
        _range("ncclAllReduce", t + 12, t + 13, 2),
        _range("optimizer", t + 25, t + 29, 1),
        _range("cub::DeviceRadixSort", t + 14, t + 15, 0, tid=AUTOGRAD),
    ]


# (launch time in the step, launching thread, the range it counts under)
LAUNCHES = [
    (2.0, MAIN, "forward"),
    (12.5, MAIN, "backward"),  # inside ncclAllReduce, itself inside backward
    (14.5, AUTOGRAD, "backward"),  # inside CUB's range, on the autograd thread
    (20.0, AUTOGRAD, "backward"),  # no range open on its thread: the main thread's
    (26.0, MAIN, "optimizer"),
    (29.5, MAIN, "train_step"),  # after optimizer, still in the step
]


def _export(steps: int = 4) -> Session:
    nvtx, acts = [], []
    for i in range(steps):
        t = 100 + 30 * i
        nvtx += _step_ranges(t)
        for offset, tid, _ in LAUNCHES:
            at = int((t + offset) * MS)
            acts.append(
                {
                    "kind": "kernel",
                    "name": f"k{offset}",
                    "grid": "(1, 1, 1)",
                    "block": "(128, 1, 1)",
                    "start_ns": at + 10_000,
                    "end_ns": at + 200_000,
                    "duration_ns": 190_000,
                    "api_start_ns": at,
                    "process_id": 7,
                    "thread_id": tid,
                    "device": 0,
                    "stream": 7,
                    # what the reader records: the innermost range open on the launching thread
                    "nvtx_range": _innermost_on_thread(nvtx, tid, at),
                }
            )
    acts.append({**acts[0], "start_ns": 1, "end_ns": 2, "api_start_ns": 0, "nvtx_range": None})
    return Session(timeline=pd.DataFrame(acts), nvtx_ranges=pd.DataFrame(nvtx))


def _innermost_on_thread(nvtx: list[dict], tid: int, at: int) -> str | None:
    open_ = [r for r in nvtx if r["thread_id"] == tid and r["start_ns"] <= at <= r["end_ns"]]
    return max(open_, key=lambda r: r["start_ns"])["name"] if open_ else None


def test_activities_count_under_the_innermost_user_range() -> None:
    session = _export()
    found = list(activity_ranges(session.timeline, session.nvtx_ranges))
    assert found == [name for _ in range(4) for _, _, name in LAUNCHES] + [""]
    # what the launching thread alone says: library ranges and the autograd thread's launches
    # would fall outside the step
    recorded = session.timeline["nvtx_range"].fillna("").tolist()[: len(LAUNCHES)]
    assert recorded == ["forward", "ncclAllReduce", "cub::DeviceRadixSort", "", "optimizer",
                        "train_step"]  # fmt: skip


def test_the_program_analyses_group_by_the_inner_ranges() -> None:
    view = prepare(_export())
    assert set(view.acts["range"]) == {"forward", "backward", "optimizer", "train_step", ""}
    assert "ncclAllReduce" not in set(view.acts["range"])


def test_the_region_is_the_outermost_repeating_range() -> None:
    session = _export(steps=6)
    region = choose_region(session.timeline, pd.DataFrame(), session.nvtx_ranges)
    assert region.method == "nvtx-iterations"
    assert "NVTX range 'train_step'" in region.description
    assert len(region.iterations) + len(region.warmup) == 6


def test_numbered_instances_count_as_their_range() -> None:
    """Per-step range names (`step_0`, `step_1`, ...) are one range for attribution too."""
    session = _export()
    nvtx = session.nvtx_ranges.copy()
    steps = nvtx["name"] == "train_step"
    nvtx.loc[steps, "name"] = [f"step_{i}" for i in range(int(steps.sum()))]
    found = set(activity_ranges(session.timeline, nvtx))
    assert "step" in found and not any(str(n).startswith("step_") for n in found)


@pytest.mark.parametrize(
    ("recording", "rule", "range_"),
    [
        # DDP on the H200 pair: the backward pass comes from the autograd thread (3,541 of 5,149
        # activities per rank), inside `train_step` on the main thread
        ("multi_gpu/ddp_single_bucket.sqlite.gz", "NSD406", "train_step"),
        ("multi_gpu/verify3/ddp_straggler", "NSD406", "train_step"),
        # the Llama in per-step ranges (step_0 .. step_3), CUB's ranges inside its backward
        ("third_party/llama_steps4.sqlite.gz", "NSD406", "step"),
    ],
)
def test_findings_on_the_recordings_name_the_users_range(
    recording: str, rule: str, range_: str
) -> None:
    d = diagnosis(recording)
    (finding,) = [f for f in d.program_findings if f.rule == rule]
    assert finding.range == range_
    assert f"NVTX range '{range_}'" in finding.message
    assert "work outside NVTX ranges" not in finding.message
