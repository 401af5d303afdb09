"""The program analyses, each declared once: its `ProgramAnalysis` record (record.py), naming
its function (and hold-back check) by module and name, which stay in their modules (fusion.py,
timeline/host_wait.py, ...) and are imported when an analysis first runs.

This module imports nothing but record.py: the rule loader checks each program rule against these
records, and `nsdiag rules` lists and shows the rules, without importing the analyses (pandas,
numpy). Each analysis module imports its records (its thresholds are `RECORD.params_of(rule)`,
its message `RECORD.text(rule, values)`); registry.py collects them into PROGRAM_ANALYSES.
"""

from __future__ import annotations

from nsdiag.analysis.program.record import (
    MIN_IMPACT,
    RANGE_VALUES,
    SAVED_MS,
    Param,
    ProgramAnalysis,
)

# ---------------------------------------------------------------- attention.py

EAGER_ATTENTION = ProgramAnalysis(
    name="eager_attention",
    function_ref="nsdiag.analysis.program.attention:eager_attention",
    needs="timeline",
    values={
        **RANGE_VALUES,
        "chains": "Softmax chains between two GEMMs (per iteration).",
        "forward": "Of them, in the forward pass.",
        "backward": "Of them, in the backward pass.",
        "kernels": "Kernels in the chains, GEMMs left out (per iteration).",
        "chain_ms": "Their GPU time, ms (per iteration).",
        "ops": "Text: the three kernels of the chains that take longest.",
        "per": "Text: ' per iteration' where the region has iterations, else empty.",
        "saved_per_ms": "The saving per iteration (or in the region), ms.",
    },
    params={
        "min_chains": Param(
            2, "The fewest chains per iteration reported (one per layer and pass in a model)."
        ),
        "min_impact": Param(0.02, MIN_IMPACT),
    },
    claims_before=("fusion_candidates",),
)

# ---------------------------------------------------------------- fusion.py

