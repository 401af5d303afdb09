"""Tests of reference_kernels/: CPU-only algebra and source checks always run; the GPU
correctness tests (marker `gpu`) skip without torch or a CUDA device."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reference_kernels.algebra import chunk_bounds, fold_normalisation  # noqa: E402

CU_SOURCE = ROOT / "reference_kernels" / "elementwise.cu"
ALL_VARIANTS = ("naive", "compiled", "fused", "float4", "stream_split", "serial_pageable")


def two_step(x: np.ndarray, mean: np.ndarray, std: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    return ((x - mean) / std) @ matrix


def random_case(rng: np.random.Generator, pixels: int) -> tuple[np.ndarray, ...]:
    x = rng.random((pixels, 3))
    mean = rng.random(3)
    std = 0.1 + rng.random(3)  # distinct per channel, so a wrong axis shows
    matrix = rng.standard_normal((3, 3))
    return x, mean, std, matrix


# --- CPU: algebra -------------------------------------------------------------------


@pytest.mark.parametrize("pixels", [1, 7, 1000])
def test_fold_matches_two_step(pixels: int) -> None:
    x, mean, std, matrix = random_case(np.random.default_rng(pixels), pixels)
    folded, bias = fold_normalisation(mean, std, matrix)
    assert folded.shape == (3, 3) and bias.shape == (3,)
    np.testing.assert_allclose(
        x @ folded + bias, two_step(x, mean, std, matrix), rtol=1e-12, atol=1e-12
    )


def test_fold_test_data_discriminates_wrong_folds() -> None:
    # Guards the test above: plausible mistakes must give different results on this data.
    x, mean, std, matrix = random_case(np.random.default_rng(0), 100)
    expected = two_step(x, mean, std, matrix)
    folded, bias = fold_normalisation(mean, std, matrix)
    wrong_axis = x @ (matrix / std[None, :]) + bias
    wrong_sign = x @ folded - bias
    for wrong in (wrong_axis, wrong_sign):
        assert not np.allclose(wrong, expected, rtol=1e-6, atol=1e-6)


def test_fold_works_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    x, mean, std, matrix = (torch.from_numpy(a) for a in random_case(np.random.default_rng(3), 50))
    folded, bias = fold_normalisation(mean, std, matrix)
    torch.testing.assert_close(
        x @ folded + bias, ((x - mean) / std) @ matrix, rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("chunks", [1, 2, 3, 8, 13])
def test_chunk_bounds_cover_and_align(chunks: int) -> None:
    for pixels in range(80):
        bounds = chunk_bounds(pixels, chunks)
        assert len(bounds) == chunks + 1
        assert bounds[0] == 0 and bounds[-1] == pixels
        assert all(a <= b for a, b in itertools.pairwise(bounds))
        # Every non-empty chunk starts on a 4-pixel (48-byte, so 16-byte) boundary.
        assert all(a % 4 == 0 for a, b in itertools.pairwise(bounds) if b > a)
        # Balanced: no chunk exceeds its fair share by more than the alignment.
        assert max(b - a for a, b in itertools.pairwise(bounds)) <= -(-pixels // chunks) + 4


def test_chunk_bounds_rejects_bad_arguments() -> None:
    for args in ((-1, 8), (10, 0), (10, 2, 0)):
        with pytest.raises(ValueError):
            chunk_bounds(*args)


# --- CPU: the float4 kernel's lane mapping, read from the .cu source ------------------


def float4_lane_map() -> list[tuple[list[int], list[int]]]:
    """(input float indices, output float indices) of each apply() call in float4_kernel,
    with lane vI.L meaning float 4*I + 'xyzw'.index(L) of the thread's 12."""
    body = CU_SOURCE.read_text().split("float4_kernel(", 1)[1].split("} else if", 1)[0]
    lane = r"([vo])(\d)\.([xyzw])"
    calls = re.findall(r"apply\(a,((?:\s*[vo]\d\.[xyzw],?){6})\);", body)
    mapping = []
    for call in calls:
        lanes = [(kind, 4 * int(i) + "xyzw".index(c)) for kind, i, c in re.findall(lane, call)]
        assert [k for k, _ in lanes] == ["v"] * 3 + ["o"] * 3, call
        mapping.append(([i for _, i in lanes[:3]], [i for _, i in lanes[3:]]))
    return mapping


def test_float4_lanes_are_pixels_in_order() -> None:
    assert float4_lane_map() == [([3 * k, 3 * k + 1, 3 * k + 2],) * 2 for k in range(4)]


