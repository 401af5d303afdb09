"""Findings as changes (analysis/changes.py, analysis/marginal.py): one ranked entry per change
with its whole saving, savings never counted twice, the total never past the region. On the
recordings under tests/data, and on synthetic kernels for the greedy walk."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from nsdiag.analysis.changes import group_changes
from nsdiag.analysis.diff import compare
from nsdiag.analysis.records.causes import KINDS, SWITCH, cause_of
from nsdiag.analysis.records.changes import Change
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.records.findings import Finding, FusionChain
from nsdiag.render import fmt
from nsdiag.render.text import render_text
from tests.conftest import DATA
from tests.test_calibration import diagnosis, kernel

SCHEMA = json.loads((Path(__file__).parents[1] / "docs/diagnosis.schema.json").read_text())
RECORDINGS = [
    "reference",
    "calib",
    "torch_cases",
    "diff_demo/naive",
    "programs/lm_train_full",
    "programs/infer_cnn",
    "programs/train_loader",
    "programs/step_range",
    "programs/elementwise",
    "multi_gpu/verify/ddp_straggler",
    "multi_gpu/ddp_straggler.sqlite.gz",
    "nsys/pipeline.sqlite.gz",
]
SLACK_NS = 1e-3


def total(d: Diagnosis) -> float:
    return sum(c.saved_ns or 0.0 for c in d.changes)


# ------------------------------------------------------------------ on the recordings


@pytest.mark.parametrize("recording", RECORDINGS)
def test_changes_never_add_past_the_region(recording: str) -> None:
    d = diagnosis(recording)
    assert d.changes
    assert total(d) <= d.wall_ns + SLACK_NS
    document = json.loads(json.dumps(d.to_json(), allow_nan=False))
    jsonschema.validate(document, SCHEMA)
    assert sum(c["saved_ns"] or 0 for c in document["changes"]) <= document["wall_ns"] + 1
    saved = [c.saved_ns for c in d.changes if c.saved_ns is not None]
    assert saved == sorted(saved, reverse=True)  # each after the ones above it
    assert all(c.saved_ns is None for c in d.changes[len(saved) :])  # no estimate last


@pytest.mark.parametrize("recording", RECORDINGS)
def test_a_kernels_time_is_counted_once(recording: str) -> None:
    """Over every change, what they save on one kernel is at most its time in the region."""
    d = diagnosis(recording)
    on: dict[int, float] = {}
    for c in d.changes:
        for t in c.kernels:
            if t.kernel_id is not None:
                on[t.kernel_id] = on.get(t.kernel_id, 0.0) + (t.saved_ns or 0.0)
    times = {k.id: k.total_duration_ns for k in d.kernels}
    assert all(saved <= times[kid] + SLACK_NS for kid, saved in on.items())


@pytest.mark.parametrize("recording", RECORDINGS)
def test_a_switch_is_one_change_wherever_it_fires(recording: str) -> None:
    """Every finding of a cause a global switch or shape change fixes is in one change."""
    d = diagnosis(recording)
    owner = {id(f): c.key for c in d.changes for f in c.findings}
    findings = [f for k in d.kernels for f in k.findings] + list(d.program_findings)
    assert len(owner) == len(findings)  # each finding in exactly one change
    for f in findings:
        kind = KINDS.get(cause_of(f.cause, "program").change)
        if kind is not None and kind.group == SWITCH:
            assert owner[id(f)] == kind.key


def test_the_reference_run_no_longer_counts_the_gemm_twice() -> None:
    """The README's reference run: the rule hits add up past the profiled time (the fusion
    chains and the K=3 GEMM's rewrite all count the GEMM); as changes they do not, and the
    rewrite counts only what the chains leave of the GEMM."""
    d = diagnosis("reference")
    hits = sum(f.saved_ns or 0.0 for _, f in d.top_findings(10**6))
    assert hits > 1.1 * d.wall_ns
    assert total(d) <= d.wall_ns
    first, second = d.changes[:2]
    assert {first.key, second.key} == {"program:NSD410:naive", "program:NSD410:compiled"}
    # The chains run in different ranges: neither takes the other's launches of the GEMM.
    for c in (first, second):
        assert c.saved_ns == pytest.approx(c.findings[0].saved_ns)
    gemm = kernel("reference", "tilesize64x32x8")
    rewrite = next(c for c in d.changes if c.key == f"kernel-rewrite:{gemm.name}")
    assert rewrite.summed_ns == pytest.approx(max(f.saved_ns or 0 for f in gemm.findings))
    assert rewrite.saved_ns < 0.2 * rewrite.summed_ns
    assert set(rewrite.after) == {first.key, second.key}


def test_misaligned_gemms_are_one_change_with_their_kernels() -> None:
    """The LM head's three fallback GEMMs: one change (pad the vocabulary), the three savings
    summed, each GEMM listed under it with its own."""
    d = diagnosis("programs/lm_train_full")
    hits = [(k, f) for k in d.kernels for f in k.findings if f.rule == "NSD208"]
    assert len(hits) == 3
    pad = d.changes[0]
    assert pad.key == "pad-dims" and pad.rules == ("NSD208",)
    assert pad.saved_ns == pytest.approx(sum(f.saved_ns for _, f in hits))
    assert {t.kernel_id for t in pad.kernels} == {k.id for k, _ in hits}
    assert {t.kernel_id: t.saved_ns for t in pad.kernels} == pytest.approx(
        {k.id: f.saved_ns for k, f in hits}
    )
    assert fmt.touches(pad, fmt.display_names(d)) == "3 GEMM kernels"
    text = render_text(d)
    assert "3 GEMM kernels" in text and "Pad matrix dimensions" in text


def test_a_change_made_in_full_is_checked_once_by_diff() -> None:
    """nsdiag diff: padding resolves the three NSD208 findings together; the prediction check
    counts the change once, for its (marginal) saving."""
    from tests.test_diff import diff

    d = diff("lm_train_full", "lm_train_fixed.sqlite.gz")
    (pad,) = [m for m in d.changes if m.change.key == "pad-dims"]
    assert pad.findings == 3 and pad.measured_on == "its kernels"
    assert pad.predicted_ns == pytest.approx(pad.summed_ns)
    assert 0.8 <= (pad.ratio or 0) <= 1.25
    assert d.check is not None and d.check.changes >= 1
    assert all(
        c.counted and c.change == "pad-dims" for c in d.findings if c.finding.rule == "NSD208"
    )


VIT = "third_party/vit_fp32"  # timm ViT-B/16 trained in fp32 (issue 25), and its TF32 twin
needs_vit = pytest.mark.skipif(
    not (DATA / VIT).exists() or not (DATA / "third_party/vit_tf32.sqlite.gz").exists(),
    reason="the ViT recordings are not in this checkout",
)


@needs_vit
def test_fp32_vit_gemms_are_one_precision_change_first() -> None:
    """The fp32 ViT: tensor-core-unused fires on each GEMM; the user's change is one (TF32 or
    bf16 autocast), first, with every GEMM under it and their savings summed."""
    d = diagnosis(VIT)
    hits = [(k, f) for k in d.kernels for f in k.findings if f.cause == "tensor-core-unused"]
    assert len(hits) >= 5
    first = d.changes[0]
    assert first.key == "precision:tf32-or-bf16"
    assert {t.kernel_id for t in first.kernels} == {k.id for k, _ in hits}
    assert first.saved_ns == pytest.approx(sum(f.saved_ns for _, f in hits))
    assert first.saved_ns > 4 * max(f.saved_ns for _, f in hits)  # not one GEMM's 5%
    assert "GEMM kernels" in fmt.touches(first, fmt.display_names(d))


@needs_vit
def test_tf32_saves_within_a_factor_of_two_of_the_precision_change() -> None:
    from tests.test_diff import side

    d = compare(side(VIT), side("third_party/vit_tf32.sqlite.gz"))
    # partly made: TF32 changed the GEMMs' precision, not the fp32 attention kernel's (which
    # the change's prediction counted too, for bf16 autocast)
    (row,) = [r for r in d.by_change if r.key == "precision:tf32-or-bf16"]
    assert row.status == "partly" and "fp32 -> tf32" in row.evidence
    measured = -d.region.change_ns
    assert row.predicted_ns is not None and 0.5 <= measured / row.predicted_ns <= 2.0
    assert d.check is not None and 0.5 <= (d.check.ratio or 0) <= 2.0


# ------------------------------------------------------------------ synthetic walks


def synthetic_kernel(kid: int, name: str, ns: float, *findings: Finding) -> KernelDiagnosis:
    base = kernel("reference", "copy_float4")
    return replace(base, id=kid, name=name, demangled=name, total_duration_ns=ns, findings=findings)


def hit(rule: str, cause: str, saved: float | None, **extra: Any) -> Finding:
    return Finding(
        rule=rule, cause=cause, title=f"{cause} title", impact=None, recoverable=None,
        message=f"{cause} message", fix=f"{cause} fix", saved_ns=saved, **extra,
    )  # fmt: skip


def by_key(changes: tuple[Change, ...]) -> dict[str, Change]:
    return {c.key: c for c in changes}


def gemm_name(i: int) -> str:
    return (
        f"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize{64 * (i + 1)}x32x8_stage3_warpsize1x2x1"
        "_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
    )


def test_fp32_gemms_are_one_precision_change() -> None:
    """Five fp32 GEMMs on CUDA cores: one change (TF32 or bf16 autocast) saving their whole
    time that tensor cores would save, with the five kernels under it."""
    gemms = [
        synthetic_kernel(i, gemm_name(i), 10_000.0, hit("NSD204", "tensor-core-unused", 5_000.0))
        for i in range(5)
    ]
    changes = group_changes(gemms, [], wall_ns=100_000.0)
    assert len(changes) == 1
    (tf32,) = changes
    assert tf32.key == "precision:tf32-or-bf16" and "TF32" in tf32.title
    assert tf32.saved_ns == pytest.approx(25_000.0) and tf32.share == pytest.approx(0.25)
    assert len(tf32.kernels) == 5 and all(
        t.saved_ns == pytest.approx(5_000.0) for t in tf32.kernels
    )
    assert tf32.fix == "tensor-core-unused fix"
    d = replace(diagnosis("reference"), kernels=tuple(gemms), program_findings=(), changes=changes)
    assert "5 GEMM kernels" in render_text(d)


def test_two_rules_on_one_kernel_count_its_time_once() -> None:
    """Two kernel-local hits on one kernel are one rewrite, and the larger saving counts (they
    explain the same lost time), not their sum."""
    k = synthetic_kernel(
        0, "kern_a", 100.0,
        hit("NSD103", "uncoalesced-global-access", 50.0),
        hit("NSD104", "shared-bank-conflicts", 30.0),
    )  # fmt: skip
    (rewrite,) = group_changes([k], [], wall_ns=1_000.0)
    assert rewrite.key == "kernel-rewrite:kern_a" and rewrite.rules == ("NSD103", "NSD104")
    assert rewrite.saved_ns == pytest.approx(50.0)
    # On a recorded kernel with two estimated hits (the reference's K=3 GEMM).
    gemm = kernel("reference", "tilesize64x32x8")
    savings = [f.saved_ns for f in gemm.findings if f.saved_ns]
    assert len(savings) >= 2
    alone = group_changes([gemm], [], wall_ns=10 * gemm.total_duration_ns)
    assert sum(c.saved_ns or 0 for c in alone) == pytest.approx(max(savings))


def test_a_second_change_on_a_kernel_saves_its_fraction_of_what_is_left() -> None:
    k = synthetic_kernel(
        0, gemm_name(0), 100.0,
        hit("NSD204", "tensor-core-unused", 60.0),
        hit("NSD301", "low-occupancy", 50.0),
    )  # fmt: skip
    first, second = group_changes([k], [], wall_ns=1_000.0)
    assert (first.key, first.saved_ns) == ("precision:tf32-or-bf16", pytest.approx(60.0))
    assert second.key.startswith("kernel-rewrite:")
    assert second.summed_ns == pytest.approx(50.0)
    assert second.saved_ns == pytest.approx(0.5 * 40.0)  # half of what TF32 left
    assert second.after == (first.key,)


def test_a_fusion_chain_takes_from_its_kernels() -> None:
    """A chain over A (100 ns) and B (50 ns) saving 120 ns takes 80 of A and 40 of B; a rewrite
    of A saving 60% of it then gets 60% of the 20 ns left."""
    a = synthetic_kernel(0, "kern_a", 100.0, hit("NSD107", "memory-latency", 60.0))
    b = synthetic_kernel(1, "kern_b", 50.0)
    chain = hit("NSD410", "fusion-candidate", 120.0, kernel="kern_a",
                kernels=("kern_a", "kern_b"), details=FusionChain(1))  # fmt: skip
    fuse, rewrite = group_changes([a, b], [chain], wall_ns=1_000.0)
    assert fuse.key == "program:NSD410:region" and fuse.saved_ns == pytest.approx(120.0)
    assert "2 operations" in fuse.title
    assert {t.name: t.saved_ns for t in fuse.kernels} == pytest.approx(
        {"kern_a": 80.0, "kern_b": 40.0}
    )
    assert rewrite.key == "kernel-rewrite:kern_a" and rewrite.saved_ns == pytest.approx(12.0)


def test_a_chain_takes_only_its_ranges_launches() -> None:
    """A kernel that ran in two ranges: a chain in one range takes from that range's time."""
    a = synthetic_kernel(0, "kern_a", 100.0)
    chains = [
        hit(
            "NSD410",
            "fusion-candidate",
            45.0,
            ranges=(r,),
            kernels=("kern_a",),
            details=FusionChain(1),
        )
        for r in ("x", "y")
    ]
    changes = group_changes([a], chains, wall_ns=1_000.0, range_times={0: {"x": 5.0, "y": 5.0}})
    assert [c.saved_ns for c in changes] == pytest.approx([45.0, 45.0])
    merged = group_changes([a], chains, wall_ns=1_000.0)  # no ranges known: one budget
    assert sum(c.saved_ns or 0 for c in merged) == pytest.approx(45.0 + 45.0 * 55.0 / 100.0)