FUSION_CANDIDATES = ProgramAnalysis(
    name="fusion_candidates",
    function_ref="nsdiag.analysis.program.fusion:fusion_candidates",
    needs="launches",
    tables=("kernels",),
    values={
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
    params={
        "min_intermediate_bytes": Param(
            1e6, "The smallest intermediate one operation writes for the next to link, bytes."
        ),
        "min_read_fraction": Param(
            0.5, "The share of that intermediate the next operation must read back to link."
        ),
        "at_roof_dram_pct": Param(
            75.0,
            "The DRAM throughput, %, at which a byte-matched chain all of whose kernels reach "
            "it is left out (equal sizes, not shared data) unless they are named elementwise.",
        ),
        "min_impact": Param(0.01, MIN_IMPACT),
    },
)

# ---------------------------------------------------------------- layout.py

LAYOUT_CONVERSIONS = ProgramAnalysis(
    name="layout_conversions",
    function_ref="nsdiag.analysis.program.layout:layout_conversions",
    needs="launches",
    tables=("kernels",),
    values={
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
    params={
        "min_share": Param(
            0.01, "The smallest time in conversions reported, share of the region's wall time."
        ),
    },
)

# ---------------------------------------------------------------- rank_findings.py

# The rank analyses own the time inside communication kernels: gpu_idle_gaps counts an idle gap
# less the communication kernels that cover it (view.py: comm_ns).
RANK_IMBALANCE = ProgramAnalysis(
    name="rank_imbalance",
    function_ref="nsdiag.analysis.program.rank_findings:rank_imbalance",
    needs="ranks",
    values={
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
    params={
        "min_impact": Param(0.2, "The smallest saving per step reported, share of the step."),
    },
    claims_before=("gpu_idle_gaps", "cpu_bound"),
    held_back_ref="nsdiag.analysis.program.rank_findings:unexplained_lateness",
)

EXPOSED_COMMUNICATION = ProgramAnalysis(
    name="exposed_communication",
    function_ref="nsdiag.analysis.program.rank_findings:exposed_communication",
    needs="ranks",
    values={
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
    params={
        "max_overlap_fraction": Param(
            0.25, "The largest share of the transfers overlapped with computation reported."
        ),
        "min_impact": Param(0.03, "The smallest saving per step reported, share of the step."),
    },
    claims_before=("gpu_idle_gaps",),
)

# ---------------------------------------------------------------- timeline/pageable.py

PAGEABLE_MEMCPY = ProgramAnalysis(
    name="pageable_memcpy",
    function_ref="nsdiag.analysis.program.timeline.pageable:pageable_memcpy",
    needs="timeline",
    values={
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
    params={
        "min_copy_bytes": Param(
            1 << 20, "The smallest copy counted, bytes (smaller ones are latency-bound)."
        ),
        "assumed_pinned_speedup": Param(
            2.0, "How much faster a pinned copy is when the timeline has none to measure."
        ),
        "min_impact": Param(0.01, MIN_IMPACT),
    },
    # Copy time beyond the pinned estimate is its own: no_copy_compute_overlap counts the
    # overlap left after the pinned-memory fix (overlap.py runs this rule's pinned-copy model).
    claims_before=("no_copy_compute_overlap",),
)

# ---------------------------------------------------------------- timeline/overlap.py

NO_COPY_COMPUTE_OVERLAP = ProgramAnalysis(
    name="no_copy_compute_overlap",
    function_ref="nsdiag.analysis.program.timeline.overlap:no_copy_compute_overlap",
    needs="timeline",
    tables=("kernels",),
    values={
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
    params={
        "max_overlap_fraction": Param(
            0.3, "The most overlap achieved, as a fraction of the possible overlap, reported."
        ),
        "min_impact": Param(0.01, MIN_IMPACT),
    },
)

# ---------------------------------------------------------------- timeline/optimizer.py

PER_PARAMETER_OPTIMIZER = ProgramAnalysis(
    name="per_parameter_optimizer",
    function_ref="nsdiag.analysis.program.timeline.optimizer:per_parameter_optimizer",
    needs="timeline",
    tables=("api_calls",),
    values={
        **RANGE_VALUES,
        "function": "The optimizer's step as its PyTorch range names it (torch.optim.AdamW.step).",
        "optimizer": "The optimizer's class (AdamW).",
        "per": "Text: ' per iteration' where the region has iterations, else empty.",
        "launches": "Kernels launched inside the step (per iteration).",
        "all_launches": "Kernels launched in all (per iteration).",
        "per_call": "Kernels launched per call of the step.",
        "batched": "Of the step's launches, multi-tensor or fused kernels (in the region).",
        "host_ms": "The host's time inside the step, ms (per iteration).",
        "idle_ms": "The GPU's idle time while the host was inside the step, ms (per iteration).",
        "fused_ms": "What a fused step still costs the host, ms (per iteration).",
        "saved_per_ms": "The saving per iteration (or in the region), ms.",
        "flag": "Text: the flag that batches the step: 'fused=True' where the optimizer takes "
        "it on CUDA (Adam, AdamW, SGD, Adagrad), else 'foreach=True'.",
    },
    params={
        "min_launches_per_call": Param(
            100, "The fewest kernels a call of the step launches to be stepping one by one."
        ),
        "max_batched_share": Param(
            0.2, "The largest share of multi-tensor or fused kernels among them."
        ),
        "min_impact": Param(0.02, MIN_IMPACT),
    },
    claims_before=("launch_bound", "cpu_bound"),
)

# ---------------------------------------------------------------- timeline/host_wait.py

LAUNCH_BOUND = ProgramAnalysis(
    name="launch_bound",
    function_ref="nsdiag.analysis.program.timeline.host_wait:launch_bound",
    needs="timeline",
    tables=("kernels", "api_calls"),
    values={
        **RANGE_VALUES,
        "idle_ms": "GPU idle time while the host was launching work, ms (per iteration where "
        "the region has iterations).",
        "per": "Text: ' per iteration' where the region has iterations, else empty.",
        "launches": "Kernel launches on the device (per iteration).",
        "kernel_us": "Mean GPU time of a kernel, us.",
        "host_per_launch_us": "The host's pace: GPU busy plus launch-idle time per launch, us.",
        "busy_pct": "Share of the region's iterations the GPU is busy, %.",
        "saved_per_ms": "The saving per iteration (or in the region), ms.",
        "graph_note": "Text: a sentence when the program already replays CUDA graphs, else empty.",
        "loop_note": "Text: a sentence when the iteration calls the model's forward many times "
        "(a decode loop): the host's own work between the forwards, which a graph of the "
        "forward does not remove, else empty.",
    },
    params={
        "min_forwards": Param(
            8,
            "The fewest calls of a model's forward per iteration that make the iteration a "
            "loop over the model (a decode loop): the saving then counts the forwards only.",
        ),
        "graph_node_gap_ns": Param(
            1000, "The gap a CUDA graph still leaves between two kernels, ns (not saved)."
        ),
        "min_impact": Param(0.02, MIN_IMPACT),
    },
)

CPU_BOUND = ProgramAnalysis(
    name="cpu_bound",
    function_ref="nsdiag.analysis.program.timeline.host_wait:cpu_bound",
    needs="timeline",
    tables=("kernels", "api_calls"),
    values={
        **RANGE_VALUES,
        "idle_ms": "GPU idle time while the host ran code with no CUDA call, ms (per "
        "iteration where the region has iterations).",
        "per": "Text: ' per iteration' where the region has iterations, else empty.",
        "busy_pct": "Share of the region's iterations the GPU is busy, %.",
        "stretches": "Text: the host stretches without CUDA calls that cost most idle time, "
        "longest first, with the calls before and after each, the NVTX range the host was in "
        "and whether a copy to the GPU followed.",
        "input_note": "Text: a sentence when most of that time ends in a host-to-device copy "
        "(the host prepares input), else empty.",
        "advice": "Text: what to do about it: the input pipeline's remedies (DataLoader "
        "workers, pinned memory, preprocessing on the GPU), unless the PyTorch function ranges "
        "place most of the time inside the step's own PyTorch functions (an optimizer step, "
        "the backward pass): then how to batch or compile the work there.",
        "saved_per_ms": "The saving per iteration (or in the region), ms.",
    },
    params={"min_impact": Param(0.02, MIN_IMPACT)},
)

SYNC_BOUND = ProgramAnalysis(
    name="sync_bound",
    function_ref="nsdiag.analysis.program.timeline.host_wait:sync_bound",
    needs="timeline",
    tables=("kernels", "api_calls"),
    values={
        **RANGE_VALUES,
        "sync_calls": "Blocking synchronisation calls (per iteration).",
        "per": "Text: ' per iteration' where the region has iterations, else empty.",
        "sync_names": "Text: the three most frequent calls with their counts.",
        "opened_ms": "GPU idle time in gaps a sync drained, ms (per iteration).",
        "slack_ms": "The host's slack: wall time less max(host's own time, GPU busy time), ms "
        "(per iteration).",
        "saved_per_ms": "The saving per iteration (or in the region), ms.",
    },
    params={"min_impact": Param(0.01, MIN_IMPACT)},
    claims_before=("launch_bound", "cpu_bound", "gpu_idle_gaps"),
)

IDLE_OTHER = ProgramAnalysis(
    name="gpu_idle_gaps",
    function_ref="nsdiag.analysis.program.timeline.host_wait:idle_other",
    needs="timeline",
    tables=("kernels",),
    values={
        **RANGE_VALUES,
        "idle_ms": "GPU idle time the other causes do not explain, ms (per iteration).",
        "per": "Text: ' per iteration' where the region has iterations, else empty.",
        "host_activity": "Text: what the host did meanwhile, with the time of each.",
        "top_calls": "Text: the region's most frequent allocation and module-loading calls.",
        "saved_per_ms": "The saving per iteration (or in the region), ms.",
    },
    params={"min_impact": Param(0.05, MIN_IMPACT)},
)
