"""Verdicts for matrix kernels (analysis/kernel/verdict.py, docs/diagnosis.md): a tensor-core
kernel is judged on its tensor pipe, DRAM and L2; its shared-memory and L1 traffic (operand
staging) never makes it memory-bound. Recorded kernels from the H200 first, then the rule's
edges."""

from __future__ import annotations

from typing import Any

import pytest

from nsdiag.analysis.kernel.tensor import TENSOR_PIPE_BUSY_PCT, tensor_core_evidence
from nsdiag.analysis.kernel.verdict import SATURATED_PCT, classify, sentence
from tests.test_tensor_roofline import CNN, GEMMS, LAYERS8, LM_TRAIN, TORCH, diagnosis


def test_big_nvjet_gemms_are_compute_bound_on_tensor() -> None:
    """All six wgmma GEMMs of the LM head at 83-96% of the roof; the two NNT ones were called
    memory-bound on SHARED (95%), their tensor pipe at 94%."""
    nvjet = [k for k in diagnosis(GEMMS).kernels if k.name.startswith("nvjet")]
    assert len(nvjet) == 6
    for k in nvjet:
        assert (k.bound, k.limiter) == ("compute", "tensor"), k.name
        assert k.metrics["pipe_tensor_pct"] >= SATURATED_PCT
        assert "is compute-bound on the tensor pipe" in k.verdict
        assert not k.close_call
    nnt = [k for k in nvjet if k.name.endswith("NNT")]
    assert len(nnt) == 2
    for k in nnt:
        assert k.metrics["shared_throughput_pct"] > 94 and k.metrics["l1_throughput_pct"] > 98
        assert "shared memory 95% and L1 99% busy" in k.verdict_note
        assert "not a memory limit" in k.verdict_note


@pytest.mark.parametrize("path, count", [(GEMMS, 6), (LM_TRAIN, 3)])
def test_cutlass_75_fallbacks_are_not_memory_bound_on_l1(path: str, count: int) -> None:
    """The align1 fallbacks (L1 69-97% busy, tensor pipe 18-30%) were 'memory-bound on L1'."""
    fallbacks = [k for k in diagnosis(path).kernels if "cutlass_75_tensorop" in k.name]
    assert len(fallbacks) == count
    for k in fallbacks:
        assert k.metrics["l1_throughput_pct"] > 65
        assert k.bound != "memory" and k.limiter not in ("l1", "shared"), k.name
        assert "L1" in k.verdict_note and "mma.sync" in k.verdict_note
        assert "operand staging" in k.verdict


def test_recorded_tensor_kernels_are_never_bound_on_shared_or_l1() -> None:
    for path in (GEMMS, LM_TRAIN, CNN, TORCH, LAYERS8):
        for k in diagnosis(path).kernels:
            if k.roofline.tensor_precision:
                assert k.limiter not in ("shared", "l1"), (path, k.name)


def test_the_bf16_matmul_is_compute_bound_and_the_sgemm_keeps_its_verdict() -> None:
    def bound(prefix: str) -> tuple[str, str | None]:
        k = next(k for k in diagnosis(TORCH).kernels if k.name.startswith(prefix))
        return k.bound, k.limiter

    assert bound("nvjet_sm90_tst_256x128") == ("compute", "tensor")
    assert bound("sm80_xmma_gemm_f32f32") == ("compute", "fma")


def test_dram_and_l2_still_count_for_tensor_kernels() -> None:
    """A cuDNN convolution and an nvjet GEMM of the CNN that wait on DRAM and L2 stay so."""
    bounds = {(k.bound, k.limiter) for k in diagnosis(CNN).kernels if k.roofline.tensor_precision}
    assert {("memory", "dram"), ("memory", "l2"), ("compute", "tensor")} <= bounds


# ------------------------------------------------------------------------- the rule's edges


def _gemm(**overrides: Any) -> dict[str, Any]:
    """A wgmma GEMM's typical launch (nvjet_sm90_hsh_192x128 NNT of gemm_shapes, rounded)."""
    values: dict[str, Any] = {
        "name": "nvjet_sm90_hsh_192x128_64x5_1x2_h_bz_coopB_NNT",
        "duration_ns": 2.0e6,
        "grid_size": 132.0,
        "sm_count": 132.0,
        "flop_tensor": 1.5e15,
        "dram_throughput_pct": 20.0,
        "l2_throughput_pct": 40.0,
        "shared_throughput_pct": 95.0,
        "l1_throughput_pct": 99.0,
        "pipe_tensor_pct": 94.0,
        "pipe_alu_pct": 10.0,
        "pipe_fma_pct": 5.0,
        "top_stall": "long_scoreboard",
    }
    values.update(overrides)
    return values


