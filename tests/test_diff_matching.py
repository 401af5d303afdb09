"""`nsdiag diff` matching what a change does (issue 28): the same GEMMs in another precision,
a kernel launched more often, the prediction check one row per change, the waterfall's steps
one per match, and a warning when the two sides are not one program. H200 recordings only:
the ViT-B/16 training step in fp32 (third_party/vit_fp32) and under bf16 autocast
(vit_bf16.sqlite.gz), Llama, the reference pipeline serial against stream-split, and the
programs under tests/data/programs."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from nsdiag.render.diff.charts import waterfall
from nsdiag.render.diff.markdown import render_diff_markdown
from nsdiag.render.diff.text import render_diff_text
from tests.test_diff_demo import diff  # one cached diagnosis per recording

SCHEMA = json.loads((Path(__file__).parents[1] / "docs/diff.schema.json").read_text())
FP32, BF16 = "third_party/vit_fp32", "third_party/vit_bf16.sqlite.gz"


def test_fp32_gemms_are_matched_to_their_bf16_kernels() -> None:
    """bf16 autocast: cuBLAS runs other kernels for every matrix product (sm80 fp32 xmma and
    CUTLASS simt SGEMMs -> nvjet), one bf16 kernel covering the jobs of several fp32 ones, and
    the iterations the region finder chose start at other steps (the fp32 one at the forward
    pass, the bf16 one at the optimizer). Each matrix product and attention kernel is matched by
    role, none gone or new (the issue: 47 gone, 61 new)."""
    d = diff(FP32, BF16)
    unpaired = [m for m in d.matches if m.method in ("gone", "new")]
    assert not [k for m in unpaired for k in (*m.before, *m.after) if k.role is not None]
    assert len(unpaired) <= 12
    gemms = [m for m in d.matches if m.method == "role" and m.role == "matrix product"]
    fp32 = {k.index for m in gemms for k in m.before}
    assert len(fp32) == sum(k.role == "matrix product" for k in d.before.kernels)
    after = [k.name for m in gemms for k in m.after]
    assert all(n.startswith("nvjet_sm90") or "cutlass__5x_cudnn" in n for n in after), after
    launches = sum(m.launches("before") for m in gemms)
    assert launches == pytest.approx(sum(m.launches("after") for m in gemms))  # 149 a step
    grouped = [m for m in gemms if len(m.before) > 1]
    assert grouped and "paired launch by launch" in grouped[0].how()
    attention = [m for m in d.matches if m.method == "role" and m.role == "attention"]
    assert {k.name[:12] for m in attention for k in m.before} == {"fmha_cutlass"}
    assert sum(m.before_ns for m in gemms) / sum(m.after_ns for m in gemms) > 10


def test_prediction_check_is_one_row_per_change_as_ranked() -> None:
    """bf16 resolves nine NSD204 findings of one change (turn on TF32 or bf16): one row for it,
    in BEFORE's ranking, not one row per GEMM kernel."""
    d = diff(FP32, BF16)
    rows = d.by_change
    ranks = [r.rank for r in rows]
    assert ranks == sorted(ranks) and len({r.key for r in rows}) == len(rows)
    (precision,) = [r for r in rows if r.key == "precision:tf32-or-bf16"]
    assert precision.rank == 1 and precision.made and precision.findings == 9
    # (10 fp32 GEMMs fire NSD204; one is too thin for its tiles: NSD206 supersedes it there)
    assert precision.predicted_ns is not None and precision.measured_ns is not None
    text = render_diff_text(d)
    assert text.count("NSD204") == 1, text
    assert "Changes of BEFORE, as ranked" in text
    md = render_diff_markdown(d)
    assert md.count("NSD204") == 1
    document = d.to_json()
    jsonschema.validate(json.loads(json.dumps(document, allow_nan=False)), SCHEMA)
    assert document["prediction_by_change"][0]["key"] == "precision:tf32-or-bf16"


def test_launch_count_change_shows_per_launch_and_per_iteration() -> None:
    """Stream-split runs the float4 kernel on 16 chunks a call (10 -> 160 launches): +58% per
    call, -90% per launch. Both are shown; the per-call total alone calls the kernel slower."""
    d = diff(
        "diff_demo/serial_pageable",
        "diff_demo/stream_split",
        "nvtx:serial_pageable",
        "nvtx:stream_split",
    )
    (m,) = [m for m in d.matches if m.after and "float4_kernel" in m.after[0].name]
    assert m.change_ns > 0 and m.launches("after") == 16 * m.launches("before")
    assert m.per_launch_change_pct is not None and m.per_launch_change_pct < -80
    row = next(r for r in d.to_json()["kernels"] if r["id"] == m.id)
    assert row["launches_before"] == 1 and row["launches_after"] == 16
    assert row["per_launch_change_pct"] == pytest.approx(m.per_launch_change_pct)
    text = render_diff_text(d)
    assert "a launch (-90" in text.replace("\n", " ").replace("│", " ").replace("  ", " ")


def test_waterfall_steps_of_kernels_sharing_a_short_name_stay_apart() -> None:
    """Plotly draws the steps of one category as one bar: two CUTLASS SGEMMs of the ViT step
    shortened to one name became one step the height of both."""
    d = diff(FP32, BF16)
    fig = waterfall(d)
    assert fig is not None
    labels = list(fig.data[0].x)
    assert len(set(labels)) == len(labels), labels
    steps = fig.data[0].y
    assert sum(steps[:-1]) == pytest.approx(steps[-1], rel=1e-6)  # BEFORE + changes = AFTER


@pytest.mark.parametrize(
    "before, after",
    [
        (FP32, "third_party/llama_eager.sqlite.gz"),
        ("programs/elementwise", "programs/lm_train_full"),
        ("programs/infer_cnn", "programs/train_loader"),
    ],
)
def test_unrelated_programs_are_flagged(before: str, after: str) -> None:
    d = diff(before, after)
    assert d.warnings and any("one program" in w or "not the same" in w for w in d.warnings)
    assert d.warnings[0] in render_diff_text(d).replace("\n", " ") or "warning:" in (
        render_diff_text(d)
    )
    assert d.to_json()["warnings"] == list(d.warnings)


@pytest.mark.parametrize(
    "before, after",
    [
        (FP32, BF16),
        ("programs/elementwise", "programs/elementwise_fixed.sqlite.gz"),
        ("programs/infer_cnn", "programs/infer_cnn_compiled"),
        ("diff_demo/naive", "diff_demo/float4"),
        ("third_party/llama_eager.sqlite.gz", "third_party/llama_sdpa.sqlite.gz"),
    ],
)
def test_a_fix_of_one_program_is_not_flagged(before: str, after: str) -> None:
    assert diff(before, after).warnings == ()
