"""The metric catalogue: canonical metric names and the ncu metrics that carry them.

Each canonical metric lists ncu metric names in order of preference; the first one present in a
report wins, so names that differ between ncu versions or GPU generations are fallbacks of one
another. Values are stored in base units (ns, bytes, bytes/s, Hz, %, counts, ratios).
Details-page labels (what `--page details` prints instead of metric names) map here too.

A few quantities are a sum of several ncu metrics whose names differ by GPU (tensor-core
operations per precision: one aggregate on Hopper, one per accumulator type on Ampere and Ada);
their entries list the alternatives as `groups`, each a set of metrics to add up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nsdiag.model.tensor_peaks import NCU_TENSOR_OPS_GROUPS


@dataclass(frozen=True)
class MetricSpec:
    name: str  # canonical, snake_case, unit in the suffix where it has one
    ncu: tuple[str, ...]  # ncu metric names, preferred first
    unit: str  # canonical unit, for docs and display
    description: str
    labels: tuple[str, ...] = field(default=())  # "Section Name/Metric Label" on the details page
    pattern: str = ""  # regex: sum every raw metric it matches
    # Alternatives, preferred first, each a set of ncu metrics that together count the quantity:
    # the first set of which any metric is present is added up (`ncu` lists the same names).
    groups: tuple[tuple[str, ...], ...] = field(default=())


# Warp stall reasons, as named in smsp__average_warps_issue_stalled_<R>_per_issue_active.ratio.
STALL_REASONS: tuple[str, ...] = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "gmma",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)

SOL = "GPU Speed Of Light Throughput"
# ncu 2019.x-2020.x (nv-nsight-cu-cli) named the section and its rows differently ("SOL FB" for
# DRAM Throughput, "Memory [%]", "SM [%]"); seen in public exports of it, e.g.
# https://github.com/peihunglin/XPlacer-ML-DataPlacement (README.md, a V100 details page, 2020).
OLD_SOL = "GPU Speed Of Light"
LAUNCH = "Launch Statistics"
OCC = "Occupancy"
CWA = "Compute Workload Analysis"
MWA = "Memory Workload Analysis"
SCHED = "Scheduler Statistics"
WARP = "Warp State Statistics"


def _m(
    name: str, ncu: str | tuple[str, ...], unit: str, description: str, labels: tuple[str, ...] = ()
) -> MetricSpec:
    return MetricSpec(
        name, (ncu,) if isinstance(ncu, str) else tuple(ncu), unit, description, labels
    )


_CORE: list[MetricSpec] = [
    # Time and clocks
    _m(
        "duration_ns",
        "gpu__time_duration.sum",
        "ns",
        "Kernel duration on the GPU.",
        (f"{SOL}/Duration", f"{OLD_SOL}/Duration"),
    ),
    _m(
        "elapsed_cycles",
        "gpc__cycles_elapsed.max",
        "cycle",
        "Elapsed GPC cycles.",
        (f"{SOL}/Elapsed Cycles", f"{OLD_SOL}/Elapsed Cycles"),
    ),
    _m(
        "sm_active_cycles",
        "sm__cycles_active.avg",
        "cycle",
        "Cycles with at least one warp on the SM.",
        (f"{SOL}/SM Active Cycles", f"{OLD_SOL}/SM Active Cycles"),
    ),
    _m(
        "sm_frequency_hz",
        "gpc__cycles_elapsed.avg.per_second",
        "Hz",
        "SM clock during the kernel.",
        (f"{SOL}/SM Frequency", f"{OLD_SOL}/SM Frequency"),
    ),
    _m(
        "dram_frequency_hz",
        "dram__cycles_elapsed.avg.per_second",
        "Hz",
        "DRAM clock during the kernel.",
        (f"{SOL}/DRAM Frequency", f"{OLD_SOL}/Memory Frequency"),
    ),
    # Speed of light
    _m(
        "memory_throughput_pct",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        "ncu's Memory Throughput: the busiest memory unit, % of its peak.",
        (f"{SOL}/Memory Throughput", f"{OLD_SOL}/Memory [%]"),
    ),
    _m(
        "dram_throughput_pct",
        (
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        ),
        "%",
        "DRAM bandwidth used, % of peak.",
        (f"{SOL}/DRAM Throughput", f"{OLD_SOL}/SOL FB"),
    ),
    _m(
        "sm_throughput_pct",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        "ncu's Compute (SM) Throughput: the busiest SM sub-unit, % of its peak.",
        (f"{SOL}/Compute (SM) Throughput", f"{OLD_SOL}/SM [%]"),
    ),
    _m(
        "l1_throughput_pct",
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "%",
        "L1/TEX throughput, % of peak.",
        (f"{SOL}/L1/TEX Cache Throughput", f"{OLD_SOL}/SOL TEX"),
    ),
    _m(
        "l2_throughput_pct",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        "L2 throughput, % of peak.",
        (f"{SOL}/L2 Cache Throughput", f"{OLD_SOL}/SOL L2"),
    ),
    _m(
        "shared_throughput_pct",
        (
            "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed",
        ),
        "%",
        "Shared-memory wavefront throughput, % of peak.",
    ),
    _m(
        "mem_busy_pct",
        "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        "Mem Busy: the busiest memory unit's activity.",
        (f"{MWA}/Mem Busy",),
    ),
    _m(
        "max_bandwidth_pct",
        "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
        "%",
        "Max Bandwidth: the busiest memory interface, % of peak.",
        (f"{MWA}/Max Bandwidth",),
    ),
    # Issue
    _m(
        "sm_busy_pct",
        (
            "sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed",
            "sm__instruction_throughput.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "SM Busy: the busiest pipe's issue rate.",
        (f"{CWA}/SM Busy",),
    ),
    _m(
        "issue_slots_busy_pct",
        (
            "sm__inst_issued.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_issued.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "Issue slots busy.",
        (f"{CWA}/Issue Slots Busy",),
    ),
    _m(
        "ipc",
        "sm__inst_executed.avg.per_cycle_active",
        "inst/cycle",
        "Executed instructions per active cycle per SM.",
        (f"{CWA}/Executed Ipc Active",),
    ),
    _m(
        "issue_active",
        "smsp__issue_active.avg.per_cycle_active",
        "ratio",
        "Fraction of cycles a scheduler issued an instruction.",
        (f"{SCHED}/Issued Warp Per Scheduler",),
    ),
    _m(
        "warps_active_per_scheduler",
        "smsp__warps_active.avg.per_cycle_active",
        "warps",
        "Active warps per scheduler.",
        (f"{SCHED}/Active Warps Per Scheduler",),
    ),
    _m(
        "warps_eligible_per_scheduler",
        "smsp__warps_eligible.avg.per_cycle_active",
        "warps",
        "Eligible warps per scheduler.",
        (f"{SCHED}/Eligible Warps Per Scheduler",),
    ),
    _m(
        "warp_cycles_per_issue",
        "smsp__average_warp_latency_per_inst_issued.ratio",
        "cycle",
        "Average cycles between two issued instructions of a warp.",
        (f"{WARP}/Warp Cycles Per Issued Instruction",),
    ),
    # Occupancy and launch
    _m(
        "achieved_occupancy_pct",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "%",
        "Achieved occupancy.",
        (f"{OCC}/Achieved Occupancy",),
    ),
    _m(
        "theoretical_occupancy_pct",
        "sm__maximum_warps_per_active_cycle_pct",
        "%",
        "Theoretical occupancy.",
        (f"{OCC}/Theoretical Occupancy",),
    ),
    _m(
        "occupancy_limit_registers",
        "launch__occupancy_limit_registers",
        "blocks",
        "Blocks per SM allowed by registers.",
        (f"{OCC}/Block Limit Registers",),
    ),
    _m(
        "occupancy_limit_shared_mem",
        "launch__occupancy_limit_shared_mem",
        "blocks",
        "Blocks per SM allowed by shared memory.",
        (f"{OCC}/Block Limit Shared Mem",),
    ),
    _m(
        "occupancy_limit_warps",
        "launch__occupancy_limit_warps",
        "blocks",
        "Blocks per SM allowed by warps.",
        (f"{OCC}/Block Limit Warps",),
    ),
    _m(
        "occupancy_limit_blocks",
        "launch__occupancy_limit_blocks",
        "blocks",
        "Blocks per SM allowed by the hardware block limit.",
        (f"{OCC}/Block Limit SM",),
    ),
    _m(
        "occupancy_limit_barriers",
        "launch__occupancy_limit_barriers",
        "blocks",
        "Blocks per SM allowed by barriers.",
    ),
    _m(
        "registers_per_thread",
        "launch__registers_per_thread",
        "registers",
        "Registers per thread.",
        (f"{LAUNCH}/Registers Per Thread",),
    ),
    _m(
        "shared_mem_static_bytes",
        "launch__shared_mem_per_block_static",
        "bytes",
        "Static shared memory per block.",
        (f"{LAUNCH}/Static Shared Memory Per Block",),
    ),
    _m(
        "shared_mem_dynamic_bytes",
        "launch__shared_mem_per_block_dynamic",
        "bytes",
        "Dynamic shared memory per block.",
        (f"{LAUNCH}/Dynamic Shared Memory Per Block",),
    ),
    _m("grid_size", "launch__grid_size", "blocks", "Blocks in the grid.", (f"{LAUNCH}/Grid Size",)),
    _m(
        "block_size",
        "launch__block_size",
        "threads",
        "Threads per block.",
        (f"{LAUNCH}/Block Size",),
    ),
    _m(
        "threads",
        "launch__thread_count",
        "threads",
        "Threads in the launch.",
        (f"{LAUNCH}/Threads",),
    ),
    _m(
        "waves_per_sm",
        "launch__waves_per_multiprocessor",
        "waves",
        "Waves of blocks per SM.",
        (f"{LAUNCH}/Waves Per SM",),
    ),
    _m(
        "sm_count",
        ("device__attribute_multiprocessor_count", "launch__sm_count"),
        "SMs",
        "Multiprocessors on the device.",
        (f"{LAUNCH}/# SMs",),
    ),
    # Memory access quality
    _m(
        "global_load_bytes_per_sector",
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
        "bytes",
        "Useful bytes per 32-byte sector of global loads.",
    ),
    _m(
        "global_store_bytes_per_sector",
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
        "bytes",
        "Useful bytes per 32-byte sector of global stores.",
    ),
    _m(
        "local_load_bytes_per_sector",
        "smsp__sass_average_data_bytes_per_sector_mem_local_op_ld.ratio",
        "bytes",
        "Useful bytes per sector of local loads.",
    ),
    _m(
        "local_store_bytes_per_sector",
        "smsp__sass_average_data_bytes_per_sector_mem_local_op_st.ratio",
        "bytes",
        "Useful bytes per sector of local stores.",
    ),
    _m(
        "global_load_sectors_per_request",
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
        "sectors",
        "Sectors per global load request (4 is ideal for 4-byte loads).",
    ),
    _m(
        "global_store_sectors_per_request",
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio",
        "sectors",
        "Sectors per global store request.",
    ),
    _m(
        "global_load_sectors",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "sectors",
        "Global load sectors.",
    ),
    _m(
        "global_load_requests",
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        "requests",
        "Global load requests.",
    ),
    _m(
        "global_store_sectors",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
        "sectors",
        "Global store sectors.",
    ),
    _m(
        "global_store_requests",
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
        "requests",
        "Global store requests.",
    ),
    _m(
        "l2_excessive_sectors",
        "derived__memory_l2_theoretical_sectors_global_excessive",
        "sectors",
        "Excess L2 sectors from uncoalesced global access.",
    ),
    _m(
        "l2_theoretical_sectors",
        "memory_l2_theoretical_sectors_global",
        "sectors",
        "L2 sectors global accesses needed.",
    ),
    _m(
        "shared_load_bank_conflicts",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "conflicts",
        "Shared-load bank conflicts.",
    ),
    _m(
        "shared_store_bank_conflicts",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        "conflicts",
        "Shared-store bank conflicts.",
    ),
    _m(
        "shared_load_wavefronts",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        "wavefronts",
        "Shared-load wavefronts.",
    ),
    _m(
        "shared_store_wavefronts",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
        "wavefronts",
        "Shared-store wavefronts.",
    ),
    _m(
        "shared_load_requests",
        "smsp__sass_inst_executed_op_shared_ld.sum",
        "inst",
        "Shared-load instructions.",
    ),
    _m(
        "shared_store_requests",
        "smsp__sass_inst_executed_op_shared_st.sum",
        "inst",
        "Shared-store instructions.",
    ),
    _m(
        "local_load_sectors",
        "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
        "sectors",
        "Local-memory load sectors (spills, dynamic arrays).",
    ),
    _m(
        "local_store_sectors",
        "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
        "sectors",
        "Local-memory store sectors.",
    ),
    _m(
        "local_load_inst",
        "smsp__sass_inst_executed_op_local_ld.sum",
        "inst",
        "Local-load instructions.",
    ),
    _m(
        "local_store_inst",
        "smsp__sass_inst_executed_op_local_st.sum",
        "inst",
        "Local-store instructions.",
    ),
    _m(
        "global_atomic_inst",
        (
            "smsp__sass_inst_executed_op_global_atom.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
        ),
        "inst",
        "Global atomic instructions (requests).",
    ),
    _m(
        "global_reduction_inst",
        ("smsp__sass_inst_executed_op_global_red.sum", "smsp__inst_executed_op_global_red.sum"),
        "inst",
        "Global reduction (fire-and-forget atomic) instructions.",
    ),
    # Where atomics queue (the histogram pair in tests/data/idioms/calib: index_add_ of 200M
    # samples into 256 counters keeps the busiest L2 slice's atomic unit 79% busy against 2% on
    # average, its 133M reduction sectors falling on 32 distinct sectors)
    _m(
        "l2_atomic_busy_max_pct",
        "lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed",
        "%",
        "The busiest L2 slice's atomic unit: cycles active, % of peak.",
    ),
    _m(
        "l2_atomic_busy_pct",
        "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "%",
        "The L2 slices' atomic units on average: cycles active, % of peak.",
    ),
    _m(
        "l2_reduction_sectors",
        "lts__t_sectors_srcunit_tex_op_red.sum",
        "sectors",
        "L2 sectors that global reductions (RED) operate on.",
    ),
    _m(
        "l2_reduction_first_touch_sectors",
        "lts__t_sectors_srcunit_tex_op_red_lookup_miss.sum",
        "sectors",
        "Of them, sectors not yet in L2 (at least one per distinct sector the reductions touch).",
    ),
    _m(
        "l1_hit_rate_pct",
        "l1tex__t_sector_hit_rate.pct",
        "%",
        "L1 sector hit rate.",
        (f"{MWA}/L1/TEX Hit Rate",),
    ),
    _m(
        "l2_hit_rate_pct",
        "lts__t_sector_hit_rate.pct",
        "%",
        "L2 sector hit rate.",
        (f"{MWA}/L2 Hit Rate",),
    ),
    # Bytes moved
    _m("dram_read_bytes", "dram__bytes_read.sum", "bytes", "Bytes read from DRAM."),
    _m("dram_write_bytes", "dram__bytes_write.sum", "bytes", "Bytes written to DRAM."),
    _m("dram_bytes", "dram__bytes.sum", "bytes", "Bytes moved to and from DRAM."),
    _m(
        "dram_bytes_per_second",
        "dram__bytes.sum.per_second",
        "bytes/s",
        "DRAM bandwidth achieved.",
        (f"{MWA}/Memory Throughput",),
    ),
    _m("l2_sectors", "lts__t_sectors.sum", "sectors", "32-byte sectors through L2."),
    # Divergence
    _m(
        "threads_per_inst",
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        "threads",
        "Active threads per executed warp instruction (32 = no divergence).",
        (f"{WARP}/Avg. Active Threads Per Warp",),
    ),
    _m(
        "threads_per_inst_pred_on",
        "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
        "threads",
        "Predicated-on threads per warp instruction.",
        (f"{WARP}/Avg. Not Predicated Off Threads Per Warp",),
    ),
    _m(
        "branch_uniformity_pct",
        "smsp__sass_average_branch_targets_threads_uniform.pct",
        "%",
        "Branch targets taken uniformly by all threads.",
    ),
    # Pipes
    # Pipe utilisation over the kernel's elapsed cycles (active-cycle figures as fallback).
    _m(
        "pipe_fma_pct",
        (
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "FMA pipe utilisation.",
    ),
    _m(
        "pipe_alu_pct",
        (
            "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "ALU pipe utilisation.",
    ),
    _m(
        "pipe_fp64_pct",
        (
            "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "FP64 pipe utilisation.",
    ),
    _m(
        "pipe_fp16_pct",
        (
            "sm__pipe_fp16_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_fp16_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_fma_type_fp16.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "FP16 pipe utilisation.",
    ),
    _m(
        "pipe_xu_pct",
        (
            "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "XU (special function unit) pipe utilisation.",
    ),
    _m(
        "pipe_lsu_pct",
        (
            "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "LSU pipe utilisation.",
    ),
    _m(
        "pipe_tensor_pct",
        (
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "Tensor pipe utilisation.",
    ),
    _m(
        "pipe_tensor_gmma_pct",
        (
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
        ),
        "%",
        "Hopper warpgroup MMA (GMMA) tensor pipe utilisation.",
    ),
    _m(
        "pipe_tensor_hmma_pct",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "%",
        "HMMA tensor pipe utilisation.",
    ),
    # Instruction counts for FLOPs (thread-level, predicated on)
    _m(
        "fadd_thread_inst",
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "inst",
        "FP32 adds.",
    ),
    _m(
        "fmul_thread_inst",
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        "inst",
        "FP32 multiplies.",
    ),
    _m(
        "ffma_thread_inst",
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "inst",
        "FP32 fused multiply-adds.",
    ),
    _m(
        "dadd_thread_inst",
        "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
        "inst",
        "FP64 adds.",
    ),
    _m(
        "dmul_thread_inst",
        "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
        "inst",
        "FP64 multiplies.",
    ),
    _m(
        "dfma_thread_inst",
        "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
        "inst",
        "FP64 fused multiply-adds.",
    ),
    _m(
        "hadd_thread_inst",
        "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum",
        "inst",
        "FP16 adds (each does 2 ops).",
    ),
    _m(
        "hmul_thread_inst",
        "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum",
        "inst",
        "FP16 multiplies (each does 2 ops).",
    ),
    _m(
        "hfma_thread_inst",
        "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
        "inst",
        "FP16 fused multiply-adds (each does 4 ops).",
    ),
    _m("inst_executed", "smsp__inst_executed.sum", "inst", "Warp instructions executed."),
    _m(
        "fadd_per_cycle",
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "FADD thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "fmul_per_cycle",
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "FMUL thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "ffma_per_cycle",
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "FFMA thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "dadd_per_cycle",
        "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "DADD thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "dmul_per_cycle",
        "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "DMUL thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "dfma_per_cycle",
        "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "DFMA thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "hadd_per_cycle",
        "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "HADD thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "hmul_per_cycle",
        "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "HMUL thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    _m(
        "hfma_per_cycle",
        "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed",
        "inst/cycle",
        "HFMA thread instructions per elapsed cycle (ncu's roofline input).",
    ),
    # Peaks (per cycle) used with clocks for roofline ceilings
    _m(
        "ffma_peak_per_cycle",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
        "inst/cycle",
        "Peak FP32 FMA per cycle (device).",
    ),
    _m(
        "dfma_peak_per_cycle",
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained",
        "inst/cycle",
        "Peak FP64 FMA per cycle (device).",
    ),
    _m(
        "hfma_peak_per_cycle",
        "sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained",
        "inst/cycle",
        "Peak FP16 FMA per cycle (device).",
    ),
    _m(
        "dram_bytes_peak_per_cycle",
        "dram__bytes.sum.peak_sustained",
        "bytes/cycle",
        "Peak DRAM bytes per DRAM cycle.",
    ),
    _m(
        "dram_bytes_peak_per_second",
        "dram__bytes.sum.peak_sustained.per_second",
        "bytes/s",
        "Peak DRAM bandwidth.",
    ),
    _m("l2_frequency_hz", "lts__cycles_elapsed.avg.per_second", "Hz", "L2 clock."),
    _m(
        "sm_cycles_per_second",
        "sm__cycles_elapsed.avg.per_second",
        "Hz",
        "SM clock (roofline peaks use it).",
    ),
    # Device attributes
    _m("device_l2_bytes", "device__attribute_l2_cache_size", "bytes", "L2 cache size."),
    _m(
        "device_max_warps_per_sm",
        "device__attribute_max_warps_per_multiprocessor",
        "warps",
        "Warps per SM.",
    ),
    _m(
        "device_compute_capability_major",
        "device__attribute_compute_capability_major",
        "",
        "Compute capability (major).",
    ),
    _m(
        "device_compute_capability_minor",
        "device__attribute_compute_capability_minor",
        "",
        "Compute capability (minor).",
    ),
    _m("replay_passes", "profiler__replayer_passes", "passes", "Replay passes ncu needed."),
]

_PATTERNS: list[MetricSpec] = [
    MetricSpec(
        "tensor_ops",
        (),
        "ops",
        "Dense tensor-core operations over the per-instruction paths (wgmma and mma.sync, "
        "sparsity off); the per-precision counts below are preferred (analysis/kernel/tensor.py).",
        pattern=r"^sm__ops_path_tensor_op_[a-z]+_src_[a-z0-9_]+_sparsity_off\.sum$",
    ),
    MetricSpec(
        "tensor_ops_mma_sync",
        (),
        "ops",
        "Dense tensor-core operations on the legacy mma.sync path (HMMA, IMMA): on Hopper that "
        "path peaks at 2/3 of the wgmma rate.",
        pattern=r"^sm__ops_path_tensor_op_(hmma|imma)_src_[a-z0-9_]+_sparsity_off\.sum$",
    ),
]

# Tensor-core operations per input precision (a multiply-add is 2), every instruction path,
# dense and sparse: the work the roofline places under that precision's tensor roof. On the
# H200 (ncu 2025.3) one aggregate per precision: sm__ops_path_tensor_src_{fp16,bf16_dst_fp32,
# tf32_dst_fp32,int8,fp64}.sum, fp8 split by sparsity; the other sets are other GPUs' names
# (nsdiag/model/tensor_peaks.py says which were verified). fp4 (Blackwell only) has no entry.
TENSOR_OPS_PRECISIONS: tuple[str, ...] = ("fp16", "bf16", "tf32", "fp8", "int8", "fp64")
_TENSOR_OPS: list[MetricSpec] = [
    MetricSpec(
        f"tensor_ops_{precision}",
        tuple(name for group in NCU_TENSOR_OPS_GROUPS[precision] for name in group),
        "ops",
        f"Tensor-core operations on {precision} inputs (every path, dense and sparse).",
        groups=NCU_TENSOR_OPS_GROUPS[precision],
    )
    for precision in TENSOR_OPS_PRECISIONS
]

_STALLS: list[MetricSpec] = [
    _m(
        f"stall_{r}",
        (
            f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio",
            f"smsp__average_warp_latency_issue_stalled_{r}",
        ),
        "warps/issue",
        f"Warps stalled on '{r}' per issued instruction (sums to warp_cycles_per_issue).",
        (f"{WARP}/Stall {r.replace('_', ' ').title()}",),
    )
    for r in STALL_REASONS
]

CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec for spec in _CORE + _PATTERNS + _TENSOR_OPS + _STALLS
}

# Identity columns every kernel row has, besides the canonical metrics.
IDENTITY_COLUMNS: tuple[str, ...] = (
    "id",
    "ncu_id",
    "process_id",
    "process_name",
    "host",
    "name",
    "demangled",
    "context",
    "stream",
    "grid",
    "block",
    "device",
    "cc",
    "nvtx_range",
    "source",
)


def label_index() -> dict[str, str]:
    """Details-page 'Section/Label' -> canonical name."""
    return {label: spec.name for spec in CATALOGUE.values() for label in spec.labels}


# Canonical units whose base unit (model/units.py) a metric's printed unit must reduce to: a
# duration printed in a unit nsdiag cannot convert to ns would be a wrong number, not a metric.
_BASE_OF_UNIT = {"ns": "ns", "bytes": "byte", "Hz": "hz", "bytes/s": "byte/s"}


def expected_base_units() -> dict[str, str]:
    """ncu metric name -> the base unit its values must have (time, size, clock and bandwidth
    metrics of the catalogue)."""
    return {
        metric: _BASE_OF_UNIT[spec.unit]
        for spec in CATALOGUE.values()
        if spec.unit in _BASE_OF_UNIT
        for metric in spec.ncu
    }
