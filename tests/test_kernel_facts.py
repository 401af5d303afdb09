"""Kernel names as facts: recorded names from the H200, checked against what the names state
(naming sources in docs/kernel-names.md) and against what ncu measured for the same kernels."""

from __future__ import annotations

import json
import math
import signal
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsdiag.model.kernel_facts import (
    EMPTY,
    Alignment,
    KernelFacts,
    Precision,
    describe,
    fallback_reasons,
    parse_kernel_name,
)

DATA = Path(__file__).parent / "data"
NAMES = (DATA / "kernel_names.txt").read_text().splitlines()


def _name(prefix: str, *parts: str) -> str:
    """The one recorded name that starts with `prefix` and contains `parts` (so every case is a
    real name, and long names need not be spelled out)."""
    found = [n for n in NAMES if n.startswith(prefix) and all(p in n for p in parts)]
    assert len(found) == 1, (prefix, parts, len(found))
    return found[0]


Selector = str | tuple[str, ...]


def _select(key: Selector) -> str:
    return _name(key) if isinstance(key, str) else _name(*key)


# (a recorded name: its prefix, or its prefix and parts it contains; the exact facts)
CASES = [
    (
        "void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_tn_align1>",
        KernelFacts(
            library="cutlass",
            scheme="cutlass",
            kind="gemm",
            arch=75,
            tile=(256, 128),
            layout="tn",
            operand_layouts=(("A", "row-major"), ("B", "column-major")),
            precision=Precision(
                "f16_s1688gemm_f16", inputs="fp16", accumulate="fp32", output="fp16"
            ),
            tensor_core=True,
            instruction_shape="16x8x8",
            alignment=Alignment((("ab", 1),)),
        ),
    ),
    (
        "void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_nt_align1>",
        KernelFacts(
            library="cutlass",
            scheme="cutlass",
            kind="gemm",
            arch=75,
            tile=(256, 128),
            layout="nt",
            operand_layouts=(("A", "column-major"), ("B", "row-major")),
            precision=Precision(
                "f16_s1688gemm_f16", inputs="fp16", accumulate="fp32", output="fp16"
            ),
            tensor_core=True,
            instruction_shape="16x8x8",
            alignment=Alignment((("ab", 1),)),
        ),
    ),
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_256x128_32x3_nn_align2>",
        KernelFacts(
            library="cutlass",
            scheme="cutlass",
            kind="gemm",
            arch=80,
            tile=(256, 128, 32),
            stages=3,
            layout="nn",
            operand_layouts=(("A", "column-major"), ("B", "column-major")),
            precision=Precision(
                "f16_s16816gemm_f16", inputs="fp16", accumulate="fp32", output="fp16"
            ),
            tensor_core=True,
            instruction_shape="16x8x16",
            alignment=Alignment((("ab", 2),)),
        ),
    ),
    (
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>",
        KernelFacts(
            library="cutlass",
            scheme="cutlass",
            kind="gemm",
            arch=80,
            tile=(128, 32, 8),
            stages=5,
            layout="nn",
            operand_layouts=(("A", "column-major"), ("B", "column-major")),
            precision=Precision("sgemm", inputs="fp32", accumulate="fp32", output="fp32"),
            tensor_core=False,
            alignment=Alignment((("ab", 1),)),
        ),
    ),
    (
        "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT",
        KernelFacts(
            library="cublas",
            scheme="nvjet",
            kind="gemm",
            arch=90,
            tile=(256, 128, 64),
            cluster=(1, 2),
            stages=4,
            layout="NNT",
            precision=Precision("hsh", inputs="fp16", accumulate="fp32", output="fp16"),
            tensor_core=True,
            raw_tokens=("h", "bz", "coopA"),
        ),
    ),
    (
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
        KernelFacts(
            library="cublas",
            scheme="nvjet",
            kind="gemm",
            arch=90,
            tile=(256, 128, 64),
            cluster=(1, 2),
            stages=4,
            layout="TNT",
            precision=Precision("tst", inputs="bf16", accumulate="fp32", output="bf16"),
            tensor_core=True,
            epilogue=("bias",),
            raw_tokens=("h", "bz", "coopA"),
        ),
    ),
    (
        "nvjet_sm90_hsh_128x256_64x4_1x2_h_ssched_bz_coopA_TNN",
        KernelFacts(
            library="cublas",
            scheme="nvjet",
            kind="gemm",
            arch=90,
            tile=(128, 256, 64),
            cluster=(1, 2),
            stages=4,
            layout="TNN",
            precision=Precision("hsh", inputs="fp16", accumulate="fp32", output="fp16"),
            tensor_core=True,
            raw_tokens=("h", "ssched", "bz", "coopA"),
        ),
    ),
    (
        "nvjet_sm90_tst_8x64_64x16_2x1_v_bz_bias_TNN",
        KernelFacts(
            library="cublas",
            scheme="nvjet",
            kind="gemm",
            arch=90,
            tile=(8, 64, 64),
            cluster=(2, 1),
            stages=16,
            layout="TNN",
            precision=Precision("tst", inputs="bf16", accumulate="fp32", output="bf16"),
            tensor_core=True,
            epilogue=("bias",),
            raw_tokens=("v", "bz"),
        ),
    ),
    (
        ("sm80_xmma_fprop_implicit_gemm_indexed_wo_smem", "tilesize128x16x32", "alignc8"),
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-fprop",
            op="fprop_implicit_gemm_indexed_wo_smem",
            arch=80,
            tile=(128, 16, 32),
            stages=1,
            warps=(4, 1, 1),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("f16f16_f16f32_f32", inputs="fp16"),
            tensor_core=True,
            instruction_shape="16x8x16",
            alignment=Alignment((("a", 2), ("c", 8))),
            raw_tokens=("g1", "5x"),
        ),
    ),
    (
        ("sm80_xmma_fprop_implicit_gemm_indexed_wo_smem", "tilesize128x32x16", "alignc4"),
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-fprop",
            op="fprop_implicit_gemm_indexed_wo_smem",
            arch=80,
            tile=(128, 32, 16),
            stages=1,
            warps=(4, 1, 1),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("f16f16_f16f32_f32", inputs="fp16"),
            tensor_core=True,
            instruction_shape="16x8x16",
            alignment=Alignment((("a", 2), ("c", 4))),
            raw_tokens=("g1", "5x"),
        ),
    ),
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8",
        KernelFacts(
            library="cublas",
            scheme="xmma",
            kind="gemm",
            op="gemm",
            arch=80,
            tile=(256, 128, 8),
            stages=3,
            warps=(4, 2, 1),
            layout="nn_n",
            precision=Precision("f32f32_f32f32_f32", inputs="fp32"),
            tensor_core=False,
            alignment=Alignment((("a", 4), ("c", 4))),
            raw_tokens=("5x",),
        ),
    ),
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x32x8",
        KernelFacts(
            library="cublas",
            scheme="xmma",
            kind="gemm",
            op="gemm",
            arch=80,
            tile=(64, 32, 8),
            stages=3,
            warps=(1, 2, 1),
            layout="nn_n",
            precision=Precision("f32f32_f32f32_f32", inputs="fp32"),
            tensor_core=False,
            alignment=Alignment((("a", 4), ("c", 4))),
            raw_tokens=("5x",),
        ),
    ),
    (
        "sm80_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x32x32",
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-dgrad",
            op="dgrad_implicit_gemm",
            arch=80,
            tile=(128, 32, 32),
            stages=4,
            warps=(4, 1, 1),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("bf16bf16_bf16f32_f32", inputs="bf16"),
            tensor_core=True,
            instruction_shape="16x8x16",
            raw_tokens=("g1", "5x"),
        ),
    ),
    (
        ("sm80_xmma_wgrad_implicit_gemm_indexed", "tilesize64x32x64", "execute_split_k"),
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-wgrad",
            op="wgrad_implicit_gemm_indexed",
            arch=80,
            tile=(64, 32, 64),
            stages=5,
            warps=(2, 2, 1),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("bf16bf16_bf16f32_f32", inputs="bf16"),
            tensor_core=True,
            instruction_shape="16x8x16",
            split_k="split_k",
            raw_tokens=("g1", "5x"),
        ),
    ),
    (
        ("sm90_xmma_fprop_implicit_gemm_f16", "tilesize128x128x32", "segment_k_on"),
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-fprop",
            op="fprop_implicit_gemm",
            arch=90,
            tile=(128, 128, 32),
            warpgroups=(1, 1, 1),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("f16f16_f16f32_f32", inputs="fp16"),
            tensor_core=True,
            raw_tokens=("g1", "segment", "k", "on", "5x"),
        ),
    ),
    (
        ("sm90_xmma_wgrad_indexed_implicit_gemm", "tilesize128x128x64", "execute_split_k"),
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-wgrad",
            op="wgrad_indexed_implicit_gemm",
            arch=90,
            tile=(128, 128, 64),
            warpgroups=(1, 1, 1),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("bf16bf16_bf16f32_f32", inputs="bf16"),
            tensor_core=True,
            split_k="split_k",
            raw_tokens=("g1", "5x"),
        ),
    ),
    (
        ("sm90_xmma_dgrad_implicit_gemm_indexed", "tilesize256x128x32", "strided"),
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-dgrad",
            op="dgrad_implicit_gemm_indexed",
            arch=90,
            tile=(256, 128, 32),
            warpgroups=(2, 1, 1),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("bf16bf16_bf16f32_f32", inputs="bf16"),
            tensor_core=True,
            raw_tokens=("g1", "strided", "5x"),
        ),
    ),
    (
        "sm90_xmma_fprop_image_first_layer",
        KernelFacts(
            library="cudnn",
            scheme="xmma",
            kind="conv-fprop",
            op="fprop_image_first_layer",
            arch=90,
            tile=(16, 64, 64),
            layout="nhwckrsc_nhwc",
            memory_layout="nhwc",
            precision=Precision("f16f16_f32_f16", inputs="fp16"),
            tensor_core=True,
            instruction_shape="16x8x8",
            raw_tokens=("k64c4r7s7", "stride2x2", "5x"),
        ),
    ),
    (
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
        KernelFacts(
            library="cudnn",
            scheme="cudnn-generated",
            kind="attention",
            op="sdpa_flash_fprop",
            arch=90,
            tile=(64, 128, 64),
            cluster=(1, 1, 1),
            precision=Precision("f16"),
            tensor_core=True,
            raw_tokens=("fort", "native", "knob", "7", "4x1x1", "kernel0", "0"),
        ),
    ),
    (
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop",
        KernelFacts(
            library="cudnn",
            scheme="cudnn-generated",
            kind="attention",
            op="sdpa_flash_bprop",
            arch=90,
            tile=(64, 64, 64),
            cluster=(1, 1, 1),
            precision=Precision("f16"),
            tensor_core=True,
            raw_tokens=("fort", "native", "knob", "26", "1x4x1", "kernel0", "0"),
        ),
    ),
    (
        ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop", "bf16_128x128"),
        KernelFacts(
            library="cudnn",
            scheme="cutlass",
            kind="conv-fprop",
            op="optimized",
            tile=(128, 128, 32),
            stages=5,
            layout="nhwc",
            memory_layout="nhwc",
            precision=Precision(
                "bf16_s16816fprop_optimized_bf16", inputs="bf16", accumulate="fp32", output="bf16"
            ),
            tensor_core=True,
            instruction_shape="16x8x16",
            alignment=Alignment((("a", 8),)),
        ),
    ),
    (
        ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816dgrad", "unity_stride"),
        KernelFacts(
            library="cudnn",
            scheme="cutlass",
            kind="conv-dgrad",
            op="optimized_unity_stride",
            tile=(256, 64, 32),
            stages=4,
            layout="nhwc",
            memory_layout="nhwc",
            precision=Precision(
                "bf16_s16816dgrad_optimized_bf16", inputs="bf16", accumulate="fp32", output="bf16"
            ),
            tensor_core=True,
            instruction_shape="16x8x16",
            alignment=Alignment((("a", 8),)),
        ),
    ),
    (
        ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32",),
        KernelFacts(
            library="cudnn",
            scheme="cutlass",
            kind="conv-fprop",
            op="optimized",
            tile=(256, 64, 16),
            stages=4,
            layout="nhwc",
            memory_layout="nhwc",
            precision=Precision(
                "s1688fprop_optimized_tf32", inputs="tf32", accumulate="fp32", output="fp32"
            ),
            tensor_core=True,
            instruction_shape="16x8x8",
            alignment=Alignment((("a", 4),)),
        ),
    ),
    (
        (
            "void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemm",
            "GemmShape<(int)128, (int)128, (int)32>",
        ),
        KernelFacts(
            library="cudnn",
            scheme="cutlass-template",
            kind="conv-wgrad",
            op="ImplicitGemmConvolution",
            tile=(128, 128, 32),
            stages=4,
            precision=Precision("bfloat16_t", inputs="bf16", accumulate="fp32", output="fp32"),
            tensor_core=True,
            instruction_shape="16x8x16",
            alignment=Alignment((("a", 8), ("b", 8))),
        ),
    ),
    (
        "void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::reduction::kernel::ReduceSplitK<",
        KernelFacts(
            library="cudnn",
            scheme="cutlass-template",
            kind="reduction",
            op="ReduceSplitK",
            split_k="ReduceSplitK",
        ),
    ),
    (
        "void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half,",
        KernelFacts(
            library="cudnn", scheme="cudnn", kind="layout-conversion", op="nchwToNhwcKernel"
        ),
    ),
    (
        "void cudnn::nhwcToNchwKernel<__half, __half, float, 1, 0, 0>",
        KernelFacts(
            library="cudnn", scheme="cudnn", kind="layout-conversion", op="nhwcToNchwKernel"
        ),
    ),
    (
        "void nhwcAddPaddingKernel<__half, __half,",
        KernelFacts(
            library="cudnn",
            scheme="cudnn",
            kind="padding",
            op="nhwcAddPaddingKernel",
            memory_layout="nhwc",
        ),
    ),
    (
        "void cudnn::fusion::compute_dot_do_o_specialized<(bool)0,",
        KernelFacts(library="cudnn", scheme="cudnn", op="compute_dot_do_o_specialized"),
    ),
    (
        "void cublasLt::splitKreduce_kernel<",
        KernelFacts(
            library="cublaslt",
            scheme="cublaslt",
            kind="reduction",
            op="splitKreduce_kernel",
            split_k="splitKreduce",
        ),
    ),
    (
        "void implicit_convolve_sgemm<__half, __half, (int)128, (int)5,",
        KernelFacts(
            scheme="cudnn-legacy", kind="conv", op="implicit_convolve_sgemm", tensor_core=False
        ),
    ),
    (
        "triton_poi_fused_add_mul_0",
        KernelFacts(library="triton", scheme="inductor", kind="elementwise", op="fused_add_mul"),
    ),
    (
        "void at::native::batch_norm_transform_input_channels_last_kernel<",
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="normalization",
            op="batch_norm_transform_input_channels_last_kernel",
            memory_layout="channels_last",
        ),
    ),
    (
        "void at::native::batch_norm_collect_statistics_kernel<",
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="normalization",
            op="batch_norm_collect_statistics_kernel",
        ),
    ),
    (
        ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::AUnaryFunctor",),
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="MulFunctor",
            scalar_operand=True,
        ),
    ),
    (
        ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor",),
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="MulFunctor",
            scalar_operand=False,
        ),
    ),
    (
        ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctorOnSelf",),
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="CUDAFunctorOnSelf_add",
            scalar_operand=True,
        ),
    ),
    (
        "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>",
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="CUDAFunctor_add",
            scalar_operand=False,
        ),
    ),
    (
        (
            "void at::native::vectorized_elementwise_kernel<(int)8, at::native::<unnamed>::launch",
            "[lambda(c10::Half)",
        ),
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="launch_clamp_scalar",
            scalar_operand=True,
        ),
    ),
    (
        ("void at::native::elementwise_kernel<(int)128, (int)4, void", "direct_copy_kernel_cuda"),
        KernelFacts(library="pytorch", scheme="aten", kind="copy", op="direct_copy_kernel_cuda"),
    ),
    (
        ("void at::native::elementwise_kernel<(int)128, (int)4, void", "BUnaryFunctor"),
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="MulFunctor",
            scalar_operand=True,
        ),
    ),
    (
        (
            "void at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluCUDAKernelImp",
            "[lambda(c10::BFloat16)",
        ),
        KernelFacts(library="pytorch", scheme="aten", kind="elementwise", op="GeluCUDAKernelImpl"),
    ),
    (
        ("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<c10::BFloat16",),
        KernelFacts(library="pytorch", scheme="aten", kind="reduction", op="MeanOps"),
    ),
    (
        "void <unnamed>::softmax_warp_forward<",
        KernelFacts(library="pytorch", scheme="aten", kind="softmax", op="softmax_warp_forward"),
    ),
    (
        "void at::native::<unnamed>::cunn_SoftMaxForward<",
        KernelFacts(
            library="pytorch", scheme="aten", kind="softmax", op="cunn_SoftMaxForward (log_softmax)"
        ),
    ),
    (
        "void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::Half,",
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="normalization",
            op="vectorized_layer_norm_kernel",
        ),
    ),
    (
        "void at::native::<unnamed>::max_pool_forward_nhwc<",
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="pooling",
            op="max_pool_forward_nhwc",
            memory_layout="nhwc",
        ),
    ),
    (
        (
            "void at::native::<unnamed>::multi_tensor_apply_kernel",
            "BinaryOpScalarFunctor<",
            "std::multiplies",
        ),
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="BinaryOpScalarFunctor(std::multiplies)",
            scalar_operand=True,
        ),
    ),
    (
        "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<",
        KernelFacts(
            library="pytorch", scheme="aten", kind="copy", op="CatArrayBatchedCopy_vectorized"
        ),
    ),
    (
        "void <unnamed>::elementwise_kernel_with_index<int, at::native::arange_cuda_out",
        KernelFacts(library="pytorch", scheme="aten", kind="elementwise", op="arange_cuda_out"),
    ),
    (
        "void at_cuda_detail::cub::detail::radix_sort::DeviceRadixSortOnesweepKernel<",
        KernelFacts(library="cub", scheme="cub", kind="sort", op="DeviceRadixSortOnesweepKernel"),
    ),
    (
        "void radix_sort::DeviceRadixSortExclusiveSumKernel<",
        KernelFacts(
            library="cub", scheme="cub", kind="sort", op="DeviceRadixSortExclusiveSumKernel"
        ),
    ),
    (
        ("void vectorized_elementwise_kernel<4, AUnaryFunctor",),
        KernelFacts(
            library="pytorch",
            scheme="aten",
            kind="elementwise",
            op="MulFunctor",
            scalar_operand=True,
        ),
    ),
    (
        "tensor_core_unused_bad(",
        KernelFacts(),
    ),
    (
        "nsdiag::float4_kernel(",
        KernelFacts(),
    ),
]


