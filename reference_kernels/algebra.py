"""Torch-free algebra shared by the variants and the CPU tests.

Everything here uses only `/`, `@`, `-` and indexing, so it works unchanged on numpy
arrays and on torch tensors.
"""

from __future__ import annotations

from typing import Any, TypeVar

ArrayT = TypeVar("ArrayT", bound=Any)


def fold_normalisation(mean: ArrayT, std: ArrayT, matrix: ArrayT) -> tuple[ArrayT, ArrayT]:
    """Fold `(x - mean) / std` into the colour matrix.

    ((x - mean) / std) @ M == x @ (M / std[:, None]) + (-(mean / std) @ M), so the fused
    kernels need only 9 + 3 constants and one pass over the pixels.
    Returns (matrix_folded (C, D), bias (D,)).
    """
    matrix_folded = matrix / std[:, None]
    bias = -((mean / std) @ matrix)
    return matrix_folded, bias


def chunk_bounds(pixels: int, chunks: int, align: int = 4) -> list[int]:
    """Pixel boundaries [b0=0, ..., bK=pixels] of `chunks` nearly equal pieces.

    Interior boundaries are rounded up to a multiple of `align` pixels: 4 pixels are
    48 bytes, so every chunk of a 16-byte-aligned buffer starts 16-byte aligned, as
    the float4 kernel requires. Some chunks may be empty when pixels is small.
    """
    if pixels < 0 or chunks < 1 or align < 1:
        raise ValueError(f"bad chunking: pixels={pixels} chunks={chunks} align={align}")
    bounds = []
    for i in range(chunks):
        start = i * pixels // chunks
        bounds.append(min(pixels, (start + align - 1) // align * align))
    bounds.append(pixels)
    return bounds
