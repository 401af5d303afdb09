"""Every kernel rule against recorded H200 kernels: the bad kernel fires it, its fixed twin does
not.

The kernels are tests/calibration/calib.cu, tests/calibration/pytorch_cases.py and the reference
kernels, profiled with ncu --set full (tests/data/README.md).
"""

from __future__ import annotations

import pytest

from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.ruleset import load_rules
from tests.conftest import DATA
from tests.conftest import diagnosis as recorded

# rule -> (fixture, kernel that must fire it, fixed twin that must not)
CALIBRATION: dict[str, tuple[str, str, str]] = {
    "NSD101": ("calib", "dram_bandwidth_saturated_bad", "dram_bandwidth_saturated_good"),
    "NSD102": ("calib", "l2_bound_bad", "l2_bound_good"),
    "NSD103": ("calib", "uncoalesced_global_access_bad", "uncoalesced_global_access_good"),
    "NSD104": ("calib", "shared_bank_conflicts_bad", "shared_bank_conflicts_good"),
    "NSD105": ("calib", "local_memory_spill_bad", "local_memory_spill_good"),
    "NSD106": ("calib", "atomic_contention_bad", "atomic_contention_good"),
    "NSD107": ("calib", "memory_latency_bad", "memory_latency_good"),
    # a coalesced copy of one float per thread (63% of the default ceiling) vs the float4
    # grid-stride copy at the roof; the seed's scalar fused kernel, 95% of the session's copy
    # ceiling, is near the roof: neither rule (tests/test_memory_ceiling.py)
    "NSD108": ("calib", "uncoalesced_global_access_good", "dram_bandwidth_saturated_bad"),
    "NSD201": ("calib", "compute_pipe_saturated_bad", "compute_pipe_saturated_good"),
    "NSD202": ("calib", "fp64_heavy_bad", "fp64_heavy_good"),
    "NSD203": ("calib", "special_function_heavy_bad", "special_function_heavy_good"),
    "NSD204": ("calib", "tensor_core_unused_bad", "tensor_core_unused_good"),
    "NSD205": ("calib", "warp_divergence_bad", "warp_divergence_good"),
    "NSD301": ("calib", "low_occupancy_bad", "low_occupancy_good"),
    "NSD302": ("calib", "tail_effect_bad", "tail_effect_good"),
    "NSD303": ("calib", "small_grid_bad", "small_grid_good"),
    "NSD304": ("calib", "launch_overhead_bad", "launch_overhead_good"),
    "NSD305": ("calib", "barrier_stall_bad", "barrier_stall_good"),
    # Stall rules: same work, the twin without the stall's cause.
    "NSD311": ("calib", "l2_bound_good", "l2_bound_bad"),  # operands from shared memory vs L2
    "NSD312": ("calib", "shared_bank_conflicts_bad", "shared_bank_conflicts_good"),
    "NSD313": ("calib", "local_memory_spill_bad", "local_memory_spill_good"),
    "NSD314": ("calib", "fp64_heavy_bad", "fp64_heavy_good"),
}
# Real library kernels (PyTorch on the H200): rule -> ((fixture, fragment that must fire),
# (fixture, fragment that must not)).
LIBRARY_CASES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    # FP32 SGEMM 4096^3 with TF32 off vs the same product in bf16 on tensor cores
    "NSD204": (("torch_cases", "sm80_xmma_gemm_f32f32"), ("torch_cases", "nvjet_sm90")),
    # the seed's einsum as a cuBLAS GEMM with K=3 vs a healthy 4096^3 SGEMM
    "NSD206": (("reference", "tilesize64x32x8"), ("torch_cases", "sm80_xmma_gemm_f32f32")),
    # a 1.6 us CUB scan initialisation launched once in a training step vs the calibration's
    # tiny kernel launched 20 times (NSD304's)
    "NSD306": (
        ("profile/full-0150.raw.csv.gz", "DeviceScanInitKernel"),
        ("calib", "launch_overhead_bad("),
    ),
    # cuBLAS's 64x8-tile GEMM of an MLP decode step at batch 16 (both of its grids) vs a
    # 4096^3 bf16 GEMM
    "NSD207": (("programs/step_range", "nvjet_sm90_hsh_64x8"), ("torch_cases", "nvjet_sm90")),
    # PyTorch's index_add_ of 200M samples into 256 counters (one global reduction per sample,
    # the busiest L2 slice's atomic unit 79% busy) vs torch.bincount's shared-memory histogram
    "NSD106": (
        ("idioms/calib/hist_index_add_full.raw.csv.gz", "indexFuncLargeIndex"),
        ("idioms/calib/hist_bincount_full.raw.csv.gz", "kernelHistogram1D"),
    ),
    # an LM head's GEMM with a vocabulary of 50,257 (cuBLAS falls back to CUTLASS sm75 align1
    # kernels) vs the same GEMM padded to 50,304 (nvjet wgmma), benchmarks/programs/gemm_shapes.py
    "NSD208": (
        ("programs/gemm_shapes.raw.csv.gz", "cutlass_75_tensorop_f16_s1688gemm_f16_128x128_tn"),
        ("programs/gemm_shapes.raw.csv.gz", "nvjet_sm90_hsh_192x192_64x3"),
    ),
}


