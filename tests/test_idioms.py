"""Issue 37 on the H200 recordings of tests/data/idioms (benchmarks/programs, provenance in
tests/data/README.md): the first change of each program as written is the fix that measurably
helped most, it names the Python function its work sits in, and its predicted saving is within
2x of the saving measured with the fix applied (nsdiag diff of the traced pair, or the program's
own per-iteration timing where the two sides' iterations differ). Recordings without PyTorch
ranges keep their answers."""

from __future__ import annotations

import gzip
import json

import pytest

from nsdiag.analysis.diff import compare
from nsdiag.analysis.records.changes import Change
from nsdiag.analysis.records.code import KERNEL_NAMES, PYTORCH_RANGES
from nsdiag.analysis.records.idioms import IDIOMS
from tests.conftest import DATA, diagnosis, side

IDIOM = "idioms"


def first(recording: str) -> Change:
    return diagnosis(f"{IDIOM}/{recording}").changes[0]


def per_iteration(change: Change, recording: str) -> float:
    n = diagnosis(f"{IDIOM}/{recording}").iterations
    assert change.saved_ns is not None and n
    return change.saved_ns / n


def measured_by_diff(before: str, after: str) -> float:
    """The region's time saved per iteration, as nsdiag diff measures it."""
    found = compare(side(f"{IDIOM}/{before}"), side(f"{IDIOM}/{after}"))
    return -found.region.change_ns


def median_ms(log: str) -> float:
    """A program's own median iteration time (its NSDIAG_RESULT line) in a recorded log."""
    path = DATA / IDIOM / "logs" / log
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        lines = [line for line in f if line.startswith("NSDIAG_RESULT ")]
    return float(json.loads(lines[0].split(" ", 1)[1])["median_ms"])


def within_2x(predicted: float, measured: float) -> bool:
    return measured > 0 and 0.5 <= predicted / measured <= 2.0


def test_the_per_parameter_optimizer_is_named_and_fused_first() -> None:
    change = first("optim_step")
    assert change.key == "fused-optimizer" and change.rules == ("NSD413",)
    assert "fused=True" in change.fix and "torch.optim.AdamW" in change.fix
    assert change.code is not None and change.code.source == PYTORCH_RANGES
    site = change.code.sites[0]
    assert site.function == "torch.optim.AdamW.step"
    # 1,216 of the step's 1,992 launches, 26 ms of host time per step, on the H200
    assert 1100 <= site.launches <= 1300 and change.code.total_launches > 1900
    assert site.host_ns is not None and 20e6 < site.host_ns < 30e6
    measured = measured_by_diff("optim_step", "optim_fused.sqlite.gz")
    assert within_2x(per_iteration(change, "optim_step"), measured)
    plain = (median_ms("plain_optim.log") - median_ms("plain_optim_fused.log")) * 1e6
    assert within_2x(per_iteration(change, "optim_step"), plain)


def test_the_launch_bound_rest_is_what_the_optimizer_leaves() -> None:
    changes = {c.key: c for c in diagnosis(f"{IDIOM}/optim_step").changes}
    without = {c.key: c for c in diagnosis(f"{IDIOM}/optim_nsys_only.sqlite.gz").changes}
    graph, before = changes["cuda-graph"], without["cuda-graph"]
    assert graph.saved_ns is not None and before.saved_ns is not None
    # the optimizer's idle time is NSD413's: launch-bound keeps the rest, not the whole
    assert graph.saved_ns < 0.6 * before.saved_ns
    total = graph.saved_ns + (changes["fused-optimizer"].saved_ns or 0.0)
    assert total == pytest.approx(before.saved_ns, rel=0.1)


def test_a_recording_without_pytorch_ranges_keeps_its_answer_and_says_what_they_add() -> None:
    found = diagnosis(f"{IDIOM}/optim_nsys_only.sqlite.gz")
    assert [c.key for c in found.changes[:2]] == ["cuda-graph", "program:NSD407:region"]
    assert all(f.rule != "NSD413" for f in found.program_findings)
    code = found.changes[0].code
    assert code is not None and not code.sites
    assert "--pytorch=functions-trace" in code.note
    # no copy to the GPU ends the host's stretches: not the input pipeline, whatever the ranges
    assert (
        "DataLoader" not in found.changes[1].fix and "not preparing input" in found.changes[1].fix
    )


def test_host_work_in_a_program_without_a_dataloader_gets_no_dataloader_advice() -> None:
    change = next(c for c in diagnosis(f"{IDIOM}/optim_step").changes if "NSD407" in c.rules)
    assert "DataLoader" not in change.fix and "not preparing input" in change.fix


