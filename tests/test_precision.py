"""Precision on unseen kernels (issue 13): each false positive or miss seen on a real program,
tested on the recording that shows it.

Recordings: tests/data/README.md (calib_extra/ holds the calibration cases added for these:
strided stores and a GEMM one tile over a full wave).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import nsdiag
from nsdiag.analysis.kernel import roofline, verdict
from nsdiag.analysis.kernel.derived import add_derived
from nsdiag.analysis.kernel.namespace import KernelFacts, kernel_values
from nsdiag.analysis.kernel.signatures import aggregate
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.records.findings import Finding
from nsdiag.analysis.rules.evaluate import evaluate_rule
from nsdiag.analysis.ruleset import find_rule, parse_rule
from nsdiag.model.tables import records
from tests.conftest import DATA
from tests.conftest import diagnosis as recorded

CALIB = "calib/raw.csv.gz"
CALIB_EXTRA = "calib_extra/raw.csv.gz"
TORCH = "torch_cases/raw.csv.gz"
TRAIN_LOADER = "programs/train_loader"
INFER_CNN = "programs/infer_cnn"
STEP_RANGE = "programs/step_range"
# Recordings of real programs in which every launch-bound kernel must be explained.
PROGRAMS = (
    TRAIN_LOADER,
    INFER_CNN,
    STEP_RANGE,
    "programs/elementwise",
    "programs/infer_cnn_cl_full",
    "programs/lm_train_full",
    "profile/layers8/session",
    "profile/full-0000.raw.csv.gz",
    "profile/full-0150.raw.csv.gz",
    TORCH,
    "reference/raw.csv.gz",
)


def diagnosis(path: str) -> Diagnosis:
    # every profiled kernel, warm-up launches included: these tests are about what each kernel's
    # counters say, whether or not it ran in the steady state
    return recorded(path, region="all")


def kernel(path: str, fragment: str, grid: str | None = None) -> KernelDiagnosis:
    matches = [k for k in diagnosis(path).kernels if fragment in k.name and grid in (None, k.grid)]
    assert len(matches) == 1, (fragment, grid, [(k.name, k.grid) for k in matches])
    return matches[0]


def finding(k: KernelDiagnosis, rule: str) -> Finding:
    found = [f for f in k.findings if f.rule == rule]
    assert found, f"{rule} should fire on {k.name} {k.grid}: {[f.rule for f in k.findings]}"
    return found[0]


def fired(k: KernelDiagnosis) -> set[str]:
    return {f.rule for f in k.findings}


def evidence(f: Finding) -> dict[str, float | None]:
    return {e.metric: e.value for e in f.evidence}


# ------------------------------------------------------------- no finding on zeros alone

NVJET_TMA = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"  # loads through TMA: 0 LSU sectors


def test_no_local_memory_finding_without_local_traffic() -> None:
    """Seen: local-memory-spill on cuBLAS GEMMs with 0 local sectors (0 >= 0.05 * 0)."""
    k = kernel(TORCH, NVJET_TMA)
    assert k.metrics["local_sectors"] == 0 and k.metrics["lsu_sectors"] == 0
    assert "NSD105" not in fired(k)
    assert "NSD105" in fired(kernel(CALIB, "local_memory_spill_bad("))


def _recorded_values(path: str, fragment: str) -> dict[str, object]:
    """What a kernel rule sees for one signature of a recording (its recorded row)."""
    session = nsdiag.load(DATA / path)
    signatures = aggregate(add_derived(session.kernels))
    total = float(signatures["total_duration_ns"].sum())
    (row,) = [r for r in records(signatures) if fragment in str(r["name"])]
    facts = KernelFacts(
        row, verdict.classify(row), roofline.position(row, None), row["total_duration_ns"] / total
    )
    return kernel_values(facts)


def test_a_rule_whose_evidence_is_all_zero_never_fires(tmp_path: Path) -> None:
    """The general guard, with the spill rule's old condition on the recorded nvjet row."""
    old = Path(find_rule("NSD105").path).read_text()
    old = old.replace(
        "condition = 'local_sectors > 0 and local_sectors >= 0.05 * lsu_sectors'",
        "condition = 'local_sectors >= 0.05 * lsu_sectors'",
    )
    assert "condition = 'local_sectors >= 0.05 * lsu_sectors'" in old
    path = tmp_path / "NSD105-old.toml"
    path.write_text(old)
    rule = parse_rule(path)
    values = _recorded_values(TORCH, NVJET_TMA)
    assert rule.condition is not None and rule.condition.holds(values) is True  # 0 >= 0
    assert evaluate_rule(rule, values) is None
    spill = _recorded_values(CALIB, "local_memory_spill_bad(")
    assert isinstance(evaluate_rule(rule, spill), Finding)


