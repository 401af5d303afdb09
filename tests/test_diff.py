"""`nsdiag diff` on the H200 recordings: kernels matched across a fix (renamed GEMMs, fused
elementwise chains), findings resolved with their predicted saving next to the measured one,
consistent with benchmarks/predictions.py, and the JSON contract."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import nsdiag
from nsdiag.analysis.diff import Diff, compare, with_gate
from nsdiag.analysis.diff.stats import Spread, p_greater
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.filters import keep_nvtx_range
from nsdiag.errors import InputError
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.names import normalized
from nsdiag.render.diff.html import render_diff_html
from nsdiag.render.diff.markdown import render_diff_markdown
from nsdiag.render.diff.text import render_diff_text
from tests.conftest import DATA, load_benchmark
from tests.conftest import side as recorded_side

SCHEMA = json.loads((Path(__file__).parents[1] / "docs/diff.schema.json").read_text())
PROGRAMS = "programs"


@cache
def side(recording: str, nvtx: str | None = None) -> tuple[tuple[str, ...], Any, Any]:
    if not nvtx:
        return recorded_side(recording)
    session = keep_nvtx_range(nsdiag.load(DATA / recording), nvtx)
    return (recording,), session, diagnose(session)


@cache
def diff(before: str, after: str) -> Diff:
    return compare(side(f"{PROGRAMS}/{before}"), side(f"{PROGRAMS}/{after}"))


@cache
def predictions() -> dict[str, dict[str, Any]]:
    module = load_benchmark("predictions")
    return {p.recording + "|" + p.fix: module.row(p) for p in module.PAIRS}


def prediction(recording: str, fix_starts: str) -> dict[str, Any]:
    return next(r for k, r in predictions().items() if k.startswith(f"{recording}|{fix_starts}"))


def resolved(d: Diff, rule: str) -> list[Any]:
    return [c for c in d.findings if c.finding.rule == rule and c.status == "resolved"]


# ------------------------------------------------------------------ matching


def test_lm_head_gemms_renamed_by_cublas_are_matched_by_role() -> None:
    """Padding the vocabulary to 50,304 makes cuBLAS drop the CUTLASS sm75 align1 fallbacks for
    nvjet kernels: each of the three LM-head GEMMs is matched to the kernel that replaced it at
    the same place in the step, not left as gone + new."""
    d = diff("lm_train_full", "lm_train_fixed.sqlite.gz")
    renamed = [m for m in d.matches if any("align1" in k.name for k in m.before)]
    assert len(renamed) == 3
    for m in renamed:
        assert m.method == "role" and m.role == "matrix product", m.how()
        (after,) = m.after
        assert after.name.startswith("nvjet_sm90") and parse_kernel_name(after.name).kind == "gemm"
        assert m.after_ns < 0.25 * m.before_ns  # 2.2-3.1 ms -> 0.37-0.44 ms per step
    assert len({m.after[0].index for m in renamed}) == 3
    # The nvjet kernel that already ran 8 times a step keeps its own match.
    kept = [m for m in d.matches if m.method == "signature" and "coopB_NNT" in m.before[0].name]
    assert kept and kept[0].after[0].launches_per_iteration == pytest.approx(8)


def test_elementwise_chain_is_matched_to_the_fused_triton_kernel() -> None:
    d = diff("elementwise", "elementwise_fixed.sqlite.gz")
    fused = [m for m in d.matches if m.method == "fused"]
    assert len(fused) == 1
    (m,) = fused
    assert {parse_kernel_name(k.name).kind for k in m.before} == {"elementwise"}
    assert len(m.before) == 2 and sum(k.launches_per_iteration for k in m.before) == 8
    assert [k.name for k in m.after] == ["triton_poi_fused_add_mul_0"]
    assert not [m for m in d.matches if m.method in ("gone", "new")]


def test_torch_compile_regroups_batch_norm_kernels_into_triton_ones() -> None:
    d = diff("infer_cnn", "infer_cnn_compiled")
    regrouped = max((m for m in d.matches if m.method == "regrouped"), key=lambda m: m.before_ns)
    assert any("batch_norm" in k.name for k in regrouped.before)
    assert all(k.name.startswith("triton_") for k in regrouped.after)
    # the cuDNN convolutions that did not change stay matched as the same kernels
    assert sum(m.method == "signature" for m in d.matches) >= 5


def test_same_recording_matches_every_kernel_to_itself() -> None:
    d = diff("lm_train_full", "lm_train_full")
    assert {m.method for m in d.matches} == {"signature"}
    assert all(m.change_ns == 0 for m in d.matches)
    assert {c.status for c in d.findings} == {"persists"}


# ------------------------------------------------------------------ region and predictions


@pytest.mark.parametrize(
    "before, after, rule, recording, fix",
    [
        ("lm_train_full", "lm_train_fixed.sqlite.gz", "NSD208", "programs/lm_train_full", "voc"),
        ("elementwise", "elementwise_fixed.sqlite.gz", "NSD410", "programs/elementwise", "torch"),
        ("step_range", "step_range_fixed.sqlite.gz", "NSD406", "programs/step_range", "the step"),
    ],
)
def test_resolved_first_finding_agrees_with_predictions_py(
    before: str, after: str, rule: str, recording: str, fix: str
) -> None:
    """The first finding is resolved; its predicted saving is predictions.py's, and the
    region's measured change (from the traces) is within 10% of what the programs timed."""
    d = diff(before, after)
    row = prediction(recording, fix)
    first = d.before.diagnosis.top_changes(1)[0]  # what nsdiag says first: a change
    assert rule in first.rules
    found = resolved(d, rule)
    assert found
    predicted = sum(c.predicted_ns for c in found) / 1e6
    assert predicted == pytest.approx(row["predicted_ms"], rel=1e-3)
    measured = -d.region.change_ns / 1e6
    assert measured == pytest.approx(row["measured_ms"], rel=0.1)
    assert d.check is not None and 0.8 <= d.check.ratio <= 1.25


