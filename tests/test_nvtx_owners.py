"""Whose NVTX range it is (model/nvtx_owners.py) and iterations named by number
(analysis/region/nvtx.py), on synthetic timelines built like tests/test_region.py's: a library's
ranges never choose the region by themselves, and per-iteration names are one repeating range."""

from __future__ import annotations

import pandas as pd
import pytest

from nsdiag.analysis.region.choose import choose_region
from nsdiag.analysis.region.nvtx import base_name, user_ranges
from nsdiag.model.nvtx_owners import ENV_LIBRARY_RANGES, library_of
from tests.test_region import MS, NO_API, _program


def _ranges(rows: list[tuple[str, str, int, int]]) -> pd.DataFrame:
    """(name, domain, start, end), all top level on one thread."""
    return pd.DataFrame(
        [
            {"name": n, "domain": d, "start_ns": s, "end_ns": e, "depth": 0, "process_id": 1,
             "thread_id": 1}
            for n, d, s, e in rows
        ]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "domain", "library"),
    [
        ("cub::DeviceRadixSort", "CCCL", "CUB/Thrust"),
        ("cub::DeviceScan::ExclusiveScan", "", "CUB/Thrust"),  # no domain recorded: the name
        ("ncclAllReduce", "NCCL", "NCCL"),
        ("ncclGroupStart", "", "NCCL"),
        ("cudnnConvolutionForward", "", "cuDNN"),
        ("aten::add, seq = 17, op_id = 5", "", "PyTorch"),
        ("MmBackward0, seq = 3", "", "PyTorch"),
        ("anything", "cuDNN", "cuDNN"),  # a known library's domain
        ("train_step", "", None),
        ("step_3", "", None),
        ("ProfilerStep#7", "", None),  # the user's torch.profiler schedule: the user's step
        ("nccl_setup", "", None),  # the user's own name, not NCCL's camel case
        ("forward", "myapp", None),  # a domain nobody knows is the program's
    ],
)
def test_whose_range(name: str, domain: str, library: str | None) -> None:
    assert library_of(name, domain) == library


def test_users_add_their_own_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    assert library_of("mylib::gather") is None
    monkeypatch.setenv(ENV_LIBRARY_RANGES, r"mylib::;[unclosed")  # a bad pattern matches nothing
    assert library_of("mylib::gather") == ENV_LIBRARY_RANGES
    assert library_of("train_step") is None


@pytest.mark.parametrize(
    ("names", "base"),
    [
        (["step_0", "step_1", "step_12"], "step"),
        (["IO 0", "IO 10", "IO 20"], "IO"),
        (["iter 3/100", "iter 4/100", "iter 5/100"], "iter"),
        (["epoch 2 batch 17", "epoch 2 batch 18", "epoch 3 batch 0"], "epoch batch"),
        (["ProfilerStep#7", "ProfilerStep#8"], "ProfilerStep"),
        (["iter1", "iter2"], "iter"),
    ],
)
def test_names_that_differ_by_numbers_are_one_range(names: list[str], base: str) -> None:
    assert {base_name(n) for n in names} == {base}


def test_a_number_inside_a_word_is_part_of_the_name() -> None:
    assert base_name("fp16 step") != base_name("fp32 step")
    assert base_name("bench_fp16_0") == base_name("bench_fp16_1") != base_name("bench_fp32_0")


def test_library_ranges_alone_choose_no_region() -> None:
    """A training loop without NVTX of its own whose embedding backward runs CUB: the CUB
    ranges repeat every step but are not the user's, so the launch sequence decides."""
    timeline, spans = _program(warmup_ms=[40], steady=10)
    cub = _ranges([("cub::DeviceRadixSort", "CCCL", s + 1000, s + 60_000) for s, _ in spans])
    assert len(user_ranges(cub)) == 0
    region = choose_region(timeline, NO_API, cub)
    assert region.method == "kernel-sequence"
    assert "cub::" not in region.description
    assert len(region.iterations) >= 8


def test_per_iteration_step_names_beside_nccl_ranges_are_the_iterations() -> None:
    """`step_0`, `step_1`, ... beside NCCL's own ranges: the steps are the region, warm-up step
    0 left out, and no NCCL range is named."""
    timeline, spans = _program(warmup_ms=[60], steady=8)
    rows = [(f"step_{i}", "", s, e) for i, (s, e) in enumerate(spans)]
    rows += [("ncclAllReduce", "NCCL", e - 2 * MS, e - MS) for _, e in spans]
    rows += [("ncclBroadcast", "NCCL", spans[0][0] - 5 * MS, spans[0][0] - 4 * MS)]
    region = choose_region(timeline, NO_API, _ranges(rows))
    assert region.method == "nvtx-iterations"
    assert "NVTX range 'step'" in region.description
    assert len(region.iterations) == 8 and len(region.warmup) == 1
    assert "nccl" not in region.description


def test_a_library_range_asked_for_by_name_is_still_a_region() -> None:
    timeline, spans = _program(warmup_ms=[], steady=6)
    rows = [("ncclAllReduce", "NCCL", s, e) for s, e in spans]
    region = choose_region(timeline, NO_API, _ranges(rows), "nvtx:ncclAllReduce")
    assert region.method == "user" and len(region.iterations) >= 5


def test_a_ddp_recording_renamed_per_step_still_names_the_straggler() -> None:
    """The straggler run recorded on two H200s (multi_gpu/verify3), its `train_step` ranges
    renamed `step_0`, `step_1`, ... per rank as some trainers emit them, beside NCCL's and CUB's
    own ranges: the region is still the steady steps, and rank 1 (which sleeps in `load_batch`)
    is still named late."""
    from dataclasses import replace

    import nsdiag
    from nsdiag.analysis.engine import diagnose
    from tests.conftest import DATA

    session = nsdiag.load(DATA / "multi_gpu/verify3/ddp_straggler")
    nvtx = session.nvtx_ranges.copy()
    steps = nvtx["name"] == "train_step"
    order = nvtx[steps].groupby("rank")["start_ns"].rank(method="first").astype(int) - 1
    nvtx.loc[steps, "name"] = [f"step_{i}" for i in order]
    assert {"ncclAllReduce", "cub::DeviceRadixSort"} <= set(nvtx["name"])
    d = diagnose(replace(session, nvtx_ranges=nvtx))
    assert d.region is not None and d.region.method == "nvtx-iterations"
    assert "NVTX range 'step'" in d.region.description, d.region.description
    assert len(d.region.iterations) >= 8 and d.region.warmup
    assert d.ranks is not None and d.ranks.late_rank == 1
    (late,) = [f for f in d.program_findings if f.rule == "NSD420"]
    assert late.message.startswith("Rank 1 ") and "load_batch" in late.message
