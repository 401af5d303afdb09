"""The values each program analysis gives its rule's `message` and `fix` templates: one registry.

A program rule (scope = "program") names its analysis (analysis/program/registry.py); the analysis
computes, for each finding, a value for every name registered here under its own name, and the
finding's message and fix are the rule file's templates formatted over them
(analysis/rules/template.py). Numbers are in the unit their name says (`_ms`, `_us`, `_mb`,
`_pct`); a text value is a few words computed in code where the wording depends on what was
found (a clause that appears only when a value is known), so the templates stay plain. The rule
loader accepts in a program rule's templates exactly the names of its analysis here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nsdiag.analysis.rules.template import render

if TYPE_CHECKING:  # rulespec validates templates against this registry
    from nsdiag.analysis.rules.spec import RuleSpec

SAVED_MS = "The time the fix would save in the analysed region, ms."

# Every timeline analysis reports per device and NVTX range.
RANGE_VALUES: dict[str, str] = {
    "range_label": "The NVTX range as a message names it (\"NVTX range 'step'\"), or 'work "
    "outside NVTX ranges'.",
    "range": "The NVTX range's name ('' outside ranges).",
    "device": "The GPU's device id.",
    "saved_ms": SAVED_MS,
}

PROGRAM_VALUES: dict[str, dict[str, str]] = {
    "pageable_memcpy": {
        **RANGE_VALUES,
        "copies": "Host-device copies from pageable memory of at least min_copy_bytes.",
        "copy_mb": "The bytes they move, MB.",
        "copy_ms": "The time they take, ms.",
        "copy_gb_per_s": "Their bandwidth, GB/s.",
        "pinned_gb_per_s": "The bandwidth pinned copies reach in this timeline, GB/s (n/a when "
        "there is none).",
        "assumed_pinned_speedup": "The rule's assumed_pinned_speedup (used when no pinned copy "
        "was measured).",
        "pinned_basis": "Text: what the pinned estimate rests on ('pinned copies in this "
        "timeline reach 24.0 GB/s', or 'no pinned copy to compare with: assumed 2x faster "
        "pinned').",
    },
    "no_copy_compute_overlap": {
        **RANGE_VALUES,
        "copy_ms": "Busy time of the host-device copies, ms (H2D plus D2H).",
        "h2d_ms": "Busy time of the host-to-device copies, ms.",
        "d2h_ms": "Busy time of the device-to-host copies, ms.",
        "kernel_ms": "Busy time of the kernels, ms.",
        "possible_overlap_ms": "What perfect overlap would hide: the stages' sum minus the "
        "longest, ms.",
        "overlap_pct": "The overlap achieved, % of the possible overlap.",
        "streams": "Text: where the work ran ('all on stream 7', 'on streams 7, 13').",
        "overlap_elsewhere": "Text: ' Overlap measured elsewhere in this timeline: <range> "
        "<pct>%, ....' for the device's other ranges that overlap well, else empty.",
    },
    "sync_heavy": {
        **RANGE_VALUES,
        "sync_calls": "Blocking synchronisation calls in the range.",
        "sync_names": "Text: the three most frequent calls with their counts "
        "('cudaStreamSynchronize x40, cudaMemcpy x20').",
        "median_work_us": "GPU work between a draining sync and the previous one, median, us.",
        "host_blocked_ms": "Time the host was blocked in the calls, ms.",
        "gpu_idle_ms": "Idle GPU time in the gaps the syncs returned in, ms.",
    },
    "gpu_idle_gaps": {
        **RANGE_VALUES,
        "idle_ms": "Idle GPU time in the range's gaps of at least min_gap_ns, ms.",
        "gaps": "How many such gaps the range has a part of.",
        "min_gap_us": "The rule's min_gap_ns, us.",
        "largest_gap_ms": "The largest gap, ms.",
        "host_activity": "Text: a sentence on what the host did during the largest gap (its "
        "CUDA calls and the share of the gap inside them, or that it made none).",
    },
    "launch_overhead": {
        **RANGE_VALUES,
        "kernels": "Tiny kernels in the range's runs.",
        "runs": "Runs of back-to-back tiny kernels.",
        "busy_ms": "GPU busy time of the runs, ms.",
        "idle_ms": "Idle GPU time between the runs' kernels, ms.",
        "kernel_us": "Mean busy time per kernel, us.",
        "gap_us": "Mean idle gap between two kernels of a run, us.",
        "launch_call_us": "Median host time of a launch call of the range's kernels, us (n/a "
        "when the timeline lacks it).",
        "launch_call": "Text: '; each launch call takes 4.1 us on the host' when the launch "
        "calls were traced, else empty.",
    },
    "fusion_candidates": {
        "operations": "Operations in the chain (consecutive launches of one kernel are one).",
        "chain": "Text: the chain's kernels, shortened, joined by ' -> '.",
        "occurrences": "How many times the chain runs in the analysed region.",
        "per_iteration": "Text: ', 2 per iteration' when iterations are known and the chain "
        "runs at least once per iteration, else empty.",
        "chain_traffic": "Text: what the intermediates cost, from ncu's byte counts, or that "
        "the chain is estimated from elementwise kernel names and durations.",
        "intermediate_mb": "Intermediates written to DRAM and read back, MB (n/a from names).",
        "moved_mb": "DRAM bytes the chain moves, MB (n/a from names).",
        "fused_mb": "DRAM bytes a fused kernel would move, MB (n/a from names).",
        "saved_ms": SAVED_MS,
    },
    "rank_imbalance": {
        "late_rank": "The late rank: it reaches the collectives after every other rank.",
        "late_device": "The late rank's GPU (device id on its host).",
        "late_host": "The late rank's host name ('this host' when the report lacks it).",
        "waiting_ranks": "Text: the ranks that wait for it ('rank 0', 'ranks 0-6 and 8-255').",
        "wait_ms": "The time the waiting ranks lose per step inside collectives with nothing "
        "to compute, mean over them, ms.",
        "wait_pct": "That wait, % of the step.",
        "step_ms": "The step's wall time, ms.",
        "last_at": "The collectives the late rank reached last.",
        "collectives": "The collectives in the analysed region.",
        "late_cause": "Text: what on the late rank accounts for its lateness: its host stalls "
        "(no CUDA call for 1 ms or more), its GPU computes more, with the difference per step, "
        "then late_ranges.",
        "late_ranges": "Text: 'It spends longer than the others in NVTX range 'load_batch' "
        "(12.00 ms more per step).' when a range is longer by a quarter of the delay or more, "
        "else empty.",
        "saved_ms": "What arriving with the others would save per step: the smallest wait of "
        "the waiting ranks less the late rank's own wait, ms.",
    },
    "exposed_communication": {
        "transfer_ms": "Collective transfer time per step (communication kernels minus waits "
        "for late ranks), mean over the ranks, ms.",
        "exposed_ms": "Of it, the time no computation runs on the GPU, mean over the ranks, ms.",
        "overlap_pct": "The transfers' share overlapped with computation, %.",
        "step_ms": "The step's wall time, ms.",
        "collectives": "Text: the collectives per step by kind ('AllReduce x1').",
        "worst_rank": "The rank with the most exposed transfer time.",
        "worst_exposed_ms": "Its exposed transfer time per step, ms.",
        "saved_ms": "What full overlap would save per step (the exposed transfer time), ms.",
    },
    "layout_conversions": {
        "share_pct": "Time in layout conversions, % of the analysed region's wall time.",
        "time_us": "Time in layout conversions, us.",
        "launches": "Launches of conversion kernels.",
        "kernels": "Text: the five longest conversion kernels, shortened, with launches and time "
        "('nchwToNhwcKernel (40x, 812 us), ...').",
        "moved_mb": "DRAM bytes the conversions move, MB (n/a without ncu byte counts).",
        "moved": "Text: '; they move 512 MB and compute nothing' when the bytes are known, else "
        "empty.",
        "saved_ms": SAVED_MS,
    },
}


def template_names(rule: RuleSpec) -> dict[str, str]:
    """The values a program rule's templates may name, with what each means."""
    return PROGRAM_VALUES.get(rule.analysis, {})


def program_text(rule: RuleSpec, values: Mapping[str, Any]) -> tuple[str, str]:
    """A program finding's message and fix: the rule's templates over its analysis's values,
    which must be exactly the registered ones (a mismatch is a bug in nsdiag)."""
    registered = PROGRAM_VALUES[rule.analysis].keys()
    if values.keys() != registered:
        odd = sorted(values.keys() ^ registered)
        raise ValueError(f"analysis {rule.analysis} gives values {odd} unlike its registry")
    return render(rule.message, values), render(rule.fix, values)
