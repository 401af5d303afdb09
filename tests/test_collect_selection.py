"""Choosing the signatures phase 2 profiles, by coverage and the cap on signatures
(collect/selection.py)."""

from __future__ import annotations

import pytest

from nsdiag.collect import selection
from nsdiag.model import launches as signatures
from tests.conftest import (
    STEP,
)


@pytest.mark.parametrize(
    "coverage, max_kernels, regex, expected",
    [
        (0.9, 40, None, ["void ew<Mul>(int)", "void gemm<1>(float)", "void norm(float *)"]),
        (0.45, 40, None, ["void ew<Mul>(int)"]),
        # ew<Mul> brings ew<Fill> (the same name's first launch of that shape): 2 profiled; gemm
        # would bring its second shape (4 > 3) and is passed over for norm.
        (1.0, 2, None, ["void ew<Mul>(int)"]),
        (1.0, 3, None, ["void ew<Mul>(int)", "void norm(float *)"]),
        # the other gemm shape is profiled with the first and counts toward coverage
        (0.95, 40, "gemm", ["void gemm<1>(float)"]),
        (0.9, 40, "^nothing$", []),
    ],
)
def test_choose(coverage: float, max_kernels: int, regex: str | None, expected: list[str]) -> None:
    sigs = signatures.signatures(signatures.kernel_launches(STEP))
    assert [s.name for s in selection.choose(sigs, coverage, max_kernels, regex)] == expected
