"""Phase 1's launches grouped into kernel signatures (model/launches.py)."""

from __future__ import annotations

from nsdiag.model import launches as signatures
from tests.conftest import (
    G1,
    G2,
    STEP,
)


def test_signatures_rank_by_total_time() -> None:
    sigs = signatures.signatures(signatures.kernel_launches(STEP))
    assert [(s.name, s.grid, s.launches, s.total_ns) for s in sigs] == [
        ("void ew<Mul>(int)", G1, 2, 600.0),
        ("void gemm<1>(float)", G1, 1, 500.0),
        ("void norm(float *)", G2, 1, 150.0),
        ("void gemm<1>(float)", G2, 1, 40.0),
        ("void ew<Fill>(int)", G1, 1, 10.0),
    ]
    assert abs(sum(s.share for s in sigs) - 1.0) < 1e-12  # memcpy time is not kernel time