@pytest.mark.parametrize("path", PROGRAMS)
def test_no_finding_on_evidence_that_is_all_zero_or_missing(path: str) -> None:
    for k in diagnosis(path).kernels:
        for f in k.findings:
            values = [e.value for e in f.evidence]
            assert any(v not in (None, 0) for v in values), (k.name, f.rule, values)


# ------------------------------------------------------------- uncoalesced stores


def test_strided_stores_fire_uncoalesced_access_and_say_stores() -> None:
    """Calibration pair recorded for this: a stride-32 scatter of a coalesced read, 12.6x
    slower than its twin on the H200 (tests/data/logs/calib_extra.log)."""
    bad = finding(kernel(CALIB_EXTRA, "uncoalesced_global_store_bad("), "NSD103")
    assert "stores" in bad.message and "loads and stores" not in bad.message
    ev = evidence(bad)
    assert ev["global_store_bytes_per_sector"] == 4.0
    assert ev["global_store_sectors_per_request"] == 32.0
    assert ev["global_load_bytes_per_sector"] == 32.0
    # weighted by the stores' share of sectors (8 of 9): (1 - 4/32) * 8/9 * 44% busy
    assert bad.recoverable == pytest.approx(0.875 * 67108864 / 75497472 * 0.444, rel=0.02)
    assert "NSD103" not in fired(kernel(CALIB_EXTRA, "uncoalesced_global_store_good("))


def test_strided_loads_still_say_loads() -> None:
    f = finding(kernel(CALIB, "uncoalesced_global_access_bad("), "NSD103")
    assert "loads" in f.message and "stores" not in f.message.split(":")[0]
    assert "NSD103" not in fired(kernel(CALIB, "uncoalesced_global_access_good("))


def test_cudnn_layout_conversion_with_strided_stores() -> None:
    """cuDNN's nhwcToNchwKernel in a ResNet-18 training step writes 12 of every 32 bytes."""
    k = kernel(TRAIN_LOADER, "nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16", "(1, 16, 512)")
    f = finding(k, "NSD103")
    assert "stores" in f.message
    assert evidence(f)["global_store_bytes_per_sector"] == 12.0


def test_a_single_stored_sector_is_no_uncoalesced_access() -> None:
    """Convolutions that load through TMA store one flag sector with plain stores (4 of 32
    bytes); 1 sector of millions is no memory problem."""
    k = kernel(TORCH, "sm90_xmma_fprop_implicit_gemm")
    assert k.metrics["global_store_sectors"] == 1
    assert "NSD103" not in fired(k)


@pytest.mark.parametrize("path", PROGRAMS)
def test_the_side_named_is_the_side_that_fired(path: str) -> None:
    """The message's side (analysis/rules/namespace.py) and the rule's condition read the same
    constants."""
    for k in diagnosis(path).kernels:
        for f in k.findings:
            if f.rule == "NSD103":
                assert not f.message.startswith("Global accesses"), (k.name, f.message)


# ------------------------------------------------------------- waves from the grid


def test_a_tail_hidden_by_ncus_rounding() -> None:
    """A GEMM of 265 tiles at 2 blocks per SM on 132 SMs: 1.0038 waves, which ncu rounds to
    1.00; the extra tile runs alone (297 us against 182 us for 264 tiles)."""
    k = kernel(CALIB_EXTRA, "tail_effect_gemm_bad(")
    assert k.metrics["waves_per_sm"] == 1.0
    f = finding(k, "NSD302")
    ev = evidence(f)
    assert ev["waves"] == pytest.approx(265 / 264)
    assert ev["waves_per_sm"] == 1.0  # ncu's figure, kept as a cross-check
    assert f.recoverable == pytest.approx((2 - 265 / 264) / 2)
    assert "wave quantisation" in f.message.lower()
    assert "split-K" in f.fix
    assert "NSD302" not in fired(kernel(CALIB_EXTRA, "tail_effect_gemm_good("))


def test_a_plain_kernels_tail_is_a_tail_effect() -> None:
    f = finding(kernel(CALIB, "tail_effect_bad("), "NSD302")
    # the cause, tail-effect, heads the line; the message does not say it again (issue 41)
    assert f.cause == "tail-effect" and f.message.startswith("The grid fills")
    assert "quantisation" not in f.message.lower()
    assert evidence(f)["waves"] == pytest.approx(294 / 264)


def test_wave_quantisation_of_a_cudnn_convolution() -> None:
    """cuDNN's implicit-GEMM weight-gradient convolution in the ResNet-18 step: 624 tiles at 3
    per SM, 1.58 waves."""
    k = kernel(TRAIN_LOADER, "ImplicitGemmConvolution", "(4, 2, 78)")
    f = finding(k, "NSD302")
    assert "wave quantisation" in f.message.lower()
    assert evidence(f)["waves"] == pytest.approx(624 / (3 * 132))