def test_atomics_into_few_bins_are_counted_with_bincount() -> None:
    change = first("histogram")
    assert change.key == "idiom:count-with-bincount"
    assert {"NSD106", "NSD107"} <= set(change.rules)  # the kernel's two explanations, one change
    assert "torch.bincount" in change.fix and "shfl" not in change.fix
    assert change.code is not None and change.code.source == KERNEL_NAMES
    assert change.code.operators == ("Tensor.index_add_",)
    finding = next(f for f in change.findings if f.rule == "NSD106")
    evidence = {e.metric: e.value for e in finding.evidence}
    assert evidence["l2_atomic_busy_max_pct"] > 10 * evidence["l2_atomic_busy_pct"]
    measured = measured_by_diff("histogram", "hist_bincount.sqlite.gz")
    assert within_2x(per_iteration(change, "histogram"), measured)


def test_pinned_and_prefetched_batches_are_one_change() -> None:
    change = first("copy_feed")
    assert change.key == "idiom:pin-and-prefetch"
    assert set(change.rules) == {"NSD401", "NSD402"}
    assert "pin_memory" in change.fix and "non_blocking=True" in change.fix
    assert change.code is not None and change.code.sites[0].function == "torch.Tensor.to"
    keys = [c.key for c in diagnosis(f"{IDIOM}/copy_feed").changes]
    assert not {"program:NSD401:region", "program:NSD402:region"} & set(keys)
    measured = measured_by_diff("copy_feed", "copy_prefetch.sqlite.gz")
    assert within_2x(per_iteration(change, "copy_feed"), measured)


def test_a_decode_loop_graphs_its_forwards_and_keeps_the_host_work_between_them() -> None:
    change = first("decode.sqlite.gz")
    assert change.key == "idiom:graph-the-forward"
    assert 'cache_implementation="static"' in change.fix
    (finding,) = change.findings
    assert "between them" in finding.message and "96 times" in finding.message
    site = change.code.sites[0] if change.code else None
    assert site is not None and site.function == "torch.nn.modules.Module.__call__"
    # the host's per-token work outside the forwards is left out of the saving
    launch_idle = (
        finding.details["launch_idle_ns"] / diagnosis(f"{IDIOM}/decode.sqlite.gz").iterations
    )
    assert per_iteration(change, "decode.sqlite.gz") < 0.98 * launch_idle
    # the static cache's requests are graph replays: the diff's iterations differ (tokens, not
    # requests), so the measured side is the program's own time per request under nsys
    traced = (median_ms("tl_decode.log") - median_ms("tl_decode_static_nsys.log")) * 1e6
    assert within_2x(per_iteration(change, "decode.sqlite.gz"), traced)


def test_each_program_idiom_names_its_rule_and_each_kernel_idiom_its_causes() -> None:
    for idiom in IDIOMS:
        assert idiom.rule or idiom.causes, idiom.slug
        assert idiom.fix[0].isupper() and idiom.evidence and idiom.saving


@pytest.mark.parametrize("recording", ["programs/nvtx_phases.sqlite.gz"])
def test_a_ranges_syncs_are_credited_to_that_range(recording: str) -> None:
    found = diagnosis(recording)
    syncs = {f.range: f for f in found.program_findings if f.rule == "NSD403"}
    assert "sync_every_op" in syncs
    # 200 torch.cuda.synchronize() a step in sync_every_op: its own, not another phase's
    assert syncs["sync_every_op"].details["sync_calls"] / found.iterations == pytest.approx(200)
    assert "x1400" in syncs["sync_every_op"].message  # 200 x 7 steady iterations
    launch = [f for f in found.program_findings if f.rule == "NSD406"]
    assert launch and launch[0].range == "tiny_launches"
    pinned = [f for f in found.program_findings if f.range == "pinned_overlapped"]
    assert not pinned  # the healthy phase has nothing to fix


def test_every_change_of_a_pytorch_program_names_code_or_says_why_not() -> None:
    for recording in ("optim_step", "copy_feed", "histogram", "decode.sqlite.gz"):
        for change in diagnosis(f"{IDIOM}/{recording}").changes[:5]:
            assert change.code is not None, (recording, change.key)
            assert change.code.sites or change.code.operators or change.code.note


def test_explain_names_each_changes_code_in_words() -> None:
    """The terminal says whose code a change is about: the function and its share of the
    launches where the PyTorch ranges were recorded; what the ranges would add only with -v."""
    from nsdiag.render import fmt

    first_change = first("optim_step")
    line = fmt.code(first_change)
    assert line is not None and line.startswith("torch.optim.AdamW.step")
    assert "launches per iteration" in line and "ms of host time" in line
    without = diagnosis(f"{IDIOM}/optim_nsys_only.sqlite.gz").changes[0]
    assert fmt.code(without) is None
    verbose = fmt.code(without, verbose=True)
    assert verbose is not None and "--pytorch=functions-trace" in verbose