@pytest.mark.parametrize("key, expected", CASES, ids=[str(c[0])[:70] for c in CASES])
def test_recorded_name_gives_exact_facts(key: Selector, expected: KernelFacts) -> None:
    assert parse_kernel_name(_select(key)) == expected


def test_the_cases_cover_every_library_and_at_least_forty_names() -> None:
    assert len(CASES) >= 40
    libraries = {facts.library for _, facts in CASES}
    assert {"cublas", "cublaslt", "cutlass", "cudnn", "triton", "pytorch", "cub"} <= libraries


def test_names_file_is_the_recorded_list() -> None:
    assert len(NAMES) == len(set(NAMES)) >= 380
    assert all(n and n == n.strip() for n in NAMES)
    parsed = [parse_kernel_name(n) for n in NAMES]
    assert sum(f.library is not None for f in parsed) >= 330
    assert {f.scheme for f in parsed} >= {"nvjet", "xmma", "cutlass", "cudnn-generated", "aten"}


def test_kernels_of_our_own_programs_state_nothing() -> None:
    for name in NAMES:
        if name.split("(")[0].endswith(("_bad", "_good")) or name.startswith("nsdiag::"):
            assert parse_kernel_name(name) == EMPTY, name


def test_batch_norm_channels_last_is_normalization_not_a_layout_conversion() -> None:
    facts = parse_kernel_name(_name("void at::native::batch_norm_transform_input_channels_last_"))
    assert (facts.kind, facts.memory_layout) == ("normalization", "channels_last")
    conversions = {n for n in NAMES if parse_kernel_name(n).kind == "layout-conversion"}
    assert conversions and all("nchwToNhwc" in n or "nhwcToNchw" in n for n in conversions)


