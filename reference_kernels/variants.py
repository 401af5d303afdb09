"""The reference variants: NHWC fp32 `(x - mean) / std` then a 3x3 colour transform.

Every variant has the signature `fn(x, params, out=None) -> out` and wraps its work in
an NVTX range named after itself, so nsdiag can attribute kernels and timeline spans.
Device variants take and return CUDA tensors; the pipeline variants (stream_split,
serial_pageable) take and return host tensors. Library module: no prints.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .algebra import chunk_bounds, fold_normalisation

__all__ = [
    "DEFAULT_CHUNKS",
    "DEVICE_VARIANTS",
    "PIPELINE_VARIANTS",
    "VARIANTS",
    "Params",
    "compiled",
    "float4",
    "fold_normalisation",
    "fused",
    "load_extension",
    "make_inputs",
    "make_params",
    "naive",
    "nvtx_range",
    "serial_pageable",
    "stream_split",
]

_SOURCE = Path(__file__).resolve().with_name("elementwise.cu")
_EXTENSIONS: dict[tuple[int, int], Any] = {}
_COMPILED: Callable[..., torch.Tensor] | None = None
_STREAMS: dict[int, tuple[torch.cuda.Stream, torch.cuda.Stream, torch.cuda.Stream]] = {}

DEFAULT_CHUNKS = 16


@dataclass(frozen=True)
class Params:
    mean: torch.Tensor  # (3,) float32 on the compute device (naive, compiled)
    std: torch.Tensor  # (3,)
    matrix: torch.Tensor  # (3, 3), out = normed @ matrix
    matrix_folded: torch.Tensor  # (3, 3) float32 on the CPU: the kernels take it by value
    bias: torch.Tensor  # (3,) float32 on the CPU


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsdiag"


def load_extension(device: torch.device | int | None = None) -> Any:
    """Build (first call, ~1 min) or load the CUDA extension for this GPU; cached."""
    major, minor = torch.cuda.get_device_capability(device)
    key = (major, minor)
    if key not in _EXTENSIONS:
        from torch.utils.cpp_extension import load

        arch = f"{major}{minor}"
        build_dir = _cache_root() / "reference_kernels" / f"sm_{arch}"
        build_dir.mkdir(parents=True, exist_ok=True)
        _EXTENSIONS[key] = load(
            name="nsdiag_reference_kernels",
            sources=[str(_SOURCE)],
            # An explicit -gencode makes torch add no arch flags of its own; -lineinfo
            # lets Nsight Compute map SASS back to source lines.
            extra_cuda_cflags=["-O3", "-lineinfo", f"-gencode=arch=compute_{arch},code=sm_{arch}"],
            build_directory=str(build_dir),
            verbose=False,
        )
    return _EXTENSIONS[key]


def make_params(
    mean: torch.Tensor, std: torch.Tensor, matrix: torch.Tensor, device: torch.device | str = "cuda"
) -> Params:
    """Params from fp32 mean/std/matrix; the fold is done in float64 from those values."""
    mean32, std32, matrix32 = (t.detach().to(torch.float32) for t in (mean, std, matrix))
    folded, bias = fold_normalisation(
        *(t.to("cpu", torch.float64) for t in (mean32, std32, matrix32))
    )
    return Params(
        mean=mean32.to(device),
        std=std32.to(device),
        matrix=matrix32.to(device),
        matrix_folded=folded.to(torch.float32).contiguous(),
        bias=bias.to(torch.float32).contiguous(),
    )


def make_inputs(
    n: int, h: int, w: int, device: torch.device | str = "cuda", seed: int = 0
) -> tuple[torch.Tensor, Params]:
    """A deterministic (N, H, W, 3) image batch in [0, 1) and ImageNet-like params."""
    cpu_gen = torch.Generator().manual_seed(seed)
    mean = torch.tensor([0.485, 0.456, 0.406])
    std = torch.tensor([0.229, 0.224, 0.225])
    matrix = torch.eye(3) + 0.5 * torch.randn(3, 3, generator=cpu_gen)
    dev_gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.rand((n, h, w, 3), generator=dev_gen, device=device, dtype=torch.float32)
    return x, make_params(mean, std, matrix, device)


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


def _two_step(
    x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, matrix: torch.Tensor
) -> torch.Tensor:
    normed = (x - mean) / std
    return torch.einsum("nhwc,cd->nhwd", normed, matrix)


def _store(result: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    if out is None:
        return result
    out.copy_(result)
    return out


def naive(x: torch.Tensor, params: Params, out: torch.Tensor | None = None) -> torch.Tensor:
    """Plain PyTorch: elementwise kernel(s), then a cuBLAS GEMM with K=3."""
    with nvtx_range("naive"):
        return _store(_two_step(x, params.mean, params.std, params.matrix), out)


def compiled(x: torch.Tensor, params: Params, out: torch.Tensor | None = None) -> torch.Tensor:
    """torch.compile of the same two steps (first call per shape compiles: warm up)."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = torch.compile(_two_step)
    with nvtx_range("compiled"):
        return _store(_COMPILED(x, params.mean, params.std, params.matrix), out)


def fused(x: torch.Tensor, params: Params, out: torch.Tensor | None = None) -> torch.Tensor:
    """One CUDA kernel, one thread per pixel, folded matrix + bias."""
    ext = load_extension(x.device)
    with nvtx_range("fused"):
        if out is None:
            return ext.fused(x, params.matrix_folded, params.bias)
        ext.fused_into(x, params.matrix_folded, params.bias, out)
        return out