def test_waves_fall_back_to_ncus_figure_without_occupancy_limits() -> None:
    import pandas as pd

    launches = pd.DataFrame(
        {
            "grid_size": [265.0, 265.0, 528.0],
            "sm_count": [132.0, 132.0, 132.0],
            "occupancy_limit_shared_mem": [2.0, math.nan, 2.0],
            "occupancy_limit_warps": [16.0, math.nan, 16.0],
            "waves_per_sm": [1.0, 1.0, 2.0],
        }
    )
    out = add_derived(launches)
    assert list(out["waves"]) == [pytest.approx(265 / 264), 1.0, 2.0]
    assert list(out["wave_tail"]) == [pytest.approx((2 - 265 / 264) / 2), 0.0, 0.0]


# ------------------------------------------------------------- launch-bound kernels


@pytest.mark.parametrize("path", PROGRAMS)
def test_every_launch_bound_kernel_has_a_finding_that_says_so(path: str) -> None:
    for k in diagnosis(path).kernels:
        if k.bound == "launch":
            assert "launch-overhead" in {f.cause for f in k.findings}, (k.name, k.launches)


def test_a_single_launch_that_is_launch_bound() -> None:
    """A training step's CUB scan initialisation: one 1.6 us launch, launch-bound (an ncu
    export alone: nothing tells how many times it ran beyond the profiled launch)."""
    k = kernel("profile/full-0150.raw.csv.gz", "DeviceScanInitKernel")
    assert (k.bound, k.launches) == ("launch", 1)
    f = next(f for f in k.findings if f.cause == "launch-overhead")
    assert f.saved_ns is None and f.estimate == "none"  # no estimate a kernel profile can defend
    assert "NSD406" in f.impact_basis


# ------------------------------------------------------------- small GEMMs


@pytest.mark.parametrize("grid", ["(8, 2, 1)", "(8, 8, 1)"])
def test_a_gemm_too_small_for_the_gpu(grid: str) -> None:
    """A 24-block MLP decode step at batch 16: cuBLAS runs each layer with a 64x8 tile on 16 or
    64 blocks, the tensor pipe under 1% busy; 72% of the step's GPU time."""
    k = kernel(STEP_RANGE, "nvjet_sm90_hsh_64x8_64x16", grid)
    f = finding(k, "NSD207")
    if grid == "(8, 2, 1)":  # 16 tiles, 44% of the step: its first finding
        assert k.findings[0].rule == "NSD207"
    assert f.recoverable == pytest.approx(1 - k.metrics["grid_size"] / 132)
    assert "64x8" in f.message
    assert "batch" in f.fix.lower() and "graph" in f.fix.lower()


@pytest.mark.parametrize(
    "path, fragment",
    [
        ("profile/layers8/session", "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN"),
        (TORCH, NVJET_TMA),
        ("reference/raw.csv.gz", "cutlass_80_simt_sgemm"),  # FP32 SIMT: no tensor cores
        (INFER_CNN, "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x64"),
    ],
)
def test_healthy_or_non_tensor_gemms_are_not_small_gemms(path: str, fragment: str) -> None:
    for k in diagnosis(path).kernels:
        if fragment in k.name:
            assert "NSD207" not in fired(k), (k.name, k.grid)


def test_matrix_kernels_are_known_by_their_name_facts() -> None:
    """`is_gemm_like` from kernel facts: cuBLAS nvjet GEMMs count; cuDNN's flash attention
    ('wgmma' in its name) and PyTorch's GammaBeta backward ('mma' in 'Gamma') do not."""
    from nsdiag.analysis.kernel.namespace import matrix_kernel

    assert matrix_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT")
    assert matrix_kernel("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc")
    assert matrix_kernel("matmul_kernel")  # a user's kernel: the name alone
    assert not matrix_kernel(
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64"
    )
    assert not matrix_kernel(
        "void at::<unnamed>::GammaBetaBackwardCUDAKernelTemplate<float, float, 32, 32, 256>"
    )


# ------------------------------------------------------------- the rules' documentation


@pytest.mark.parametrize("rule", ["NSD103", "NSD105", "NSD207", "NSD302", "NSD304", "NSD306"])
def test_changed_rules_print_their_documentation(rule: str) -> None:
    from click.testing import CliRunner

    from nsdiag.cli import main

    result = CliRunner().invoke(main, ["rules", "show", rule])
    assert result.exit_code == 0, result.output
    for heading in ("What it detects", "Why it is slow", "How to fix it", "False positives"):
        assert heading in result.output
    assert "References" in result.output and "fires when:" in result.output