def test_fallback_reasons_of_the_turing_kernel_on_hopper() -> None:
    facts = parse_kernel_name(
        _name("void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_tn")
    )
    assert fallback_reasons(facts, 90) == [
        "built for sm_75, older than this sm_90 GPU",
        "aligned to A/B 1 element(s); fp16 needs 8",
    ]
    assert fallback_reasons(facts, 75) == ["aligned to A/B 1 element(s); fp16 needs 8"]


@pytest.mark.parametrize(
    "key, cc, reasons",
    [
        ("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", 90, []),
        (
            "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT",
            100,
            ["built for sm_90, older than this sm_100 GPU"],
        ),
        (
            ("sm80_xmma_fprop_implicit_gemm_indexed_wo_smem", "tilesize128x32x16", "alignc4"),
            90,
            [
                "built for sm_80, older than this sm_90 GPU",
                "aligned to A 2, C 4 element(s); fp16 needs 8",
            ],
        ),
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8",
            90,
            ["built for sm_80, older than this sm_90 GPU"],
        ),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8", 89, []),  # Ada runs sm_80 code
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>",
            90,
            [
                "built for sm_80, older than this sm_90 GPU",
                "aligned to A/B 1 element(s); fp32 needs 4",
            ],
        ),
        (
            "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32",
            90,
            [],
        ),
        (
            "void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_tn_align1>",
            120,
            ["aligned to A/B 1 element(s); fp16 needs 8"],
        ),
        ("void at::native::batch_norm_transform_input_channels_last_kernel<", 90, []),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 100, []),  # attention, not GEMM/conv
    ],
)
def test_fallback_reasons(key: Selector, cc: int, reasons: list[str]) -> None:
    assert fallback_reasons(parse_kernel_name(_select(key)), cc) == reasons