def float4(x: torch.Tensor, params: Params, out: torch.Tensor | None = None) -> torch.Tensor:
    """4 pixels per thread with three 128-bit loads and stores; needs 16-byte alignment."""
    for name, t in (("x", x), ("out", out)):
        if t is not None and t.data_ptr() % 16:
            raise ValueError(
                f"float4 variant needs a 16-byte-aligned {name} (data_ptr % 16 == "
                f"{t.data_ptr() % 16}); use the fused variant instead"
            )
    ext = load_extension(x.device)
    with nvtx_range("float4"):
        if out is None:
            return ext.float4(x, params.matrix_folded, params.bias)
        ext.float4_into(x, params.matrix_folded, params.bias, out)
        return out


def _pipeline_streams(device: torch.device) -> tuple[torch.cuda.Stream, ...]:
    # Cached so timelines show the same three streams on every call.
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _STREAMS:
        _STREAMS[index] = tuple(torch.cuda.Stream(device=index) for _ in range(3))  # type: ignore[assignment]
    return _STREAMS[index]


def _check_host(x: torch.Tensor, name: str) -> None:
    if x.device.type != "cpu" or x.dtype != torch.float32 or not x.is_contiguous():
        raise ValueError(f"{name} needs a contiguous float32 host tensor")


def stream_split(
    x: torch.Tensor, params: Params, out: torch.Tensor | None = None, chunks: int = DEFAULT_CHUNKS
) -> torch.Tensor:
    """Pinned host batch -> device -> float4 kernel -> pinned host, in `chunks` pieces.

    Three streams: H2D copies, kernels, D2H copies. Kernel i waits on the event "chunk i
    copied in", D2H i on "chunk i computed". D2H has its own stream (not the H2D one) so
    chunk i's copy-out never queues behind chunk i+1's copy-in: H2D and D2H use separate
    copy engines and PCIe directions and can all overlap with compute. The extension
    enqueues the whole pipeline in C++: a few microseconds of host time per chunk, so the
    host stays ahead of the copies at any chunk count. Each chunk has its own slice of
    full-size device buffers, so no buffer is reused within a call. Chunk boundaries are
    multiples of 4 pixels (16-byte aligned). Returns after the last D2H completes.

    Where the time goes on the H200 (reference_kernels/README.md): both copy directions at
    once run 13-19% slower than one alone, the D2H stream is the critical path, and each
    chunk adds a few microseconds between copies; 16 chunks measured best.
    """
    _check_host(x, "stream_split")
    if not x.is_pinned():
        raise ValueError("stream_split needs a pinned host tensor (x.pin_memory())")
    if out is not None:
        _check_host(out, "stream_split out")
        if not out.is_pinned() or out.shape != x.shape:
            raise ValueError("stream_split out must be a pinned host tensor of x's shape")
    device = torch.device("cuda", torch.cuda.current_device())
    ext = load_extension(device)
    with nvtx_range("stream_split"):
        if out is None:
            out = torch.empty(x.shape, dtype=torch.float32, pin_memory=True)
        d_in = torch.empty(x.shape, dtype=torch.float32, device=device)
        d_out = torch.empty_like(d_in)
        h2d, compute, d2h = _pipeline_streams(device)
        current = torch.cuda.current_stream(device)
        for stream in (h2d, compute, d2h):
            # The fresh device buffers may reuse memory that queued work on the current
            # stream still touches: start only after it.
            stream.wait_stream(current)
        bounds = chunk_bounds(x.numel() // 3, chunks)
        ext.stream_split_into(
            x, out, d_in, d_out, params.matrix_folded, params.bias, bounds,
            h2d.cuda_stream, compute.cuda_stream, d2h.cuda_stream,
        )  # fmt: skip
        # Every D2H waited on its kernel, which waited on its H2D: this drains all three.
        d2h.synchronize()
    return out


def serial_pageable(
    x: torch.Tensor, params: Params, out: torch.Tensor | None = None
) -> torch.Tensor:
    """The un-pipelined twin of stream_split: pageable host memory, one stream, no overlap."""
    _check_host(x, "serial_pageable")
    if x.is_pinned():
        raise ValueError("serial_pageable is the pageable baseline: pass an unpinned tensor")
    if out is not None:
        _check_host(out, "serial_pageable out")
        if out.shape != x.shape:
            raise ValueError("serial_pageable out must have x's shape")
    device = torch.device("cuda", torch.cuda.current_device())
    ext = load_extension(device)
    with nvtx_range("serial_pageable"):
        d_in = x.to(device)  # pageable: staged through a driver buffer, blocks the host
        d_out = torch.empty_like(d_in)
        ext.float4_into(d_in, params.matrix_folded, params.bias, d_out)
        if out is None:
            return d_out.cpu()
        out.copy_(d_out)  # blocking D2H into pageable memory
        return out


DEVICE_VARIANTS: tuple[str, ...] = ("naive", "compiled", "fused", "float4")
PIPELINE_VARIANTS: tuple[str, ...] = ("stream_split", "serial_pageable")
VARIANTS: dict[str, Callable[..., torch.Tensor]] = {
    "naive": naive,
    "compiled": compiled,
    "fused": fused,
    "float4": float4,
    "stream_split": stream_split,
    "serial_pageable": serial_pageable,
}
