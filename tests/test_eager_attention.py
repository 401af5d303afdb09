"""Eager attention (analysis/program/score_chains.py, attention.py) on transformers' Llama recorded
on the H200 (tests/data/third_party): the change is one, fused attention, with the saving the
switch to SDPA measured; programs that already use fused attention are left alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.score_chains import attention_rows
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.model.kernel_facts import parse_kernel_name
from tests.conftest import DATA, diagnosis


def test_eager_llama_is_told_to_use_fused_attention_first_with_the_measured_saving() -> None:
    """8 layers at batch 8 of 2,048 tokens: SDPA measured 174.4 -> 71.7 ms a step under nsys and
    172.1 -> 70.5 ms without a profiler (tests/data/third_party/logs)."""
    d = diagnosis("third_party/llama_big_eager.sqlite.gz")
    first = d.top_changes(1)[0]
    assert first.rules == ("NSD412",), [c.rules for c in d.top_changes(3)]
    assert "scaled_dot_product_attention" in first.fix
    per_step = (first.saved_ns or 0.0) / d.iterations / 1e6
    assert 0.5 <= 102.7 / per_step <= 2.0, per_step
    (f,) = [f for f in d.program_findings if f.rule == "NSD412"]
    assert "16 softmax chains per iteration (8 forward, 8 backward)" in f.message


def test_the_fusion_analysis_leaves_the_score_kernels_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the eager-attention analysis the fusion analysis would offer the score chains for
    fusion too; with it, what fusion gives up is at most what NSD412 claims, and the changes
    together stay inside the region."""
    recording = "third_party/llama_big_eager.sqlite.gz"
    d = diagnosis(recording)
    (attention,) = [f for f in d.program_findings if f.rule == "NSD412"]

    def fused(found: Diagnosis) -> float:
        return sum(f.saved_ns or 0.0 for f in found.program_findings if f.rule == "NSD410")

    def none(ctx: ProgramContext) -> tuple[np.ndarray, np.ndarray]:
        n = len(ctx.launches)
        return np.zeros(n, dtype=bool), np.full(n, -1)

    monkeypatch.setattr(ProgramContext, "attention", property(none))
    alone = diagnose(nsdiag.load(DATA / recording))
    assert fused(alone) > fused(d) + 1e6  # the score chains were fusion chains before
    assert fused(alone) - fused(d) <= (attention.saved_ns or 0.0)
    assert sum(c.saved_ns or 0.0 for c in d.changes) <= d.wall_ns


@pytest.mark.parametrize(
    "recording",
    [
        "third_party/llama_big_sdpa.sqlite.gz",  # the fix applied
        "third_party/vit_fp32",  # timm's fused attention (fmha kernels)
        "third_party/bert_serve",  # transformers' SDPA default
        "programs/lm_train_full",  # its loss's log-softmax is not attention
    ],
)
def test_programs_with_fused_attention_get_no_such_finding(recording: str) -> None:
    d = diagnosis(recording)
    assert not [f for f in d.program_findings if f.rule == "NSD412"]


def _launches(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": names,
            "kind": [parse_kernel_name(n).kind or "" for n in names],
            "process_id": 1,
            "stream": 7,
            "duration_ns": 1000.0,
        }
    )


GEMM = "nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NTT"
ADD = (
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char *, (int)3>>(int, T2, T3)"
)
SOFTMAX = "void <unnamed>::softmax_warp_forward<float, float, float, (int)10, (bool)0, (bool)0>"
LOG_SOFTMAX = (
    "void at::native::<unnamed>::cunn_SoftMaxForward<(int)4, float, float, float, "
    "at::native::<unnamed>::LogSoftMaxForwardEpilogue>(T4 *, const T2 *, int)"
)


def test_a_chain_is_the_kernels_between_the_gemms_around_a_softmax() -> None:
    names = [GEMM, ADD, SOFTMAX, ADD, GEMM, ADD, GEMM]
    inside, chain = attention_rows(_launches(names))
    assert inside.tolist() == [False, True, True, True, False, False, False]
    assert set(chain[inside]) == {0}


def test_a_log_softmax_or_a_softmax_far_from_a_gemm_is_not_attention() -> None:
    inside, _ = attention_rows(_launches([GEMM, LOG_SOFTMAX, GEMM]))
    assert not inside.any()
    far = [GEMM, *([ADD] * 9), SOFTMAX, ADD, GEMM]
    inside, _ = attention_rows(_launches(far))
    assert not inside.any()
    inside, _ = attention_rows(_launches([ADD, SOFTMAX, ADD, GEMM]))
    assert not inside.any()
    assert np.asarray(attention_rows(_launches([]))[0]).size == 0
