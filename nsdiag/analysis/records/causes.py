"""The causes, each declared once: one `Cause` per slug a rule may name, and the kinds of change
that fix them.

A cause says where its rules look (`scope`), which change fixes it (`change`, a `ChangeKind`:
how the change groups findings and its title), what the saving of one of its findings comes out
of (`budget`: analysis/changes.py and analysis/marginal.py spend it) and what it is, in a line
(`doc`). The rule loader (analysis/ruleset.py) refuses a shipped rule whose cause is not here
and any rule whose cause is here with another scope; changes.py groups and budgets every finding
by its cause's record; docs/diagnosis.md's cause table is this table (render/ruledoc.py writes
it, tests/test_causes.py holds the two together). A cause a rule of the user's names and this
table does not know is `cause_of`'s default: one change per finding. Adding a cause:
docs/architecture.md, "How to add a cause".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Where a cause's rules look: one kernel signature, the program (its timeline, its launch
# sequence), or the ranks of a distributed run (program rules whose analysis needs the ranks).
KERNEL, PROGRAM, RANK = "kernel", "program", "rank"
SCOPES = (KERNEL, PROGRAM, RANK)

# What a finding's saving comes out of (the budgets of analysis/changes.py).
KERNEL_TIME = "kernel time"  # its kernel's time in the region (every kernel finding)
KERNELS_TIME = "kernels' time"  # the time of the kernels it names (a chain, the conversions)
WAIT = "wait"  # distributed: the one wait every rank's GPU shares; one rank: its own time
OWN_TIME = "own time"  # the stretch of time it is about (its saved_ns)
BUDGETS = (KERNEL_TIME, KERNELS_TIME, WAIT, OWN_TIME)

# How a kind of change groups the findings its causes fire.
SWITCH = "switch"  # one change across every kernel and range it fires on
PER_KERNEL = "kernel"  # one change per kernel name, its rule hits combined
PER_FINDING = "finding"  # one change per finding


@dataclass(frozen=True)
class ChangeKind:
    """A kind of change: how it groups findings, and its title in the user's words ({kernel}:
    the kernel's short name, {where}: " in NVTX range X" or "", {n}: operations in a chain)."""

    name: str
    group: str  # SWITCH | PER_KERNEL | PER_FINDING
    title: str
    key: str = ""  # SWITCH: the change's key; PER_KERNEL: its prefix


# What a finding of a cause is about, where its code is looked for (analysis/program/code.py):
# the kernels it names, the host-device copies of its ranges, or the idle GPU time the host
# spent in one state (a column of the wait account, timeline/waits.py); "": no code (the ranks).
KERNELS, COPIES = "kernels", "copies"
IDLE_LAUNCH, IDLE_CPU, IDLE_SYNC, IDLE_OTHER = (
    "idle:launch",
    "idle:cpu",
    "idle:sync_ns",
    "idle:other",
)
WORK = (KERNELS, COPIES, IDLE_LAUNCH, IDLE_CPU, IDLE_SYNC, IDLE_OTHER, "")


@dataclass(frozen=True)
class Cause:
    slug: str
    scope: str  # KERNEL | PROGRAM | RANK
    change: str  # the name of the ChangeKind that fixes it; "": one change per finding
    budget: str  # one of BUDGETS
    doc: str  # what it is, in a line
    work: str = KERNELS  # one of WORK
    # causes whose findings on the same kernel this one's replaces (a matrix product too thin
    # for its tiles is not told to use tensor cores: it should not be a matrix product)
    supersedes: tuple[str, ...] = ()

    @property
    def rule_scope(self) -> str:
        """The `scope` of the rule files that name it ("kernel" or "program")."""
        return KERNEL if self.scope == KERNEL else PROGRAM


KINDS: Mapping[str, ChangeKind] = {
    k.name: k
    for k in (
        ChangeKind("precision", SWITCH, "Turn on TF32 or bf16 autocast for the fp32 GEMMs",
                   "precision:tf32-or-bf16"),
        ChangeKind("pad-dims", SWITCH, "Pad matrix dimensions to multiples of 8 (better 64)",
                   "pad-dims"),
        ChangeKind("batch-rows", SWITCH,
                   "Give the small matrix products more rows (batch more per step)", "batch-rows"),
        ChangeKind("channels-last", SWITCH,
                   "Keep tensors in one layout (channels_last) end to end", "channels-last"),
        ChangeKind("cuda-graph", SWITCH,
                   "Replay the step as a CUDA graph, or fuse its tiny kernels", "cuda-graph"),
        ChangeKind("fused-optimizer", SWITCH,
                   "Step the optimizer over all parameters at once (fused=True)",
                   "fused-optimizer"),
        ChangeKind("fused-attention", SWITCH,
                   "Use fused attention (scaled_dot_product_attention)", "fused-attention"),
        ChangeKind("kernel-rewrite", PER_KERNEL, "Rewrite or tune {kernel}", "kernel-rewrite"),
        ChangeKind("fuse", PER_FINDING, "Fuse the chain of {n} operations{where}"),
        ChangeKind("pin-memory", PER_FINDING, "Pin the host buffers of the copies{where}"),
        ChangeKind("overlap-copies", PER_FINDING, "Overlap the copies with the kernels{where}"),
        ChangeKind("fewer-syncs", PER_FINDING, "Remove host synchronisations from the step{where}"),
        ChangeKind("host-work", PER_FINDING, "Move host work off the step's critical path{where}"),
        ChangeKind("alloc-load", PER_FINDING, "Allocate and load before the loop{where}"),
        ChangeKind("balance-ranks", PER_FINDING, "Even out the ranks' work per step"),
        ChangeKind("overlap-communication", PER_FINDING, "Overlap communication with computation"),
    )
}  # fmt: skip


