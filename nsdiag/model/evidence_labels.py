"""What each evidence value is, in words: the rules and the program analyses compare named values
(`theoretical_occupancy_pct`, `host_ns_per_launch`) with thresholds; a reader sees
`theoretical occupancy 18.8% (threshold < 50.0%)`. The JSON keeps the names and carries the
label beside them (records/findings.py).

Each entry: name -> (label, unit). Units: `pct` (a value already in percent), `share` (a
fraction printed as percent), `ns` (a duration), `bytes`, `B/s`, `FLOP/s`, `TB/s`, `GB/s`,
`count`, `flag` (1 yes, 0 no; its threshold is not printed), `x` (a plain number). A name not in
the table prints its name spaced, with the unit its suffix says.
"""

from __future__ import annotations

LABELS: dict[str, tuple[str, str]] = {
    # kernel rules: throughput and occupancy
    "achieved_occupancy_pct": ("achieved occupancy", "pct"),
    "theoretical_occupancy_pct": ("theoretical occupancy", "pct"),
    "occupancy_limit_min": ("blocks per SM the occupancy limits allow", "count"),
    "registers_per_thread": ("registers per thread", "count"),
    "shared_mem_dynamic_bytes": ("dynamic shared memory per block", "bytes"),
    "shared_mem_static_bytes": ("static shared memory per block", "bytes"),
    "block_size": ("threads per block", "count"),
    "grid_size": ("blocks in the grid", "count"),
    "sm_count": ("SMs", "count"),
    "waves": ("waves (from the grid)", "x"),
    "waves_per_sm": ("ncu's waves per SM", "x"),
    "wave_tail": ("idle share of the last wave", "share"),
    "issue_active": ("cycles with an instruction issued", "share"),
    "warp_cycles_per_issue": ("cycles between a warp's instructions", "x"),
    "warps_eligible_per_scheduler": ("eligible warps per scheduler", "x"),
    "mem_pct": ("busiest memory unit", "pct"),
    "compute_pct": ("busiest compute pipe", "pct"),
    "dram_throughput_pct": ("DRAM throughput (of peak)", "pct"),
    "l2_throughput_pct": ("L2 throughput", "pct"),
    "l1_throughput_pct": ("L1/TEX throughput", "pct"),
    "shared_throughput_pct": ("shared memory throughput", "pct"),
    "memory_throughput_pct": ("memory throughput", "pct"),
    "sm_throughput_pct": ("SM throughput", "pct"),
    "l1_hit_rate_pct": ("L1 hit rate", "pct"),
    "l2_hit_rate_pct": ("L2 hit rate", "pct"),
    "dram_pct_of_ceiling": ("DRAM bandwidth, of what this GPU sustains", "pct"),
    "dram_tb_per_s": ("DRAM bandwidth", "TB/s"),
    "dram_ceiling_tb_per_s": ("sustained DRAM bandwidth (the ceiling)", "TB/s"),
    "dram_ceiling_measured": ("ceiling measured in this session", "flag"),
    "uncoalesced_access": ("accesses uncoalesced", "flag"),
    "is_gemm_like": ("a matrix product or convolution (from its name)", "flag"),
    "pct_of_tensor_roof": ("of the tensor-core roof", "pct"),
    "arithmetic_intensity": ("arithmetic intensity (FLOP/byte)", "x"),
    # pipes and instructions
    "pipe_tensor_pct": ("tensor pipe busy", "pct"),
    "pipe_fma_pct": ("FMA pipe busy", "pct"),
    "pipe_alu_pct": ("ALU pipe busy", "pct"),
    "pipe_fp64_pct": ("FP64 pipe busy", "pct"),
    "pipe_xu_pct": ("XU (special function) pipe busy", "pct"),
    "fp_pipe_pct": ("floating-point pipe busy", "pct"),
    "ffma_peak_per_cycle": ("FP32 FMAs per cycle at peak", "count"),
    "dfma_peak_per_cycle": ("FP64 FMAs per cycle at peak", "count"),
    "flop_fp32": ("FP32 operations", "x"),
    "flop_fp64": ("FP64 operations", "x"),
    "flop_tensor": ("tensor-core operations", "x"),
    "flop_total": ("floating-point operations", "x"),
    "tensor_flops_per_s": ("tensor-core throughput", "FLOP/s"),
    "aligned_tensor_flops_per_s": ("tensor-core throughput at aligned shapes", "FLOP/s"),
    "gemm_tile_min": ("smaller side of the tile", "count"),
    "inst_executed": ("instructions executed", "x"),
    "threads_per_inst": ("active threads per instruction", "x"),
    "threads_per_inst_pred_on": ("threads per instruction, predicated on", "x"),
    "branch_uniformity_pct": ("uniform branches", "pct"),
    # memory access
    "global_load_bytes_per_sector": ("useful bytes per 32-byte load sector", "x"),
    "global_store_bytes_per_sector": ("useful bytes per 32-byte store sector", "x"),
    "global_load_sectors_per_request": ("sectors per load request", "x"),
    "global_store_sectors_per_request": ("sectors per store request", "x"),
    "global_load_access_bytes": ("bytes per thread per load", "x"),
    "global_store_access_bytes": ("bytes per thread per store", "x"),
    "global_load_sector_share": ("loads' share of global sectors", "share"),
    "global_store_sector_share": ("stores' share of global sectors", "share"),
    "global_load_waste": ("unused load bytes past L1", "share"),
    "global_store_waste": ("unused store bytes past L1", "share"),
    "gemm_fallback": ("a fallback kernel for the shape", "flag"),
    "global_atomic_inst": ("global atomic instructions", "count"),
    "global_reduction_inst": ("global reduction instructions", "count"),
    "l2_atomic_busy_pct": ("L2 atomic unit busy", "pct"),
    "l2_atomic_busy_max_pct": ("busiest L2 atomic unit", "pct"),
    "local_load_inst": ("local-memory load instructions", "count"),
    "local_store_inst": ("local-memory store instructions", "count"),
    "local_sectors": ("local-memory sectors", "count"),
    "shared_bank_conflict_pct": ("shared memory wavefronts from bank conflicts", "pct"),
    "shared_ways": ("ways of the worst bank conflict", "x"),
    # stalls
    "stall_share_barrier": ("stalls at barriers", "share"),
    "stall_share_long_scoreboard": ("stalls on global/local memory (long scoreboard)", "share"),
    "stall_share_short_scoreboard": ("stalls on shared memory/MIO (short scoreboard)", "share"),
    "stall_share_mio_throttle": ("stalls on the MIO queue (throttle)", "share"),
    "stall_share_lg_throttle": ("stalls on the local/global queue (throttle)", "share"),
    "stall_share_math_pipe_throttle": ("stalls on a busy math pipe", "share"),
    # launches and time
    "launches": ("launches", "count"),
    "duration_ns": ("time per launch", "ns"),
    "profiled_mean_ns": ("time per launch under ncu", "ns"),
    "region_mean_ns": ("time per launch in the timeline", "ns"),
    "impact": ("share of the analysed time saved", "share"),
    "recoverable": ("share of its own time saved", "share"),
    "time_share": ("share of GPU time", "share"),
    # program analyses
    "host_ns_per_launch": ("host time per launch", "ns"),
    "mean_kernel_ns": ("GPU time per kernel", "ns"),
    "kernel_launches": ("kernel launches", "count"),
    "launch_idle_ns": ("GPU idle while the host launches", "ns"),
    "cpu_idle_ns": ("GPU idle while the host computes", "ns"),
    "alloc_idle_ns": ("GPU idle in memory allocation", "ns"),
    "wait_idle_ns": ("GPU idle waiting on the host", "ns"),
    "unknown_idle_ns": ("GPU idle for other reasons", "ns"),
    "idle_after_syncs_ns": ("GPU idle after synchronisations", "ns"),
    "host_slack_ns": ("host slack", "ns"),
    "sync_calls": ("blocking synchronisations", "count"),
    "min_cpu_stretch_ns": ("shortest host stretch counted", "ns"),
    "step_host_ns": ("host time per step", "ns"),
    "step_idle_ns": ("GPU idle per step", "ns"),
    "idle_ending_in_h2d_copy": ("idle gaps ending in a host-to-device copy", "share"),
    "pageable_copies": ("copies from pageable memory", "count"),
    "pageable_bytes": ("bytes copied from pageable memory", "bytes"),
    "pageable_copy_time_ns": ("time in pageable copies", "ns"),
    "pageable_gb_per_s": ("pageable copy bandwidth", "GB/s"),
    "pinned_gb_per_s": ("pinned copy bandwidth", "GB/s"),
    "copy_time_ns": ("time in copies", "ns"),
    "kernel_time_ns": ("time in kernels", "ns"),
    "possible_overlap_ns": ("copy time that could overlap kernels", "ns"),
    "overlap_fraction": ("overlap achieved", "share"),
    "overlapped_fraction": ("overlap achieved", "share"),
    "chain_time_ns": ("time in the chain", "ns"),
    "chain_occurrences": ("times the chain runs", "count"),
    "dram_bytes_moved": ("DRAM bytes moved", "bytes"),
    "intermediate_bytes": ("intermediates through DRAM", "bytes"),
    "fused_bandwidth_bytes_per_s": ("bandwidth a fused kernel would reach", "B/s"),
    "attention_chains": ("attention chains", "count"),
    "score_kernels": ("kernels passing the scores through DRAM", "count"),
    "score_kernel_ns": ("time in those kernels", "ns"),
    "layout_time_ns": ("time in layout conversions", "ns"),
    "layout_time_share": ("share of time in layout conversions", "share"),
    "layout_dram_bytes": ("DRAM bytes of layout conversions", "bytes"),
    "launches_per_call": ("launches per optimizer call", "x"),
    "batched_share": ("launches that are multi-tensor", "share"),
    "late_rank": ("late rank", "count"),
    "late_share_of_delays": ("late rank's share of the delays", "share"),
    "wait_per_step_ns": ("wait per step", "ns"),
    "net_wait_share_of_step": ("wait's share of the step", "share"),
    "explained_share_of_delay": ("share of the delay explained", "share"),
    "exposed_transfer_per_step_ns": ("exposed transfer per step", "ns"),
    "exposed_share_of_step": ("exposed transfer's share of the step", "share"),
}


def label(name: str) -> str:
    """The value's label in words (a name not in the table: its words)."""
    known = LABELS.get(name)
    return known[0] if known else name.replace("_", " ")


def unit(name: str) -> str:
    """The value's unit (LABELS), else what its name's suffix says, else '' (a plain number)."""
    known = LABELS.get(name)
    if known:
        return known[1]
    for suffix, guessed in (
        ("_flops_per_s", "FLOP/s"),
        ("_tb_per_s", "TB/s"),
        ("_gb_per_s", "GB/s"),
        ("_bytes_per_s", "B/s"),
        ("_pct", "pct"),
        ("_ns", "ns"),
        ("_bytes", "bytes"),
        ("_share", "share"),
    ):
        if name.endswith(suffix):
            return guessed
    if name.startswith(("is_", "has_")):
        return "flag"
    return "share" if name.startswith("stall_share_") else ""