def test_each_misaligned_gemm_saved_what_was_predicted() -> None:
    """Measured on the GEMM itself (its time before minus its replacement's), each NSD208
    prediction holds within 10%."""
    d = diff("lm_train_full", "lm_train_fixed.sqlite.gz")
    found = resolved(d, "NSD208")
    assert len(found) == 3
    for c in found:
        assert c.measured_on == "its kernels" and c.counted
        assert 0.9 <= c.ratio <= 1.1, (c.predicted_ns, c.measured_ns)


def test_idle_time_that_shrinks_counts_with_its_drop() -> None:
    """Workers and pinned memory shrink the DataLoader's CPU-bound idle time (119 -> 3 ms a
    step): the finding has changed, its drop is the expected saving, and the total holds
    (predictions.py: NSD407 + NSD401 122 ms predicted, 128 ms measured)."""
    d = diff("train_loader", "train_loader_fixed.sqlite.gz")
    idle = next(c for c in d.findings if c.finding.rule == "NSD407")
    assert idle.status == "changed" and idle.expected_ns > 100e6 and idle.counted
    assert idle.ratio is None and idle.shared > 1  # the region's change is shared
    assert d.check is not None and 0.9 <= d.check.ratio <= 1.15


def test_spread_over_iterations_and_one_sided_iterations() -> None:
    d = diff("lm_train_full", "lm_train_fixed.sqlite.gz")
    assert (d.region.before.n, d.region.after.n) == (7, 24)
    assert d.region.before.low <= d.region.before.median <= d.region.before.high
    assert d.region.p_faster is not None and d.region.p_faster < 0.01
    mixed = compare(side("programs/step_range"), side("programs/elementwise"))
    assert mixed.region.unit == "mixed" and "only AFTER has iterations" in mixed.region.note


def test_reference_naive_against_float4_from_one_ncu_export() -> None:
    """No timeline: each side is the profiled GPU time of its NVTX range; the naive variant's
    five kernels are replaced by the float4 kernel, and the roofline gets an arrow."""
    d = compare(side("reference/raw.csv.gz", "naive"), side("reference/raw.csv.gz", "float4"))
    assert d.before.basis == d.after.basis == "gpu-time" and d.region.unit == "region"
    (m,) = d.matches
    assert m.method == "fused" and len(m.before) >= 4 and "float4" in m.after[0].name
    assert resolved(d, "NSD410") and d.check is not None and 0.8 <= d.check.ratio <= 1.25
    html = render_diff_html(d)
    assert "arrow(s) from a kernel" in html and "1 arrow(s)" in html


def test_nvtx_filter_needs_ranges() -> None:
    with pytest.raises(InputError, match="no kernel ran in NVTX range"):
        keep_nvtx_range(nsdiag.load(DATA / "reference/raw.csv.gz"), "nowhere")