def test_shared_and_l1_do_not_make_a_tensor_kernel_memory_bound() -> None:
    v = classify(_gemm())
    assert (v.bound, v.limiter, v.limiter_pct, v.mem_pct) == ("compute", "tensor", 94.0, 40.0)
    assert not v.close_call and v.note == ""
    assert v.aside.startswith("shared memory 95% and L1 99% busy: a tensor-core kernel")


def test_the_same_counters_without_tensor_work_are_memory_bound() -> None:
    v = classify(_gemm(flop_tensor=0.0, pipe_tensor_pct=0.0, pipe_alu_pct=90.0))
    assert (v.bound, v.limiter) == ("memory", "shared") and v.aside == ""


def test_dram_beyond_the_tensor_pipe_makes_it_memory_bound() -> None:
    v = classify(_gemm(dram_throughput_pct=85.0, pipe_tensor_pct=70.0))
    assert (v.bound, v.limiter, v.limiter_pct) == ("memory", "dram", 85.0)


def test_a_slow_tensor_kernel_is_latency_bound_and_says_why() -> None:
    v = classify(_gemm(pipe_tensor_pct=30.0, shared_throughput_pct=20.0, l1_throughput_pct=91.0))
    assert (v.bound, v.limiter) == ("latency", "long_scoreboard")
    assert v.aside.startswith("L1 91% busy") and not v.close_call
    text = sentence("k", v, 15.0)
    assert "no unit beyond its tensor cores' operand staging is busy (memory 40%" in text


def test_close_calls_among_the_units_that_count() -> None:
    # DRAM just under the threshold, L2 over: a close call between the two, shared set aside
    v = classify(_gemm(dram_throughput_pct=58.0, l2_throughput_pct=97.0, pipe_tensor_pct=70.0))
    assert (v.bound, v.limiter) == ("memory", "l2") and v.close_call
    assert v.note.startswith("limiter a close call: DRAM at 58%")
    # L2 just over with shared saturated: no longer a close call with SHARED
    v = classify(_gemm(l2_throughput_pct=97.0, pipe_tensor_pct=50.0))
    assert (v.bound, v.limiter) == ("memory", "l2") and "SHARED" not in v.note
    v = classify(_gemm(l2_throughput_pct=62.0, pipe_tensor_pct=50.0))
    assert (v.bound, v.limiter) == ("memory", "l2")
    assert "busiest unit at 62%" in v.note and "SHARED" not in v.note
    # the tensor pipe just over the threshold: a close call, the staging units not in it
    v = classify(_gemm(pipe_tensor_pct=62.0))
    assert (v.bound, v.limiter) == ("compute", "tensor") and v.close_call
    assert v.note == "busiest unit at 62%, near the 60% saturation threshold"


@pytest.mark.parametrize(
    "overrides, evidence",
    [
        ({}, "tensor operations counted"),
        # the counters decide: no tensor operation, whatever the name or the pipe says
        ({"flop_tensor": 0.0, "pipe_tensor_pct": 50.0}, ""),
        # no op counts: the pipe, but not the 6.6% a kernel without tensor work shows
        ({"flop_tensor": None, "pipe_tensor_pct": 40.0}, "tensor pipe 40% busy"),
        ({"flop_tensor": None, "pipe_tensor_pct": 6.6}, ""),
        # neither counter: the name
        ({"flop_tensor": None, "pipe_tensor_pct": None}, "its name says tensor cores"),
        ({"flop_tensor": None, "pipe_tensor_pct": None, "name": "my_kernel"}, ""),
    ],
)
def test_what_makes_a_tensor_core_kernel(overrides: dict[str, Any], evidence: str) -> None:
    assert tensor_core_evidence(_gemm(**overrides)) == evidence
    assert TENSOR_PIPE_BUSY_PCT == 10.0


def test_the_special_function_kernel_with_an_idle_tensor_pipe_is_not_one() -> None:
    """calib's special_function_heavy_good: tensor pipe 6.6%, no tensor operation."""
    from tests.test_calibration import kernel

    k = kernel("calib", "special_function_heavy_good")
    assert k.metrics["pipe_tensor_pct"] > 6 and k.metrics["flop_tensor"] == 0
    assert k.roofline.tensor_precision is None and k.roofline.precision != "tensor"