def test_describe_gives_the_kernel_card_rows() -> None:
    facts = parse_kernel_name(
        _name("void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_tn")
    )
    assert describe(facts) == [
        ("Library", "CUTLASS"),
        ("Kind", "gemm"),
        ("Built for", "sm_75"),
        ("Tensor cores", "yes (16x8x8)"),
        ("Precision", "fp16 in, fp32 accumulate, fp16 out (f16_s1688gemm_f16)"),
        ("Tile", "256×128"),
        ("Layout", "tn (A row-major, B column-major)"),
        ("Alignment", "A/B 1 element(s)"),
    ]
    nvjet = parse_kernel_name("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT")
    assert describe(nvjet) == [
        ("Library", "cuBLAS"),
        ("Kind", "gemm"),
        ("Built for", "sm_90"),
        ("Tensor cores", "yes"),
        ("Precision", "bf16 in, fp32 accumulate, bf16 out (tst)"),
        ("Tile", "256×128×64, 4 stages"),
        ("Cluster", "1×2"),
        ("Layout", "TNT"),
        ("Epilogue", "bias"),
    ]
    scalar = parse_kernel_name(
        _name("void at::native::vectorized_elementwise_kernel<(int)4, at::native::AUnaryFunctor")
    )
    assert ("Operation", "MulFunctor, scalar operand") in describe(scalar)
    assert describe(EMPTY) == []


