"""The region on third-party model code recorded on the H200 (tests/data/third_party, parts G-J of
tools/record_real_programs.sh): library NVTX ranges (CUB inside the embedding backward, PyTorch's
emit_nvtx op ranges) never choose it, per-step range names are one repeating range, a script that
runs its step four times has iterations, and start-up is summarised, never ranked."""

from __future__ import annotations

import pytest

from nsdiag.analysis.records.diagnosis import Diagnosis
from tests.conftest import diagnosis as recorded


def diagnosis(recording: str) -> Diagnosis:
    return recorded(f"third_party/{recording}")


# recording -> (method, the range's name or None, steady iterations, warm-up iterations)
EXPECTED = {
    # transformers Llama and GPT-2: CUB's own ranges in every step, none of the program's
    "llama_big_eager.sqlite.gz": ("kernel-sequence", None, 8, 0),
    "train_logging": ("kernel-sequence", None, 33, 1),
    # the Llama run four times, each step in NVTX 'step_<i>'
    "llama_steps4.sqlite.gz": ("nvtx-iterations", "step", 3, 1),
    # the Llama under torch.autograd.profiler.emit_nvtx: 69,432 op ranges, none the user's
    "llama_emit_nvtx.sqlite.gz": ("kernel-sequence", None, 8, 0),
    # timm's ViT run four times, no NVTX: the first step (autotuning, lazy loading) is start-up
    "vit_four.sqlite.gz": ("kernel-sequence", None, 3, 0),
}


@pytest.mark.parametrize("recording", sorted(EXPECTED))
def test_the_region_is_the_steady_steps(recording: str) -> None:
    method, name, steady, warmup = EXPECTED[recording]
    d = diagnosis(recording)
    region = d.region
    assert region is not None and region.method == method, region and region.description
    if name is not None:
        assert f"NVTX range '{name}'" in region.description
    assert "cub::" not in region.description and "aten::" not in region.description
    assert len(region.iterations) == steady and len(region.warmup) == warmup
    # start-up is one line before the region, never a finding
    assert d.startup is not None and d.startup.time_ns > 0.5e9 and "not ranked" in d.startup.line()
    assert sum(c.saved_ns or 0.0 for c in d.changes) <= d.wall_ns


def test_per_iteration_figures_follow_the_region() -> None:
    d = diagnosis("llama_steps4.sqlite.gz")
    step = d.region.iteration_median_ns
    assert step is not None and 45e6 < step < 70e6  # the program timed 53.7-63.3 ms per step
    first = d.top_changes(1)[0]
    assert first.saved_ns is not None and first.saved_ns / d.iterations < step