def _kernel(slug: str, doc: str) -> Cause:
    """A kernel-local cause: a rewrite of that kernel fixes it."""
    return Cause(slug, KERNEL, "kernel-rewrite", KERNEL_TIME, doc)


CAUSES: Mapping[str, Cause] = {
    c.slug: c
    for c in (
        # switches and shapes: one change across every kernel they fire on
        Cause("tensor-core-unused", KERNEL, "precision", KERNEL_TIME,
              "matrix math on CUDA cores instead of tensor cores"),
        Cause("gemm-misaligned", KERNEL, "pad-dims", KERNEL_TIME,
              "a matrix product on a fallback kernel: a dimension not a multiple of 8"),
        Cause("small-gemm", KERNEL, "batch-rows", KERNEL_TIME,
              "a matrix product too small for the GPU (tiny tiles, idle tensor cores)"),
        Cause("launch-overhead", KERNEL, "cuda-graph", KERNEL_TIME,
              "a kernel about as short as its launch, launched many times"),
        # kernel-local: a rewrite of that kernel
        _kernel("dram-bandwidth-saturated",
                "DRAM bandwidth at the ceiling this GPU sustains: fewer bytes help"),
        _kernel("dram-bandwidth-underused", "DRAM-bound below the bandwidth this GPU sustains"),
        _kernel("l2-bound", "L2 cache bandwidth is the limiter"),
        _kernel("uncoalesced-global-access",
                "global accesses use little of each sector they fetch"),
        _kernel("shared-bank-conflicts", "shared-memory accesses serialised by bank conflicts"),
        _kernel("local-memory-spill", "local memory traffic: register spills or indexed arrays"),
        _kernel("memory-latency", "memory latency not hidden"),
        _kernel("atomic-contention", "atomics contend for few addresses"),
        _kernel("warp-divergence", "the threads of a warp take different branches"),
        _kernel("compute-pipe-saturated", "a compute pipe is saturated"),
        _kernel("fp64-heavy", "double-precision arithmetic dominates"),
        _kernel("special-function-heavy", "the special-function unit (XU) is the bottleneck"),
        Cause("degenerate-gemm", KERNEL, "kernel-rewrite", KERNEL_TIME,
              "a matrix product too thin for its tiles", supersedes=("tensor-core-unused",)),
        _kernel("barrier-stall", "warps wait at `__syncthreads()`"),
        _kernel("low-occupancy", "occupancy too low to hide latency"),
        _kernel("tail-effect", "a partial last wave (tail effect, wave quantisation)"),
        _kernel("small-grid", "a grid too small to fill the GPU"),
        _kernel("short-scoreboard-stall", "warps wait on shared-memory or MUFU results"),
        _kernel("mio-throttle-stall", "the shared-memory / special-function queue is full"),
        _kernel("lg-throttle-stall", "the global / local load-store queue is full"),
        _kernel("math-pipe-throttle-stall", "an arithmetic pipe is oversubscribed"),
        # the program: its launch sequence and its timeline
        Cause("fusion-candidate", PROGRAM, "fuse", KERNELS_TIME,
              "memory-shaped operations in a row pass intermediates through DRAM"),
        Cause("layout-conversion", PROGRAM, "channels-last", KERNELS_TIME,
              "time spent converting tensors between layouts"),
        Cause("eager-attention", PROGRAM, "fused-attention", KERNELS_TIME,
              "attention computed eagerly: the scores pass through DRAM"),
        Cause("pageable-memcpy", PROGRAM, "pin-memory", OWN_TIME,
              "host-device copies from pageable memory", COPIES),
        Cause("no-copy-compute-overlap", PROGRAM, "overlap-copies", OWN_TIME,
              "copies and kernels run one after another", COPIES),
        Cause("sync-heavy", PROGRAM, "fewer-syncs", WAIT,
              "the GPU waits for the host after synchronisations", IDLE_SYNC),
        Cause("launch-bound", PROGRAM, "cuda-graph", WAIT,
              "the GPU waits for the host to launch work", IDLE_LAUNCH),
        Cause("per-parameter-optimizer", PROGRAM, "fused-optimizer", WAIT,
              "an optimizer stepping its parameters one by one (foreach=False)", IDLE_LAUNCH),
        Cause("cpu-bound", PROGRAM, "host-work", WAIT,
              "the GPU waits while the host works outside CUDA", IDLE_CPU),
        Cause("gpu-idle-gaps", PROGRAM, "alloc-load", WAIT,
              "the GPU waits while the host allocates, loads or waits elsewhere", IDLE_OTHER),
        # the ranks of a distributed run
        Cause("rank-imbalance", RANK, "balance-ranks", WAIT,
              "one rank reaches the collectives late; the others wait for it", ""),
        Cause("exposed-communication", RANK, "overlap-communication", WAIT,
              "collective communication not overlapped with computation", ""),
    )
}  # fmt: skip


def cause_of(slug: str, scope: str) -> Cause:
    """The record of the cause a finding of `scope` names. A cause the table does not know (a
    rule of the user's with a new slug) is fixed by a change of its own (one change per finding),
    its saving out of its kernel's time (a kernel finding) or its own time."""
    known = CAUSES.get(slug)
    if known is not None:
        return known
    if scope == KERNEL:
        return Cause(slug, scope, "", KERNEL_TIME, "", KERNELS)
    return Cause(slug, scope, "", OWN_TIME, "", "")