@pytest.mark.parametrize("pixels", list(range(14)))
def test_float4_mirror_matches_two_step(pixels: int) -> None:
    # A numpy mirror of float4_kernel: full 12-float groups through the parsed lane map,
    # then the pixels % 4 tail one pixel at a time, as the kernel's last thread does.
    x, mean, std, matrix = random_case(np.random.default_rng(100 + pixels), pixels)
    folded, bias = fold_normalisation(mean, std, matrix)
    flat, out = x.reshape(-1), np.full(3 * pixels, np.nan)
    groups, tail = divmod(pixels, 4)
    for g in range(groups):
        v, o = flat[12 * g : 12 * g + 12], np.full(12, np.nan)
        for inputs, outputs in float4_lane_map():
            o[outputs] = v[inputs] @ folded + bias
        out[12 * g : 12 * g + 12] = o
    for k in range(tail):
        p = 4 * groups + k
        out[3 * p : 3 * p + 3] = flat[3 * p : 3 * p + 3] @ folded + bias
    np.testing.assert_allclose(
        out.reshape(pixels, 3), two_step(x, mean, std, matrix), rtol=1e-12, atol=1e-12
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kernels_compile_without_torch(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            "nvcc",
            "-arch=sm_90",
            "-DNSDIAG_NO_TORCH",
            "-c",
            str(CU_SOURCE),
            "-o",
            str(tmp_path / "k.o"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr


# --- GPU --------------------------------------------------------------------------


def require_gpu() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    return torch


@pytest.mark.gpu
def test_variant_names_match() -> None:
    require_gpu()
    from reference_kernels.variants import VARIANTS

    assert tuple(VARIANTS) == ALL_VARIANTS


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_variant_matches_float64_reference(variant: str) -> None:
    require_gpu()
    from reference_kernels.check import SHAPES, check_variant

    for shape in SHAPES:
        result = check_variant(variant, shape)
        assert result.passed, result.line()


@pytest.mark.gpu
@pytest.mark.parametrize("chunks", [1, 3, 8, 64])
def test_stream_split_any_chunk_count(chunks: int) -> None:
    require_gpu()
    from reference_kernels.check import check_variant

    for shape in ((1, 1, 1), (3, 17, 31)):
        result = check_variant("stream_split", shape, chunks=chunks)
        assert result.passed, f"chunks={chunks}: {result.line()}"


@pytest.mark.gpu
def test_float4_rejects_misaligned_and_fused_accepts_it() -> None:
    torch = require_gpu()
    from reference_kernels.check import TOLERANCE, reference, scaled_error
    from reference_kernels.variants import float4, fused, load_extension, make_inputs

    x, params = make_inputs(1, 4, 5)
    buffer = torch.empty(x.numel() + 1, device="cuda")
    misaligned = buffer[1:].view(x.shape)  # 4 bytes past a 16-byte-aligned allocation
    misaligned.copy_(x)
    assert misaligned.data_ptr() % 16 != 0
    with pytest.raises(ValueError):
        float4(misaligned, params)
    with pytest.raises((ValueError, RuntimeError)):  # TORCH_CHECK_VALUE in the extension
        load_extension().float4(misaligned, params.matrix_folded, params.bias)
    ref, scale = reference(x, params)
    assert scaled_error(fused(misaligned, params), ref, scale) <= TOLERANCE


@pytest.mark.gpu
def test_pipeline_variants_check_host_memory() -> None:
    require_gpu()
    from reference_kernels.variants import make_inputs, serial_pageable, stream_split

    x, params = make_inputs(1, 4, 4)
    with pytest.raises(ValueError):
        stream_split(x.cpu(), params)  # pageable
    with pytest.raises(ValueError):
        serial_pageable(x.cpu().pin_memory(), params)
    with pytest.raises(ValueError):
        stream_split(x, params)  # device tensor


@pytest.mark.gpu
def test_kernels_reject_bad_inputs() -> None:
    torch = require_gpu()
    from reference_kernels.variants import load_extension, make_inputs

    ext = load_extension()
    x, params = make_inputs(1, 4, 4)
    with pytest.raises(RuntimeError):  # params must stay on the host (passed by value)
        ext.fused(x, params.matrix_folded.cuda(), params.bias.cuda())
    with pytest.raises(RuntimeError):
        ext.fused(x.double(), params.matrix_folded, params.bias)
    with pytest.raises(RuntimeError):
        ext.float4(x[..., :2].contiguous(), params.matrix_folded, params.bias)
    assert torch.equal(
        ext.fused(x, params.matrix_folded, params.bias),
        ext.float4(x, params.matrix_folded, params.bias),
    )


@pytest.mark.gpu
def test_copy_float4_copies() -> None:
    torch = require_gpu()
    from reference_kernels.variants import load_extension

    src = torch.rand(4 * 1000 + 4, device="cuda")
    dst = torch.zeros_like(src)
    load_extension().copy_float4(src, dst)
    assert torch.equal(src, dst)