def test_the_walk_ranks_on_what_is_left() -> None:
    """Summed, the rewrite (80) comes before the idle gaps (50); after TF32 took 90 of its
    kernel's 100 it saves 8, so the idle gaps rank second."""
    k = synthetic_kernel(
        0, gemm_name(0), 100.0,
        hit("NSD204", "tensor-core-unused", 90.0),
        hit("NSD301", "low-occupancy", 80.0),
    )  # fmt: skip
    gaps = hit("NSD404", "gpu-idle-gaps", 50.0)
    changes = group_changes([k], [gaps], wall_ns=1_000.0)
    assert [c.key.split(":")[0] for c in changes] == ["precision", "program", "kernel-rewrite"]
    assert [c.saved_ns for c in changes] == pytest.approx([90.0, 50.0, 8.0])


def test_the_region_caps_the_total() -> None:
    """Two stretches of idle time worth 70 and 60 in a region of 100: the second gets 30; its
    saving before the cap is kept for nsdiag diff."""
    found = [hit("NSD404", "gpu-idle-gaps", 70.0), hit("NSD403", "sync-heavy", 60.0)]
    first, second = group_changes([], found, wall_ns=100.0)
    assert (first.saved_ns, second.saved_ns) == pytest.approx((70.0, 30.0))
    assert second.uncapped_ns == pytest.approx(60.0) and second.share == pytest.approx(0.3)
    assert group_changes([], found, wall_ns=0.0)[0].saved_ns == 0.0