def test_to_json_leaves_out_what_the_name_does_not_say() -> None:
    facts = parse_kernel_name(
        _name(
            "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x32x16_stage1_warpsize4x1x1_g1_tensor16x8x16_aligna2_alignc4"
        )
    )
    doc = facts.to_json()
    assert doc["alignment"] == {"operands": {"a": 2, "c": 4}, "minimum": 2}
    assert doc["precision"] == {"printed": "f16f16_f16f32_f32", "inputs": "fp16"}
    assert "cluster" not in doc and "epilogue" not in doc
    assert json.loads(json.dumps(doc)) == doc
    assert EMPTY.to_json() == {}
    for name in NAMES:
        json.dumps(parse_kernel_name(name).to_json())


@pytest.mark.parametrize(
    "name, expected",
    [
        # CUTLASS's own documentation (media/docs/cpp/profiler.md, quickstart.md, README.md).
        (
            "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x1x1_0_tnn_align8_warpspecialized_cooperative_epi_tma",
            KernelFacts(
                library="cutlass",
                scheme="cutlass3",
                kind="gemm",
                arch=90,
                tile=(128, 256, 64),
                cluster=(1, 1, 1),
                layout="tnn",
                operand_layouts=(("A", "row-major"), ("B", "column-major"), ("C", "column-major")),
                precision=Precision(
                    "bf16_bf16_f32_bf16_bf16", inputs="bf16", accumulate="fp32", output="bf16"
                ),
                tensor_core=True,
                alignment=Alignment((("ab", 8),)),
                raw_tokens=("warpspecialized", "cooperative", "epi", "tma"),
            ),
        ),
        (
            "cutlass3x_sm90_tensorop_tf32gemm_f32_f32_f32_f32_f32_128x128x32_2x1x1_0_tnn_align4",
            KernelFacts(
                library="cutlass",
                scheme="cutlass3",
                kind="gemm",
                arch=90,
                tile=(128, 128, 32),
                cluster=(2, 1, 1),
                layout="tnn",
                operand_layouts=(("A", "row-major"), ("B", "column-major"), ("C", "column-major")),
                precision=Precision(
                    "f32_f32_f32_f32_f32", inputs="tf32", accumulate="fp32", output="fp32"
                ),
                tensor_core=True,
                alignment=Alignment((("ab", 4),)),
            ),
        ),
        (
            "cutlass_tensorop_s1688gemm_f16_256x128_32x2_nt_align8",
            KernelFacts(
                library="cutlass",
                scheme="cutlass",
                kind="gemm",
                tile=(256, 128, 32),
                stages=2,
                layout="nt",
                operand_layouts=(("A", "column-major"), ("B", "row-major")),
                precision=Precision(
                    "s1688gemm_f16", inputs="fp16", accumulate="fp32", output="fp32"
                ),
                tensor_core=True,
                instruction_shape="16x8x8",
                alignment=Alignment((("ab", 8),)),
            ),
        ),
        # NCCL's generator pastes ncclDevKernel_<coll>_<redop>_<type>_<algo>_<proto>.
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            KernelFacts(
                library="nccl",
                scheme="nccl",
                kind="communication",
                op="AllReduce (Sum, RING, LL)",
                precision=Precision("f32", inputs="fp32"),
            ),
        ),
        # Recorded by others: cuBLAS on A100 (public traces), TorchInductor's template GEMM.
        (
            "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn",
            KernelFacts(
                library="cublas",
                scheme="cublas-legacy",
                kind="gemm",
                arch=80,
                tile=(128, 256),
                layout="nn",
                precision=Precision(
                    "bf16_s16816gemm_bf16", inputs="bf16", accumulate="fp32", output="bf16"
                ),
                tensor_core=True,
                instruction_shape="16x8x16",
                raw_tokens=("ldg8", "f2f", "stages", "64x3"),
            ),
        ),
        (
            "ampere_sgemm_32x32_sliced1x4_nn",
            KernelFacts(
                library="cublas",
                scheme="cublas-legacy",
                kind="gemm",
                arch=80,
                tile=(32, 32),
                layout="nn",
                precision=Precision("sgemm", inputs="fp32", accumulate="fp32"),
                tensor_core=False,
                raw_tokens=("sliced1x4",),
            ),
        ),
        (
            "nvjet_sm90_tst_128x8_64x12_4x1_v_bz_splitK_TNT",
            KernelFacts(
                library="cublas",
                scheme="nvjet",
                kind="gemm",
                arch=90,
                tile=(128, 8, 64),
                cluster=(4, 1),
                stages=12,
                layout="TNT",
                precision=Precision("tst", inputs="bf16", accumulate="fp32", output="bf16"),
                tensor_core=True,
                split_k="splitK",
                raw_tokens=("v", "bz"),
            ),
        ),
        (
            "triton_tem_fused_addmm_relu_0",
            KernelFacts(library="triton", scheme="inductor", kind="gemm", op="fused_addmm_relu"),
        ),
        (
            "triton_per_fused__softmax_1",
            KernelFacts(library="triton", scheme="inductor", kind="reduction", op="fused__softmax"),
        ),
    ],
)
def test_names_from_library_sources(name: str, expected: KernelFacts) -> None:
    assert parse_kernel_name(name) == expected


