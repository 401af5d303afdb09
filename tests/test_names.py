"""Kernel names matched across tools (model/names.py): nsys and ncu spell one kernel
differently."""

from __future__ import annotations

from nsdiag.model import names


def test_function_names_match_ncu_and_nsys_spelling() -> None:
    lambda_kernel = (
        "void at::native::<unnamed>::k<float, (int)4, void x<y>(int)::[lambda(int) (instance 1)]>"
        "(long, T3)"
    )
    assert names.function_name(lambda_kernel) == "k"
    assert (
        names.function_name("nsdiag::float4_kernel(const float4 *, float4 *, long)")
        == "float4_kernel"
    )
    assert (
        names.function_name(
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)"
        )
        == "Kernel2"
    )
    assert names.function_name("triton_poi_fused_div_sub_0") == "triton_poi_fused_div_sub_0"
    nsys = (
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, "
        "std::array<char *, (unsigned long)1>>(int, T2, T3)"
    )
    ncu = "void vectorized_elementwise_kernel<4, FillFunctor<float>, array<char *, 1>>(int, T2, T3)"
    assert names.normalized(nsys) == names.normalized(ncu)


def test_ncus_spelling_of_anonymous_namespaces_matches_nsys() -> None:
    """ncu 2025.3.1's exports print PyTorch's `at::native::<unnamed>::` as `unnamed>::` (seen in
    the DataLoader training step's targeted run, tests/data/programs/verify)."""
    nsys = "void at::native::<unnamed>::max_pool_forward_nchw<c10::BFloat16, int>(T2, const T1 *)"
    ncu = "void unnamed>::max_pool_forward_nchw<BFloat16, int>(T2, const T1 *)"
    assert names.function_name(ncu) == names.function_name(nsys) == "max_pool_forward_nchw"
    assert names.normalized(ncu) == names.normalized(nsys)
