"""PyTorch idioms a performance engineer names with a one-line fix, as data beside the cause ->
change table (causes.py): what marks each, the fix, and how its saving is counted.

Three shapes:
- a kernel idiom recasts the kernel-local findings of its `causes` on a kernel of PyTorch's own
  whose name matches `kernel` (the user does not rewrite `indexFuncLargeIndex`; they call
  another operator): one change across every such kernel, with the idiom's title and fix;
- a joint idiom: when the findings of all its `causes` are present, they are one change (pinned
  batches and a copy one step ahead: the user's change is one, its saving their union);
- a program idiom has a program analysis and rule of its own (`rule`); its entry here documents
  it with the others (docs/diagnosis.md's idiom table is this table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Idiom:
    slug: str
    title: str  # the change's title
    evidence: str  # what marks it, in a line
    fix: str  # the one-line fix
    saving: str  # how its saving is counted
    causes: tuple[str, ...] = ()  # kernel and joint idioms: the causes it recasts
    kernel: str = ""  # kernel idioms: a regex on the kernel's name (PyTorch's own kernels)
    rule: str = ""  # program idioms: the rule that reports it

    @property
    def key(self) -> str:
        return f"idiom:{self.slug}"


IDIOMS: tuple[Idiom, ...] = (
    Idiom(
        "count-with-bincount",
        "Count with torch.bincount instead of index_add_ / scatter_add_ into few bins",
        "NSD106 atomic-contention on PyTorch's index_add_ or scatter_add_ kernel "
        "(indexFuncLargeIndex / _scatter_gather_elementwise_kernel with ReduceAdd): one global "
        "atomic per sample into a few counters, the L2 atomic units of one slice saturated",
        "Count with counts = torch.bincount(index, minlength=bins) (or torch.histc(values, bins, "
        "min, max)): "
        "PyTorch counts into per-block shared-memory histograms and adds them once; for weighted "
        "sums, torch.bincount(index, weights=w, minlength=bins)",
        "NSD106's: the kernel's time less what its busiest unit needs (index_add_ of 200M samples "
        "into 256 bins on the H200: 39.6 ms predicted of a 43.2 ms step, bincount measured 4.5 ms)",
        causes=("atomic-contention",),
        kernel=r"indexFunc(Small|Large)Index.*ReduceAdd|_scatter_gather_elementwise_kernel.*ReduceAdd",
    ),
    Idiom(
        "pin-and-prefetch",
        "Pin the batches and copy the next one ahead on a side stream",
        "NSD401 pageable-memcpy and NSD402 no-copy-compute-overlap together: batches copied from "
        "pageable memory, in line with the step",
        "Pin the host batches once (batch.pin_memory(), or DataLoader(pin_memory=True)) and copy "
        "batch i+1 with .to(device, non_blocking=True) on a side stream (torch.cuda.Stream) while "
        "step i runs; make the step's stream wait for it (wait_stream) and mark the batch "
        "(record_stream)",
        "the union of the two: the pinned copy's gain (NSD401) plus hiding what is left of the "
        "copy behind the kernels (NSD402) (copy_feed.py on the H200: 23.2 ms predicted, 24 ms "
        "measured under nsys, 22 ms plain)",
        causes=("pageable-memcpy", "no-copy-compute-overlap"),
    ),
    Idiom(
        "fused-optimizer",
        "Step the optimizer over all parameters at once (fused=True)",
        "NSD413: torch.optim.<Optimizer>.step ranges launching 100+ single-tensor kernels a call",
        "Build the optimizer with torch.optim.AdamW(params, ..., fused=True) (or foreach=True), "
        "clip_grad_norm_(..., foreach=True), zero_grad(set_to_none=True)",
        "the GPU's idle time while the host was in the step, less a fused step's host time "
        "(ViT-S, AdamW foreach=False on the H200: 23.1 ms predicted, 19.2 ms measured under "
        "nsys, 14.8 ms plain)",
        rule="NSD413",
    ),
    Idiom(
        "graph-the-forward",
        "Replay the model's forward as a CUDA graph (a decode loop)",
        "NSD406 launch-bound in an iteration that calls the model's forward many times (a decode "
        "loop: one forward per token), the host's work between the forwards measured apart",
        'Use generate(..., cache_implementation="static") (a static KV cache, whose decode step '
        'generate() compiles into CUDA graphs), or torch.compile(model, mode="reduce-overhead")',
        "the launch-bound idle time inside the forwards only: the host's own per-token work "
        "between them (sampling, stopping criteria, cache bookkeeping) stays",
        rule="NSD406",
    ),
    Idiom(
        "graph-the-rest",
        "Capture the rest of the step in the CUDA graph (the program already replays graphs)",
        "NSD406 launch-bound in a program that replays CUDA graphs (cudaGraphLaunch calls in "
        "the region): the idle time left is the host's eager launches around the graphs",
        "Move the eager work around the graph into it (capture the whole step: inputs copied "
        "into static buffers before graph.replay(), outputs read after), or fewer, larger graphs; "
        "a graph's own kernels are already one launch",
        "NSD406's, with the graph's kernels counted as the one launch the host made",
        rule="NSD406",
    ),
)


def kernel_idiom(cause: str, kernel_name: str) -> Idiom | None:
    """The kernel idiom that recasts a finding of `cause` on this kernel, if any."""
    return _kernel_idiom(cause, kernel_name)


@lru_cache(maxsize=4096)
def _kernel_idiom(cause: str, kernel_name: str) -> Idiom | None:
    for idiom in IDIOMS:
        if idiom.kernel and cause in idiom.causes and re.search(idiom.kernel, kernel_name):
            return idiom
    return None


def joint_idiom(causes: frozenset[str], cause: str) -> Idiom | None:
    """The joint idiom a finding of `cause` belongs to when all of its causes are among
    `causes` (the diagnosis's), if any."""
    for idiom in IDIOMS:
        joint = not idiom.kernel and not idiom.rule
        if joint and cause in idiom.causes and set(idiom.causes) <= causes:
            return idiom
    return None


def idiom_named(slug: str) -> Idiom | None:
    return next((i for i in IDIOMS if i.slug == slug), None)