# --- what the names say, against what ncu measured for the same kernels ------------------------

_TENSOR_OPS = {  # ncu's tensor-pipe operation counters by source precision
    "fp16": "sm__ops_path_tensor_src_fp16.sum",
    "bf16": "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "tf32": "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "fp8": "sm__ops_path_tensor_src_fp8_sparsity_off.sum",
    "int8": "sm__ops_path_tensor_src_int8.sum",
    "fp64": "sm__ops_path_tensor_src_fp64.sum",
}


@cache
def _measured() -> dict[str, dict[str, float]]:
    """Kernel name -> a few launch attributes and tensor-op counts, from every full-set ncu
    raw export under tests/data (the first launch of each name)."""
    out: dict[str, dict[str, float]] = {}
    columns = ["launch__block_size", "launch__shared_mem_per_block_dynamic",
               "launch__cluster_dim_x", "launch__cluster_dim_y", "launch__cluster_dim_z",
               *_TENSOR_OPS.values()]  # fmt: skip
    for path in sorted(DATA.glob("**/*raw.csv.gz")):
        try:
            head = pd.read_csv(path, nrows=0).columns
        except pd.errors.EmptyDataError:  # a timeline-only session has an empty raw table
            continue
        if not set(columns) <= set(head) or "Kernel Name" not in head:
            continue
        df = pd.read_csv(path, skiprows=[1], thousands=",", usecols=["Kernel Name", *columns])
        for record in df.to_dict("records"):
            out.setdefault(record["Kernel Name"], {c: float(record[c]) for c in columns})
    return out


