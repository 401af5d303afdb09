"""Diagnosis of the reference kernels and the JSON contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from tests.test_calibration import diagnosis, kernel

SCHEMA = json.loads((Path(__file__).parents[1] / "docs/diagnosis.schema.json").read_text())


def test_float4_sits_at_the_dram_roof() -> None:
    k = kernel("reference", "nsdiag::float4_kernel")
    assert (k.bound, k.limiter) == ("memory", "dram")
    assert k.findings[0].rule == "NSD101"  # only fewer bytes help
    assert k.roofline.pct_of_roof > 80
    assert k.roofline.arithmetic_intensity < 1  # far left of the ridge point
    # Against the copy measured in the same session it is within a few percent of the ceiling.
    assert k.roofline.pct_of_measured_ceiling > 95


def test_naive_is_a_chain_to_fuse() -> None:
    d = diagnosis("reference")
    naive = [f for f in d.program_findings if f.range == "naive"]
    assert len(naive) == 1 and naive[0].cause == "fusion-candidate"
    chain = naive[0].chain
    assert "CUDAFunctor_add" in chain[0] and "DivFunctor" in chain[1] and "gemm" in chain[2]
    assert naive[0].impact > 0.3  # most of naive's time goes away
    compiled = [f for f in d.program_findings if f.range == "compiled"]
    assert len(compiled) == 1 and "triton_poi_fused_div_sub" in compiled[0].chain[0]
    # Kernels already at the roof, in their own ranges, are not fusion candidates.
    assert not [f for f in d.program_findings if f.range in ("fused", "float4", "copy_ceiling")]
    for name in ("CUDAFunctor_add", "DivFunctor"):
        assert kernel("reference", name).bound == "memory"
    gemm = kernel("reference", "tilesize64x32x8")
    assert gemm.findings[0].rule == "NSD206"  # the K=3 GEMM: padding, not math
    assert gemm.metrics["dram_throughput_pct"] < 10


def test_ranking_puts_the_biggest_saving_first() -> None:
    top = diagnosis("reference").top_findings(3)
    impacts = [f.impact for _, f in top]
    assert impacts == sorted(impacts, reverse=True)
    assert top[0][1].cause == "fusion-candidate"


def test_layout_conversions_found() -> None:
    d = diagnosis("torch_cases")
    layout = [f for f in d.program_findings if f.cause == "layout-conversion"]
    assert len(layout) == 1
    kernels = layout[0].details["kernels"]
    assert any("nchwToNhwc" in k for k in kernels) and any("direct_copy" in k for k in kernels)
    assert not any("xmma_fprop" in k or "clamp" in k for k in kernels)
    assert not [
        f for f in diagnosis("reference").program_findings if f.cause == "layout-conversion"
    ]


@pytest.mark.parametrize("fixture", ["reference", "calib", "torch_cases"])
def test_json_validates_against_the_contract(fixture: str) -> None:
    document = json.loads(json.dumps(diagnosis(fixture).to_json(), allow_nan=False))
    jsonschema.validate(document, SCHEMA)
    durations = [k["duration_ns"] for k in document["kernels"]]
    assert durations == sorted(durations, reverse=True)
    for k in document["kernels"]:
        # substantial findings (a tenth of the kernel's time or more) first, by time saved
        big = [f for f in k["findings"] if (f["recoverable"] or 0) >= 0.1]
        assert k["findings"][: len(big)] == big
        assert [f["saved_ns"] for f in big] == sorted((f["saved_ns"] for f in big), reverse=True)
    assert math.isclose(sum(k["time_share"] for k in document["kernels"]), 1.0, rel_tol=1e-4)


def test_missing_metrics_are_skipped_not_a_crash(data_dir: Path) -> None:
    """A duration-only export: every rule that needs more is reported as skipped, with the
    reason."""
    d = diagnose(nsdiag.load(data_dir / "console/duration_raw.csv.gz"))
    # only the launch-overhead rules, which need nothing but durations and launch counts
    launch_rules = ("NSD304", "NSD306")
    assert all(all(f.rule in launch_rules for f in k.findings) for k in d.kernels)
    reasons = {s.rule: s.reason for s in d.skipped_rules}
    assert reasons["NSD101"].startswith("missing dram_throughput_pct")
    assert all(k.bound in ("launch", "unknown") for k in d.kernels)
    jsonschema.validate(json.loads(json.dumps(d.to_json(), allow_nan=False)), SCHEMA)


def test_ncu_second_opinion_is_attached(data_dir: Path) -> None:
    d = diagnose(nsdiag.load(data_dir / "reference/details.csv.gz"))
    float4 = next(k for k in d.kernels if "float4_kernel" in k.name)
    rules = {r.rule for r in float4.ncu_rules}
    assert rules and all(r.type in ("OPT", "WRN") for r in float4.ncu_rules)
    assert float4.findings[0].rule == "NSD101"


def test_nsdiag_leads_with_the_roof_where_ncu_leads_with_idle_pipes(data_dir: Path) -> None:
    """ncu ranks 'all compute pipelines are under-utilized' first on a kernel at the DRAM roof;
    nsdiag's first finding is the real limiter, and it overrides ncu's uncoalescing estimate on
    the scalar fused kernel (whose float4 rewrite measured only a few percent faster): at 95% of
    the copy ceiling it is near the roof, and nsdiag reports nothing on it
    (tests/test_memory_ceiling.py)."""
    d = diagnose(nsdiag.load(data_dir / "reference/details.csv.gz"))
    float4 = next(k for k in d.kernels if "float4_kernel" in k.name)
    assert float4.ncu_rules[0].rule == "HighPipeUtilization"
    assert float4.findings[0].cause == "dram-bandwidth-saturated"
    fused = next(k for k in d.kernels if "fused_kernel" in k.name)
    assert any(
        r.rule == "UncoalescedGlobalAccess" and (r.speedup or 0) > 50 for r in fused.ncu_rules
    )
    assert fused.findings == ()


@pytest.mark.parametrize(
    "dram, l2, limiter, close",
    [
        (59.81, 72.89, "l2", True),  # the AdamW kernel of tests/data/profile/layers8, full set
        (60.35, 73.35, "dram", True),  # the same launch, targeted run
        (53.84, 66.79, "l2", False),  # DRAM 6 points under: L2 it is, no hedging
        (80.26, 84.09, "dram", False),  # DRAM saturated beyond doubt
        (
            61.00,
            58.00,
            "dram",
            True,
        ),  # DRAM just over, L2 under: a busiest-unit close call, no limiter one
    ],
)
def test_a_limiter_decided_within_five_points_of_the_threshold_is_called_close(
    dram: float, l2: float, limiter: str, close: bool
) -> None:
    from nsdiag.analysis.kernel.verdict import classify

    v = classify(
        {
            "dram_throughput_pct": dram,
            "l2_throughput_pct": l2,
            "l1_throughput_pct": 20.0,
            "pipe_fma_pct": 10.0,
            "duration_ns": 50_000.0,
        }
    )
    assert (v.bound, v.limiter, v.close_call) == ("memory", limiter, close)
    assert ("limiter a close call" in v.note) == (close and l2 >= 60)
    if close and l2 >= 60:
        assert f"DRAM at {dram:.0f}%" in v.note and "L2" in v.note


def test_a_bound_near_the_threshold_is_called_close_but_a_small_grid_alone_is_not() -> None:
    from nsdiag.analysis.kernel.verdict import classify

    near = classify(
        {
            "dram_throughput_pct": 58.0,
            "pipe_fma_pct": 10.0,
            "duration_ns": 50_000.0,
            "grid_size": 1000.0,
            "sm_count": 132.0,
        }
    )
    small = classify(
        {
            "dram_throughput_pct": 20.0,
            "pipe_fma_pct": 10.0,
            "duration_ns": 50_000.0,
            "grid_size": 64.0,
            "sm_count": 132.0,
        }
    )
    assert (near.bound, near.close_call) == ("latency", True)
    assert (small.bound, small.limiter, small.close_call) == ("latency", "small_grid", False)