def diagnosis(fixture: str) -> Diagnosis:
    """A fixture folder's raw export, a recorded file, or a session folder."""
    return recorded(
        f"{fixture}/raw.csv.gz" if (DATA / fixture / "raw.csv.gz").is_file() else fixture
    )


def kernel(fixture: str, fragment: str) -> KernelDiagnosis:
    matches = [k for k in diagnosis(fixture).kernels if fragment in k.name]
    assert len(matches) == 1, (fragment, [k.name for k in matches])
    return matches[0]


def kernels(fixture: str, fragment: str) -> list[KernelDiagnosis]:
    """Every signature of that name (one kernel may run with several grids)."""
    matches = [k for k in diagnosis(fixture).kernels if fragment in k.name]
    assert matches, fragment
    return matches


def fired(k: KernelDiagnosis) -> set[str]:
    return {f.rule for f in k.findings}


def test_every_kernel_rule_is_calibrated() -> None:
    kernel_rules = {r.id for r in load_rules() if r.scope == "kernel"}
    assert kernel_rules == set(CALIBRATION) | set(LIBRARY_CASES)


@pytest.mark.parametrize("rule", sorted(CALIBRATION))
def test_bad_fires_good_does_not(rule: str) -> None:
    fixture, bad, good = CALIBRATION[rule]
    assert rule in fired(kernel(fixture, bad + "(")), f"{bad} should fire {rule}"
    assert rule not in fired(kernel(fixture, good + "(")), f"{good} should not fire {rule}"


@pytest.mark.parametrize("rule", sorted(LIBRARY_CASES))
def test_library_kernels(rule: str) -> None:
    (bad_fixture, bad), (good_fixture, good) = LIBRARY_CASES[rule]
    assert all(rule in fired(k) for k in kernels(bad_fixture, bad))
    assert all(rule not in fired(k) for k in kernels(good_fixture, good))


# The finding an engineer would lead with, for each bad kernel.
FIRST_FINDING = {
    "dram_bandwidth_saturated_bad": "NSD101",
    "uncoalesced_global_access_bad": "NSD103",
    "shared_bank_conflicts_bad": "NSD104",
    "local_memory_spill_bad": "NSD105",
    "atomic_contention_bad": "NSD106",
    "memory_latency_bad": "NSD107",
    "compute_pipe_saturated_bad": "NSD201",
    "fp64_heavy_bad": "NSD202",
    "special_function_heavy_bad": "NSD203",
    "tensor_core_unused_bad": "NSD204",
    "warp_divergence_bad": "NSD205",
    "low_occupancy_bad": "NSD301",
    "tail_effect_bad": "NSD302",
    "small_grid_bad": "NSD303",
    "launch_overhead_bad": "NSD304",
    "barrier_stall_bad": "NSD305",
    "l2_bound_bad": "NSD102",
}


@pytest.mark.parametrize("name", sorted(FIRST_FINDING))
def test_first_finding_is_the_real_cause(name: str) -> None:
    k = kernel("calib", name + "(")
    assert k.findings and k.findings[0].rule == FIRST_FINDING[name], [f.rule for f in k.findings]


VERDICTS = {  # kernel -> (bound, limiter)
    "dram_bandwidth_saturated_bad": ("memory", "dram"),
    "compute_pipe_saturated_bad": ("compute", "fma"),
    "fp64_heavy_bad": ("compute", "fp64"),
    "special_function_heavy_bad": ("compute", "xu"),
    "memory_latency_bad": ("latency", "long_scoreboard"),
    "barrier_stall_bad": ("latency", "barrier"),
    "small_grid_bad": ("latency", "small_grid"),
    "l2_bound_bad": ("memory", "l2"),
    "shared_bank_conflicts_bad": ("memory", "shared"),
    "launch_overhead_bad": ("launch", "launch"),
}


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_verdicts(name: str) -> None:
    k = kernel("calib", name + "(")
    assert (k.bound, k.limiter) == VERDICTS[name]