# ------------------------------------------------------------------ gate


def test_gate_fails_on_the_real_regression_and_passes_on_the_same_recording() -> None:
    slower = with_gate(diff("elementwise_fixed.sqlite.gz", "elementwise"), 5)
    assert slower.gate is not None and not slower.gate.passed
    region = slower.gate.failed[0]
    assert region.match is None and region.change_pct > 200 and region.p_value < 1e-6
    same = with_gate(diff("elementwise", "elementwise"), 5)
    assert same.gate is not None and same.gate.passed


def test_gate_passes_two_runs_of_the_same_program() -> None:
    """Two recordings of elementwise.py (the first profile and the verify/ one): 0.7% apart,
    a difference the test even calls significant (p < 0.01) but below any sensible threshold."""
    d = with_gate(compare(side("programs/elementwise"), side("programs/verify/elementwise")), 5)
    assert d.gate is not None and d.gate.passed
    assert abs(d.gate.checks[0].change_pct) < 2


def test_gate_checks_kernels_above_the_share() -> None:
    d = with_gate(diff("lm_train_fixed.sqlite.gz", "lm_train_full"), 5, share_pct=10)
    assert d.gate is not None and not d.gate.passed
    kernels = [c for c in d.gate.checks if c.match is not None]
    assert len(kernels) == 3 and all(c.slower for c in kernels)  # the three LM-head GEMMs
    wider = with_gate(diff("lm_train_fixed.sqlite.gz", "lm_train_full"), 5, share_pct=0)
    assert len(wider.gate.checks) > len(d.gate.checks)


def test_mann_whitney() -> None:
    """Synthetic samples: the test's edge cases."""
    assert p_greater([1.0] * 4, [2.0] * 4) is None  # too few to tell
    assert p_greater([1.0] * 5, [2.0] * 5) < 0.01  # all of AFTER above all of BEFORE
    assert p_greater([1.0] * 6, [1.0] * 6) == 1.0  # identical
    assert p_greater([1, 2, 3, 4, 5, 6], [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]) > 0.1  # interleaved
    assert Spread((1.0, 2.0, 3.0, 4.0)).iqr == pytest.approx(1.5)


# ------------------------------------------------------------------ renderings and JSON


@pytest.mark.parametrize(
    "before, after",
    [
        ("lm_train_full", "lm_train_fixed.sqlite.gz"),
        ("elementwise", "elementwise_fixed.sqlite.gz"),
        ("step_range", "step_range_fixed.sqlite.gz"),
        ("train_loader", "train_loader_fixed.sqlite.gz"),
    ],
)
def test_json_validates(before: str, after: str) -> None:
    document = with_gate(diff(before, after), 5).to_json()
    text = json.dumps(document, allow_nan=False)
    jsonschema.validate(json.loads(text), SCHEMA)
    assert document["schema"] == "nsdiag.diff/1"


def test_text_markdown_and_html() -> None:
    d = with_gate(diff("lm_train_full", "lm_train_fixed.sqlite.gz"), 5)
    text = render_diff_text(d)
    assert "Region time per iteration: 21.4 ms -> 15.9 ms" in text
    assert "same library role" in text and "NSD208" in text
    assert "Prediction check" in text
    md = render_diff_markdown(d)
    assert md.startswith("# nsdiag diff") and "| BEFORE | AFTER |" in md
    html = render_diff_html(d)
    assert html.count("<script src") == 0 and "http://" not in html.split("<script>")[0]
    for chart in (
        "chart-waterfall",
        "chart-roofline",
        "chart-timeline-before",
        "chart-timeline-after",
    ):
        assert f'id="{chart}"' in html
    assert "&lt;" in html  # kernel names escaped


def test_scoped_findings_point_at_their_kernel_matches() -> None:
    """The fusion chain of elementwise.py is about the two elementwise kernels the Triton
    kernel replaced; nsys's enum casts do not hide a kernel from its ncu spelling."""
    d = diff("elementwise", "elementwise_fixed.sqlite.gz")
    (c,) = resolved(d, "NSD410")
    (fused,) = [m for m in d.matches if m.method == "fused"]
    assert c.before is not None and c.before.matches == {fused.id}
    assert c.measured_ns == pytest.approx(-fused.change_ns)
    assert normalized("void f<(cudnnKernelDataType_t)0>(int)") == normalized("void f<0>(int)")
