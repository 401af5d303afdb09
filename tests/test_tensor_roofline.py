"""Tensor-core roofs on real H200 recordings (tests/data, see its README): the per-precision
tensor-op counts nsdiag collects and reads, each kernel's place under the roof of the precision
it uses, and ncu's own figure for the same kernels as the check."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from nsdiag.analysis.kernel import roofline
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.records.jsonsafe import clean
from nsdiag.collect import metric_set
from nsdiag.model.canonical import canonical_metrics
from nsdiag.model.session import Session
from nsdiag.render import charts
from tests.conftest import DATA, diagnosed
from tests.test_cli import run
from tests.test_diagnosis import SCHEMA

GEMMS = "programs/gemm_shapes.raw.csv.gz"  # 12 GEMMs: nvjet wgmma and cutlass_75 align1
LM_TRAIN = "programs/lm_train_full"  # GPT training step, ncu's full set (session folder)
CNN = "programs/infer_cnn_cl_full"  # ResNet-50 fp16 channels_last inference, full set
TORCH = "torch_cases/raw.csv.gz"  # bf16 4096^3 matmul (nvjet) and an FP32 SIMT SGEMM
LAYERS8 = "profile/layers8/session"  # a targeted session: the rules' metrics by name
GROUPS = "profile/duration-groups/full-0000.raw.csv.gz"  # full set, GEMMs run with several K
_P = "sm__ops_path_tensor_"


def session(path: str) -> Session:
    return diagnosed(path, region="all")[0]


def diagnosis(path: str) -> Diagnosis:
    # every profiled kernel, warm-up launches included (the region would leave out the cuDNN
    # autotuning candidates that ran only in the first batches)
    return diagnosed(path, region="all")[1]


def tensor_kernels(path: str) -> list[KernelDiagnosis]:
    return [k for k in diagnosis(path).kernels if k.roofline.tensor_precision]


def ncu_figure(path: str, k: KernelDiagnosis, metric: str) -> float:
    """ncu's own value of `metric` for the signature's launches (duration-weighted mean)."""
    s = session(path)
    launches = s.kernels[
        (s.kernels["name"] == k.name)
        & (s.kernels["grid"].astype(str) == k.grid)
        & (s.kernels["block"].astype(str) == k.block)
    ].index
    weights = s.kernels.loc[launches, "duration_ns"]
    values = pd.to_numeric(s.raw.loc[launches, metric])
    return float((values * weights).sum() / weights.sum())


def ncu_dense_pct(path: str, k: KernelDiagnosis) -> float:
    """ncu's % of the dense tensor peak: its per-precision metric is measured against the sparse
    wgmma rate, twice the dense one (docs/tensor-roofs.md)."""
    src = {"fp16": "src_fp16", "bf16": "src_bf16_dst_fp32"}[str(k.roofline.tensor_precision)]
    return 2 * ncu_figure(path, k, f"{_P}{src}.sum.pct_of_peak_sustained_elapsed")


# ----------------------------------------------------------------- collected and read


def full_set_header() -> list[str]:
    with gzip.open(DATA / "reference" / "raw.csv.gz", "rt") as f:
        return next(iter(f)).strip().strip('"').split('","')


def test_profile_requests_one_sum_per_precision_on_the_h200() -> None:
    known = {metric_set.base_name(h) for h in full_set_header() if "__" in h}
    # `ncu --query-metrics` on the H200 also lists each path's total (no sparsity suffix)
    known |= {f"{_P}op_hgmma_src_fp16", f"{_P}op_hmma_src_fp16"}
    chosen = metric_set.rule_metrics(known)
    precisions = ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "int8", "fp64", "fp8_sparsity_off")
    sums = {f"{_P}src_{p}.sum" for p in (*precisions, "fp8_sparsity_on")}
    assert sums <= set(chosen)
    tensor_ops = [m for m in chosen if m.startswith(_P)]
    # the dense per-instruction paths (wgmma vs legacy mma.sync), never a path's total or its
    # sparse half: requesting a total and its parts counted every operation twice
    paths = [m for m in tensor_ops if m not in sums]
    assert paths and all(m.endswith("_sparsity_off.sum") for m in paths)
    assert len(tensor_ops) == 16  # 20 per-instruction paths before


def test_ampere_names_request_both_accumulators() -> None:
    known = {f"{_P}src_fp16_dst_fp16", f"{_P}src_fp16_dst_fp32", f"{_P}src_bf16_dst_fp32"}
    chosen = metric_set.rule_metrics(known)
    assert {f"{_P}src_fp16_dst_fp16.sum", f"{_P}src_fp16_dst_fp32.sum"} <= set(chosen)


def test_a_precision_adds_up_one_group_only() -> None:
    raw = pd.DataFrame(
        {
            f"{_P}src_fp16.sum": [10.0, None],
            f"{_P}op_hgmma_src_fp16_sparsity_off.sum": [6.0, 6.0],
            f"{_P}op_hmma_src_fp16_dst_fp32_sparsity_off.sum": [4.0, 1.0],
            f"{_P}src_fp8_sparsity_off.sum": [3.0, 0.0],
            f"{_P}src_fp8_sparsity_on.sum": [2.0, None],
        }
    )
    table = canonical_metrics(raw)
    assert list(table["tensor_ops_fp16"]) == [10.0, 7.0]  # the aggregate; else the paths
    assert list(table["tensor_ops_fp8"]) == [5.0, 0.0]  # dense + sparse
    assert list(table["tensor_ops_mma_sync"]) == [4.0, 1.0]


def test_a_session_saved_before_reads_the_counts_from_its_raw_table() -> None:
    s = session(LM_TRAIN)  # saved without the per-precision columns
    raw = pd.to_numeric(s.raw[f"{_P}src_fp16.sum"])
    assert (s.kernels["tensor_ops_fp16"] == raw).all() and raw.max() > 3e11


def test_targeted_sessions_count_tensor_work_once() -> None:
    """layers8 was recorded with the old request list, which asked for each path's total and
    its sparsity halves: its stored `tensor_ops` is twice the work. The per-precision count
    comes from the dense and sparse halves only."""
    s = session(LAYERS8)
    gemm = s.kernels[s.kernels["name"].str.startswith("nvjet_sm90_tst_256x128")].iloc[0]
    bf16 = float(gemm["tensor_ops_bf16"])
    assert bf16 == float(s.raw.loc[gemm.name, f"{_P}op_hgmma_src_bf16_dst_fp32.sum"]) > 1e10
    assert gemm["tensor_ops"] == 2 * bf16  # the old double count
    k = next(k for k in diagnosis(LAYERS8).kernels if k.name == gemm["name"])
    assert k.roofline.tensor_flops["bf16"] == pytest.approx(k.metrics["flop_tensor"])


# --------------------------------------------------------------- against the tensor roof


@pytest.mark.parametrize("path", [GEMMS, LM_TRAIN, CNN, TORCH, LAYERS8, GROUPS])
def test_every_tensor_kernel_sits_under_its_roof(path: str) -> None:
    kernels = tensor_kernels(path)
    assert kernels
    for k in kernels:
        r = k.roofline
        assert r.precision == "tensor" and r.tensor_precision in ("fp16", "bf16"), k.name
        assert 0 < r.pct_of_tensor_roof <= 100 and r.pct_of_roof <= 100, k.name
        assert r.side in ("memory", "compute")
        assert r.achieved_tensor_flops_per_s <= r.tensor_peak_flops_per_s == r.peaks.tensor_flops


@pytest.mark.parametrize("path", [GEMMS, LM_TRAIN, CNN, TORCH, GROUPS])
def test_percent_of_the_tensor_roof_is_ncus_own(path: str) -> None:
    for k in tensor_kernels(path):
        assert k.roofline.pct_of_tensor_roof == pytest.approx(ncu_dense_pct(path, k), abs=0.05)


def test_a_gemm_run_with_several_k_is_at_its_time_weighted_share() -> None:
    """One nvjet signature launched with five different K under one grid (45-92% of the roof
    per launch in ncu): its mean operations over its mean duration would read 255%."""
    (k,) = [k for k in tensor_kernels(GROUPS) if k.name.endswith("coopB_NNT")]
    assert k.launches == 5
    assert k.roofline.pct_of_roof == pytest.approx(86.6, abs=0.05)
    assert k.roofline.achieved_tensor_flops_per_s < k.roofline.tensor_peak_flops_per_s


def test_big_gemms_at_their_measured_share_of_the_roof() -> None:
    """The nvjet (wgmma) GEMMs at 83-96% of the dense roof, ncu's figure for the dense wgmma
    path; the cutlass_75 fallbacks (legacy mma.sync) at 9-15%, two thirds of ncu's figure for
    the mma.sync path, whose peak is two thirds of the roof."""
    measured = {}
    for k in tensor_kernels(GEMMS):
        r = k.roofline
        src = "fp16" if r.tensor_precision == "fp16" else "bf16_dst_fp32"
        if k.name.startswith("nvjet"):
            path_pct = ncu_figure(
                GEMMS, k, f"{_P}op_hgmma_src_{src}_sparsity_off.sum.pct_of_peak_sustained_elapsed"
            )
            assert 82 < r.pct_of_roof == pytest.approx(path_pct, abs=0.02)
            assert r.side == "compute" and not r.note
        else:
            hmma = "fp16_dst_fp32" if src == "fp16" else src
            path_pct = ncu_figure(
                GEMMS, k, f"{_P}op_hmma_src_{hmma}_sparsity_off.sum.pct_of_peak_sustained_elapsed"
            )
            assert r.pct_of_roof == pytest.approx(path_pct * 2 / 3, abs=0.02)
            assert 8 < r.pct_of_roof < 16 and "mma.sync" in r.note
        measured[k.name[:48]] = round(r.pct_of_roof, 1)
    assert sorted(v for n, v in measured.items() if n.startswith("nvjet")) == [
        82.6,
        82.6,
        93.6,
        93.7,
        95.6,
        95.6,
    ]


def test_cudnn_convolutions_get_a_tensor_roof() -> None:
    convs = [
        k
        for k in diagnosis(CNN).kernels
        if "fprop" in k.name and ("xmma" in k.name or "cutlass" in k.name)
    ]
    assert len(convs) >= 20
    for k in convs:
        r = k.roofline
        assert r.roof == "fp16 tensor" and math.isfinite(r.pct_of_roof), k.name
        assert 900e12 < r.tensor_peak_flops_per_s < 1000e12  # 4096 x 132 x ~1.75 GHz


def test_the_bf16_matmul_and_the_simt_sgemm() -> None:
    def named(prefix: str) -> KernelDiagnosis:
        return next(k for k in diagnosis(TORCH).kernels if k.name.startswith(prefix))

    bf16 = named("nvjet_sm90_tst_256x128").roofline
    assert (bf16.roof, bf16.side) == ("bf16 tensor", "compute")
    assert bf16.pct_of_roof == pytest.approx(90.3, abs=0.05)
    sgemm = named("sm80_xmma_gemm_f32f32")
    r = sgemm.roofline
    assert (r.precision, r.roof, r.tensor_precision) == ("fp32", "fp32", None)
    assert r.pct_of_roof == pytest.approx(100 * r.achieved_flops_per_s / r.peaks.fp32_flops)
    assert 70 < r.pct_of_roof < 80 and (sgemm.bound, sgemm.limiter) == ("compute", "fma")


def test_the_json_carries_the_tensor_roof(data_dir: Path) -> None:
    result = run("explain", str(data_dir / GEMMS), "--kernel", "hsh_192x192_64x3", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    (kernel,) = document["kernels"]
    r = kernel["roofline"]
    assert (kernel["bound"], kernel["limiter"]) == ("compute", "tensor")
    assert (r["precision"], r["tensor_precision"], r["roof"], r["side"]) == (
        "tensor",
        "fp16",
        "fp16 tensor",
        "compute",
    )
    assert r["pct_of_roof"] == pytest.approx(95.57, abs=0.01) == r["pct_of_tensor_roof"]
    assert r["tensor_peak_flops_per_s"] == r["peaks"]["tensor_flops"] == pytest.approx(807e12, 1e-3)
    assert r["achieved_tensor_flops_per_s"] == pytest.approx(771.2e12, 1e-3)
    assert r["tensor_flops"]["fp16"] > 0 and r["tensor_flops"]["bf16"] == 0


# ---------------------------------------------------------------------- unknown: no number


def _tensor_values(**overrides: object) -> dict[str, object]:
    values: dict[str, object] = {
        "name": "my_mma_kernel",
        "cc": "9.0",
        "sm_count": 132.0,
        "sm_cycles_per_second": 1.5e9,
        "duration_ns": 1e6,
        "flop_tensor_bf16": 4096 * 132 * 1.5e9 * 1e-3 / 2,  # half the roof for 1 ms
        "flop_tensor": 4096 * 132 * 1.5e9 * 1e-3 / 2,
        "dram_read_bytes": 1e8,
        "dram_write_bytes": 0.0,
        "dram_bytes_peak_per_cycle": 8192.0,
        "dram_frequency_hz": 2.6e9,
    }
    values.update(overrides)
    return values


def test_a_known_roof_from_the_table_and_the_kernels_clock() -> None:
    r = roofline.position(_tensor_values())
    assert r.tensor_peak_flops_per_s == 4096 * 132 * 1.5e9
    assert (r.pct_of_roof, r.side, r.roof) == (pytest.approx(50.0), "compute", "bf16 tensor")


@pytest.mark.parametrize(
    "overrides, says",
    [
        ({"cc": "7.5"}, "compute capability 7.5"),
        ({"cc": "", "device_compute_capability_major": 12.0}, "compute capability 12.0"),
        ({"cc": None}, "does not say the GPU's compute capability"),
        ({"sm_cycles_per_second": None}, "SM clock"),
        ({"flop_tensor_bf16": 0.0, "flop_tensor_fp64": 1e9, "cc": "8.6"}, "no dense fp64"),
    ],
)
def test_an_unknown_roof_gives_no_number(overrides: dict[str, object], says: str) -> None:
    r = roofline.position(_tensor_values(**overrides))
    assert r.precision == "tensor" and math.isnan(r.pct_of_roof) and says in r.note
    assert math.isnan(r.tensor_peak_flops_per_s) and r.side == ""
    kernel = {"roofline": clean(r.to_json())}
    assert kernel["roofline"]["side"] is None and kernel["roofline"]["pct_of_roof"] is None
    roofline_schema = SCHEMA["$defs"]["kernel"]["properties"]["roofline"]
    jsonschema.validate(kernel["roofline"], roofline_schema)


def test_tensor_work_of_unknown_precision_is_said_so() -> None:
    """Tensor operations counted only as a total (no per-precision counts in the report)."""
    values = _tensor_values(flop_tensor_bf16=None, flop_tensor=1e12, flop_fp32=1e6)
    r = roofline.position(values)
    assert (r.precision, r.tensor_precision) == ("tensor", None)
    assert math.isnan(r.pct_of_roof) and "precision" in r.note


def test_a_name_that_says_tensor_cores_without_counters() -> None:
    name = "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_256x128_32x3_nn_align8>"
    values = _tensor_values(name=name, flop_tensor_bf16=None, flop_tensor=None, flop_fp32=1e9)
    r = roofline.position(values)
    assert r.precision == "tensor" and math.isnan(r.pct_of_roof)
    assert "its name says tensor cores" in r.note


# ----------------------------------------------------------------------------- the chart


@pytest.mark.parametrize(
    "path, precisions",
    [
        (GEMMS, {"FP16", "BF16"}),
        (LM_TRAIN, {"FP16"}),
        (TORCH, {"FP16", "BF16"}),
        (GROUPS, {"BF16"}),
    ],
)
def test_the_chart_draws_each_precisions_roof_above_its_kernels(
    path: str, precisions: set[str]
) -> None:
    d = diagnosis(path)
    fig = charts.roofline(d, {})
    assert fig is not None
    roofs = {t.name: t.y[0] for t in fig.data if t.mode == "lines"}
    tensor = {n.split()[0]: y for n, y in roofs.items() if "tensor peak" in n}
    assert set(tensor) == precisions
    assert {"FP32", "FP64", "FP16"} <= {n.split()[0] for n in roofs if n.endswith("FLOP/s")}
    for k in d.kernels:
        r = k.roofline
        if r.tensor_precision and charts.on_roofline(k):
            assert charts.point_flops(k) == r.achieved_tensor_flops_per_s
            assert charts.point_flops(k) <= tensor[r.tensor_precision.upper()], k.name
