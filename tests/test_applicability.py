"""Advice that applies (issue 41 item 1, analysis/records/applicability.py): no change is offered
whose requirement fails, on recordings that must not get it."""

from __future__ import annotations

from nsdiag.analysis.changes import group_changes
from nsdiag.model.kernel_owner import library_of
from tests.conftest import diagnosis

REWRITE = "Rewrite or tune"


def test_library_kernels_are_never_told_to_be_rewritten() -> None:
    for recording in ("third_party/vit_fp32", "idioms/copy_feed", "programs/infer_cnn"):
        for change in diagnosis(recording).changes:
            if not change.key.startswith("kernel-rewrite:"):
                continue
            kernel = change.key.split(":", 1)[1]
            if library_of(kernel) is not None:
                assert not change.title.startswith(REWRITE), (recording, change.title)
                assert "nsdiag cannot rewrite it" in change.fix or "torch.compile" in change.fix
                assert "__launch_bounds__" not in change.fix


def test_the_users_own_kernel_is_still_a_rewrite() -> None:
    # the calibration's scalar copy, compiled by the user (the reference's fused kernel, 95% of
    # the copy ceiling, is near the roof: no finding, issue 41)
    changes = diagnosis("calib/raw.csv.gz").changes
    own = [c for c in changes if "uncoalesced_global_access_good" in c.key]
    assert own and own[0].title.startswith(REWRITE)
    assert library_of("nsdiag::fused_kernel(const float *, float *, long, float, float)") is None


def test_channels_last_needs_convolutions() -> None:
    found = diagnosis("programs/infer_cnn")  # a ResNet-50: conversions around convolutions
    (layout,) = [c for c in found.changes if c.key == "channels-last"]
    assert "channels_last" in layout.title
    # the same findings in a program without convolutions: the conversions are transposes
    kernels = list(found.kernels)
    program = list(found.program_findings)
    changes = group_changes(kernels, program, found.wall_ns, convolutions=False)
    (copies,) = [c for c in changes if c.key == "channels-last"]
    assert "channels_last" not in copies.title and "no convolutions" in copies.fix


def test_a_too_thin_matrix_product_is_not_told_to_use_tensor_cores() -> None:
    found = diagnosis("third_party/vit_fp32")
    thin = [k for k in found.kernels if any(f.rule == "NSD206" for f in k.findings)]
    assert thin
    for k in thin:
        assert "NSD204" not in {f.rule for f in k.findings}
        assert any(s.rule == "NSD204" and "superseded" in s.reason for s in k.skipped)
    # its fp32 twins of a healthy shape keep NSD204
    assert any("NSD204" in {f.rule for f in k.findings} for k in found.kernels)
