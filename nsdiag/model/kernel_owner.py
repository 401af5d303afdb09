"""Whose kernel it is: the user's own (they compile it and can rewrite it) or a library's (they
choose its backend, shape or precision, never its code), from its name (kernel_facts.py's
library, and the library kernels whose names no scheme there reads)."""

from __future__ import annotations

import re
from functools import lru_cache

from nsdiag.model.kernel_facts import parse_kernel_name

# Library kernels kernel_facts does not name a library for: cuBLAS's xmma and legacy SGEMM
# kernels, PyTorch's memory-efficient and flash attention (CUTLASS-based, built into PyTorch).
_UNNAMED_LIBRARY: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), lib)
    for p, lib in (
        (r"^(void )?sm\d+_xmma_|^(void )?(ampere|volta|turing|maxwell)_[hsd]?gemm", "cublas"),
        (r"fmha_cutlass|PyTorchMemEffAttention|flash_(fwd|bwd)_|pytorch_flash", "pytorch"),
    )
)
LIBRARY_NAMES = {
    "cublas": "cuBLAS",
    "cublaslt": "cuBLAS",
    "cutlass": "cuBLAS/CUTLASS",
    "cudnn": "cuDNN",
    "pytorch": "PyTorch",
    "triton": "torch.compile (Triton)",
    "flash-attention": "FlashAttention",
    "cub": "CUB/Thrust",
    "nccl": "NCCL",
}


@lru_cache(maxsize=1 << 14)
def library_of(name: str) -> str | None:
    """The library whose kernel this is (a key of LIBRARY_NAMES), None for the user's own."""
    library = parse_kernel_name(name).library
    if library is not None:
        return library
    return next((lib for pattern, lib in _UNNAMED_LIBRARY if pattern.search(name)), None)