def test_unknown_causes_are_one_change_per_finding() -> None:
    """A cause not in the table (a new rule) is a change per finding, and still draws on the
    kernel's budget."""
    k = synthetic_kernel(
        0, "kern_a", 100.0,
        hit("NSD199", "brand-new-cause", 70.0),
        hit("NSD103", "uncoalesced-global-access", 50.0),
    )  # fmt: skip
    late = [hit("NSD499", "cpu-bound-ish", 20.0, ranges=("x",)) for _ in range(2)]
    changes = by_key(group_changes([k], late, wall_ns=1_000.0))
    assert set(changes) == {
        "finding:NSD199:kern_a", "kernel-rewrite:kern_a", "program:NSD499:x", "program:NSD499:x#2",
    }  # fmt: skip
    assert changes["finding:NSD199:kern_a"].kind == "finding"
    assert changes["program:NSD499:x"].title == "cpu-bound-ish title in NVTX range x"
    on_kernel = (
        changes["finding:NSD199:kern_a"].saved_ns + changes["kernel-rewrite:kern_a"].saved_ns
    )
    assert on_kernel == pytest.approx(70.0 + 0.5 * 30.0) and on_kernel <= 100.0


def test_ranks_waiting_share_one_budget() -> None:
    """In a distributed run the late rank's idle gap and the others' wait for it are one sleep:
    both come out of the step's time above the ranks' mean computation (here 100 - 30)."""
    ranks = SimpleNamespace(
        steps=[SimpleNamespace(wall_ns=100.0, compute_ns=40.0),
               SimpleNamespace(wall_ns=100.0, compute_ns=20.0)],
        iterations=1,
    )  # fmt: skip
    found = [hit("NSD420", "rank-imbalance", 57.0), hit("NSD404", "gpu-idle-gaps", 40.0)]
    balance, gaps = group_changes([], found, wall_ns=100.0, ranks=ranks)  # type: ignore[arg-type]
    assert (balance.saved_ns, gaps.saved_ns) == pytest.approx((57.0, 13.0))
    assert gaps.after == (balance.key,)
    alone = group_changes([], found, wall_ns=100.0)  # one GPU: each its own time
    assert [c.saved_ns for c in alone] == pytest.approx([57.0, 40.0])


def test_no_estimate_changes_rank_last_and_serialise() -> None:
    k = synthetic_kernel(0, "kern_a", 100.0, hit("NSD101", "dram-bandwidth-saturated", None))
    gaps = hit("NSD404", "gpu-idle-gaps", 5.0, ranges=("load",))
    changes = group_changes([k], [gaps], wall_ns=100.0)
    assert [c.saved_ns for c in changes] == [5.0, None]
    assert changes[1].estimate == "none" and changes[1].kernels[0].saved_ns is None
    document = changes[0].to_json(iterations=5)
    assert document["saved_per_iteration_ns"] == pytest.approx(1.0)
    assert document["touches"] == [
        {"kind": "range", "name": "load", "kernel_id": None, "kernel_kind": None,
         "rules": ["NSD404"], "saved_ns": 5.0, "saved_per_iteration_ns": 1.0}
    ]  # fmt: skip
