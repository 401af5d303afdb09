"""Whose NVTX range is it: the program's, or a library's.

Libraries emit NVTX ranges of their own: CUB/Thrust (CCCL) around each device algorithm
(`cub::DeviceRadixSort`), NCCL around each collective (`ncclAllReduce`), cuDNN and cuBLAS
around their calls, PyTorch's `emit_nvtx` / `--pytorch=autograd-nvtx` around every operator
(`aten::add, seq = 17, op_id = 5`). They say where time went ("inside ncclAllReduce"), never which
part of the run the user means: the analysed region is chosen from the program's own ranges.

A range is a library's when its NVTX domain is a known library's (the domain is what nsys's
export records, `NvtxDomainCreate`), else when its name matches a known library's pattern (an
export without domains, or a library that writes to the default domain). Users add their own
libraries with NSDIAG_LIBRARY_RANGES: regular expressions separated by `;`, matched against the
start of a range's name (or its domain).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from nsdiag.model.text_codes import distinct_pairs, factorize_text

ENV_LIBRARY_RANGES = "NSDIAG_LIBRARY_RANGES"

# Domain names as the libraries create them (lower case).
LIBRARY_DOMAINS: dict[str, str] = {
    "cccl": "CUB/Thrust",
    "cub": "CUB/Thrust",
    "thrust": "CUB/Thrust",
    "nccl": "NCCL",
    "cudnn": "cuDNN",
    "cublas": "cuBLAS",
    "cublaslt": "cuBLAS",
    "cufft": "cuFFT",
    "cusparse": "cuSPARSE",
    "nvshmem": "NVSHMEM",
    "pytorch": "PyTorch",
}

# Name patterns, matched at the start of the range's name.
LIBRARY_NAMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("CUB/Thrust", re.compile(r"(cub|thrust|cuda::std|cccl)::")),
    ("NCCL", re.compile(r"nccl[A-Z]")),
    ("cuDNN", re.compile(r"cudnn[A-Z_]", re.IGNORECASE)),
    ("cuBLAS", re.compile(r"cublas(Lt)?[A-Z_]")),
    # PyTorch's operator ranges (emit_nvtx, autograd-nvtx): "aten::mm", "aten::add, seq = 17",
    # "autograd::engine::evaluate_function: MmBackward0", "MmBackward0, seq = 17", and its
    # record_function ranges under emit_nvtx, "Optimizer.step#AdamW.step, op_id = 1234" (a
    # transformers Llama under emit_nvtx on the H200: 69,432 such ranges, none the user's).
    (
        "PyTorch",
        re.compile(
            r"(aten|autograd|c10d|prim|torch)::|Optimizer\.(step|zero_grad)#"
            # nsys --pytorch=functions-trace: "torch.optim.AdamW.step", "torch.Tensor.to"
            r"|torch\.[A-Za-z_]"
            r"|[^,]+, (seq|op_id|sizes) = "
        ),
    ),
)


@lru_cache(maxsize=1 << 14)
def _user_patterns(setting: str) -> tuple[re.Pattern[str], ...]:
    patterns = []
    for text in setting.split(";"):
        if text.strip():
            try:
                patterns.append(re.compile(text.strip()))
            except re.error:
                continue  # a pattern that is not a regular expression matches nothing
    return tuple(patterns)


# Above the distinct ranges of the largest recordings (emit_nvtx's op_id ranges: 69,459 in a
# Llama step), which the region search reads several times: a smaller cache, read in order,
# misses every time.
@lru_cache(maxsize=1 << 18)
def _owner(name: str, domain: str, setting: str) -> str | None:
    known = LIBRARY_DOMAINS.get(domain.strip().lower())
    if known is not None:
        return known
    for library, pattern in LIBRARY_NAMES:
        if pattern.match(name):
            return library
    for pattern in _user_patterns(setting):
        if pattern.match(name) or (domain and pattern.match(domain)):
            return "NSDIAG_LIBRARY_RANGES"
    return None


def library_of(name: object, domain: object = "") -> str | None:
    """The library that emitted an NVTX range, or None when it is the program's own."""
    setting = os.environ.get(ENV_LIBRARY_RANGES, "")
    text = "" if domain is None or domain != domain else str(domain)  # NaN: default domain
    return _owner(str(name), text, setting)


def is_library_range(name: object, domain: object = "") -> bool:
    return library_of(name, domain) is not None


def library_flags(
    names: Sequence[str] | npt.NDArray[np.object_], domains: Sequence[str] | npt.NDArray[np.object_]
) -> npt.NDArray[np.bool_]:
    """`is_library_range` of many ranges (names and domains as text, "" the default domain),
    each distinct pair classified once: emit_nvtx's Llama step has 290,000 ranges of 69,000
    names, and the region search asks four times."""
    setting = os.environ.get(ENV_LIBRARY_RANGES, "")
    if not len(names):
        return np.zeros(0, dtype=bool)
    name_codes, distinct_names = factorize_text(np.asarray(names, dtype=object))
    domain_codes, distinct_domains = factorize_text(np.asarray(domains, dtype=object))
    firsts, seconds, pair_of, _ = distinct_pairs(name_codes, domain_codes)
    flags = np.array(
        [
            _owner(distinct_names[n], distinct_domains[d], setting) is not None
            for n, d in zip(firsts.tolist(), seconds.tolist(), strict=True)
        ],
        dtype=bool,
    )
    return np.asarray(flags[pair_of], dtype=bool)