def _tensor_ops(m: dict[str, float]) -> dict[str, float]:
    return {p: 0.0 if math.isnan(m[c]) else m[c] for p, c in _TENSOR_OPS.items()}


def test_tensor_core_facts_match_the_tensor_pipe() -> None:
    checked = {True: 0, False: 0}
    for name, m in _measured().items():
        facts = parse_kernel_name(name)
        if facts.tensor_core is None:
            continue
        assert (sum(_tensor_ops(m).values()) > 0) == facts.tensor_core, name
        checked[facts.tensor_core] += 1
    assert checked[True] >= 12 and checked[False] >= 2, checked


def test_input_precision_matches_the_tensor_ops() -> None:
    checked = 0
    for name, m in _measured().items():
        facts = parse_kernel_name(name)
        inputs = facts.precision.inputs if facts.precision else None
        if not facts.tensor_core or inputs not in _TENSOR_OPS:
            continue
        ops = _tensor_ops(m)
        assert max(ops, key=lambda p: ops[p]) == inputs, name
        checked += 1
    assert checked >= 12


def test_cudnn_sdpa_f16_is_not_normalised_because_it_also_names_bf16() -> None:
    sdpa = [n for n in _measured() if n.startswith("cudnn_generated_fort_native_sdpa")]
    assert sdpa
    for name in sdpa:
        facts = parse_kernel_name(name)
        assert facts.precision == Precision("f16")  # printed "f16" ...
        ops = _tensor_ops(_measured()[name])
        assert ops["bf16"] > 0 and ops["fp16"] == 0  # ... on a bf16 run


def test_nvjet_cluster_is_the_launched_cluster() -> None:
    nvjet = [n for n in _measured() if n.startswith("nvjet_")]
    assert len(nvjet) >= 10
    for name in nvjet:
        m = _measured()[name]
        launched = math.prod(int(m[f"launch__cluster_dim_{a}"]) or 1 for a in "xyz")
        assert math.prod(parse_kernel_name(name).cluster or ()) == launched, name


