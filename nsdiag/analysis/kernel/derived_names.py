"""The names of the per-launch derived quantities derived.py computes, with their meanings:
DERIVED_METRICS (numeric; the rule loader accepts these names next to the catalogue's) and
DERIVED_TEXTS (text; a rule's message may show them, a condition never reads them).

Kept apart from derived.py so that loading and listing the rules imports no pandas or numpy.
"""

from __future__ import annotations

from nsdiag.analysis.kernel.tensor import TENSOR_DERIVED
from nsdiag.model.catalogue import STALL_REASONS

DERIVED_METRICS: dict[str, str] = {
    "flop_fp32": "FP32 floating-point operations (add + mul + 2*fma).",
    "flop_fp64": "FP64 floating-point operations.",
    "flop_fp16": "FP16 floating-point operations (2*add + 2*mul + 4*fma).",
    "flop_tensor": "Tensor-core operations counted as FLOPs (all precisions).",
    **TENSOR_DERIVED,
    "flop_total": "All floating-point operations, tensor-core ones included.",
    "l2_bytes": "Bytes through L2 (32 per sector).",
    "global_load_sectors_per_request": "Sectors per global load request (4 is ideal for 4-byte "
    "loads).",
    "global_store_sectors_per_request": "Sectors per global store request.",
    "global_load_waste": "Share of the global load sectors that reach L2 carrying no useful "
    "bytes: (1 - useful bytes per sector / 32) x (1 - L1 hit rate); 0 with no plain loads.",
    "global_store_waste": "The same for global stores (L1 merges partial writes to one sector "
    "before they leave the SM, which its hit rate counts).",
    "global_load_access_bytes": "Useful bytes per lane of a global load request: the access "
    "width (4 for a float, 16 for a float4), from sectors per request x useful bytes per sector / "
    "32 lanes; lower where warps are partly active or lanes share an address (a broadcast).",
    "global_store_access_bytes": "The same for global stores.",
    "global_access_bytes": "The wider of the two access widths (loads, stores) of the sides that "
    "move sectors: what a vectorised rewrite would widen.",
    "global_useful_bytes": "Bytes the threads asked for in global loads and stores: sectors x "
    "useful bytes per sector, both sides (what a coalesced kernel would still move, at most).",
    "global_load_sector_share": "Global load sectors, share of global load + store sectors (0-1).",
    "global_store_sector_share": "Global store sectors, share of global load + store sectors.",
    "shared_bank_conflict_pct": "Shared-memory wavefronts caused by bank conflicts, % of all.",
    "shared_ways": "Shared-memory wavefronts per request (1 = no conflict).",
    "local_sectors": "Local-memory sectors (loads + stores).",
    "lsu_sectors": "Global plus local sectors through L1 (loads + stores).",
    "stall_total": "Sum of all stall reasons (warp cycles per issue).",
    **{
        f"stall_share_{reason}": f"Share of stall cycles spent on '{reason}' (0-1)."
        for reason in STALL_REASONS
        if reason != "selected"
    },
    "top_stall_share": "Share of stall cycles of the top reason ('not_selected' never counts).",
    "occupancy_limit_min": "Fewest blocks per SM any resource allows (the occupancy limit).",
    "waves": "Waves of blocks: grid_size / (sm_count x occupancy_limit_min), unrounded (ncu's "
    "waves_per_sm has two decimals, so 1.004 waves reads 1.00); ncu's figure where the report "
    "lacks the occupancy limits.",
    "wave_tail": "Idle share of the last wave's SM time: (ceil(waves) - waves) / ceil(waves).",
}
DERIVED_TEXTS: dict[str, str] = {
    "occupancy_limiter": "What limits blocks per SM most: registers, shared_mem, warps, blocks or "
    "barriers (the smallest occupancy limit).",
    "top_stall": "The warp-stall reason with the largest share (not_selected never counts).",
}