def test_nvjet_mainloop_buffers_fit_the_shared_memory() -> None:
    """(M + N) x K x 2 bytes x stages: tile and stages read as CUTLASS's `MxN_KxS` fit in the
    dynamic shared memory of every recorded nvjet kernel (16-bit inputs)."""
    for name, m in _measured().items():
        facts = parse_kernel_name(name)
        if facts.scheme == "nvjet" and facts.tile and facts.stages:
            tm, tn, tk = facts.tile
            buffers = (tm + tn) * tk * 2 * facts.stages
            assert buffers <= m["launch__shared_mem_per_block_dynamic"] < buffers + 64 * 1024, name


def test_xmma_warps_give_the_block_size() -> None:
    checked = 0
    for name, m in _measured().items():
        warps = parse_kernel_name(name).warps
        if warps and name.startswith("sm80_xmma"):
            assert math.prod(warps) * 32 == m["launch__block_size"], name
            checked += 1
    assert checked >= 2


def test_cutlass_tile_and_stages_give_the_shared_memory() -> None:
    name = _name("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>")
    facts = parse_kernel_name(name)
    assert facts.tile and facts.stages
    m, n, k = facts.tile
    # CUTLASS's multistage mainloop: one M x K tile of A and K x N of B (fp32) per stage.
    assert (m + n) * k * 4 * facts.stages == _measured()[name][
        "launch__shared_mem_per_block_dynamic"
    ]


# --- robustness and speed -----------------------------------------------------------------------

_FRAGMENTS = [
    "nvjet_", "sm90_", "sm80_xmma_", "cutlass_", "cutlass3x_sm90_", "tensorop_", "simt_", "gemm",
    "f16", "bf16", "tst", "hsh", "_", "x", "128", "64x4", "1x2", "align", "aligna2", "tilesize",
    "warpsize", "stage", "tensor16x8x16", "void ", "at::native::", "<", ">", "(", ")", "::",
    "<unnamed>::", "cudnn_generated_", "triton_poi_", "ncclDevKernel_", "Functor", "cub::",
    "Device", "Kernel", "nhwc", "TNT", "splitK", "segment_k", "s1688gemm", "ampere_", "0",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_any_text_parses(text: str) -> None:
    _check_total(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40).map("".join))
def test_name_like_text_parses(text: str) -> None:
    _check_total(text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(NAMES), st.integers(0, 10_000), st.integers(0, 10_000))
def test_damaged_recorded_names_parse(name: str, cut: int, drop: int) -> None:
    _check_total(name[: cut % (len(name) + 1)])
    _check_total(name[: drop % len(name)] + name[drop % len(name) + 1 :])


def _check_total(text: str) -> None:
    facts = parse_kernel_name(text)
    assert isinstance(facts, KernelFacts)
    json.dumps(facts.to_json())
    describe(facts)
    fallback_reasons(facts, 90)


def test_unusual_inputs_give_empty_facts() -> None:
    for text in [
        "",
        " ",
        "\x00" * 100,
        "void ",
        "<<<<",
        "()",
        "nvjet_",
        "sm90_xmma_",
        "cutlass_tensorop_",
    ]:
        assert parse_kernel_name(text) == EMPTY, repr(text)
    assert parse_kernel_name(None) == EMPTY  # type: ignore[arg-type]
    assert parse_kernel_name(b"nvjet") == EMPTY  # type: ignore[arg-type]


HUGE_NAMES = [
    "void " + "<" * 200_000, "a" * 200_000, "cutlass_tensorop_" + "1x1_" * 50_000,
    "nvjet_sm90_hsh_1x1_1x1_1x1" + "_a" * 100_000, "at::native::" + "a:" * 100_000,
    "triton_poi_" + "_" * 100_000, "ampere_sgemm_1x1" + "_a1" * 50_000 + "_nn",
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "kind"),
    list(zip(HUGE_NAMES, [None, None, None, "gemm", None, "elementwise", None], strict=True)),
)
def test_huge_names_parse_to_facts(text: str, kind: str | None) -> None:
    """A name of 100,000+ characters parses (to whatever facts it holds) and ends: the patterns
    do not backtrack without bound. How fast is benchmarks/bench_kernel_names.py's to say; the
    alarm only turns a hang into a failure."""
    signal.signal(signal.SIGALRM, _hung)
    signal.alarm(60)
    try:
        facts = parse_kernel_name(text)
    finally:
        signal.alarm(0)
    assert facts.kind == kind


def _hung(signum: int, frame: object) -> None:
    raise AssertionError("parsing a huge kernel name did not end within 60 s")
