"""Whether a change of BEFORE was made: what AFTER shows of it, per kind of change.

A finding that no longer fires says that the time it measured is gone, not that its change was
made: a kernel whose findings resolve because AFTER has no Nsight Compute metrics for it, or
because a CUDA graph split cuDNN's attention into fifteen eager kernels, was not rewritten. So
each resolved or shrunk finding is checked against what its change does (analysis/changes.py,
records/causes.py), on its kernel matches (kernels.py) or the side's timeline (side.py):

- precision (TF32, bf16): a matched AFTER kernel computes in another precision than BEFORE's;
- shapes (padded dimensions, more rows): the kernel runs with another grid or block, or the
  library picked another kernel for it;
- a rewrite of the user's kernel: the kernel was replaced, regrouped or runs with another shape,
  or AFTER profiled it and the rule no longer fires;
- a library's kernel (choose another shape, backend, operator): the library picked another
  kernel for the same job (same library role: matrix product, attention); a kernel whose work
  moved to kernels of other roles (cuDNN's attention split into eager kernels) was not;
- a CUDA graph: AFTER replays graphs (more cudaGraphLaunch calls an iteration), or launches
  fewer kernels (LAUNCHES_GONE fewer: the tiny kernels fused);
- a fusion chain, the layout conversions, eager attention: their kernels' launches went down
  by LAUNCHES_GONE or more (fused, replaced or gone; channels_last batch-norm kernels that take
  the chain's place one for one are not a fusion);
- the optimizer stepped at once: fewer kernel launches an iteration;
- pinned copies: fewer bytes copied from pageable memory;
- fewer synchronisations: fewer synchronising CUDA calls an iteration;
- the other program findings (host work, idle gaps, copy overlap, the ranks'): the rule
  measures the timeline, which AFTER has: that it no longer fires, or fires at under half its
  saving (SHRUNK), is the evidence; a little smaller is unclear.

A finding is MADE, NOT_MADE or UNCLEAR (AFTER cannot tell: no API table, no timeline, a kernel
gone with nothing to say what replaced it). Only made findings count in the prediction check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nsdiag.analysis.diff.kernels import LABELS, KernelMatch
from nsdiag.analysis.diff.side import KernelTimes, Side, role_of
from nsdiag.analysis.records.changes import Change
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.kernel_owner import library_of

MADE, NOT_MADE, UNCLEAR = "made", "not made", "unclear"
LAUNCHES_GONE = 0.25  # fewer kernel launches an iteration, as a share, that count as fused
PAGEABLE_GONE = 0.5  # fewer pageable bytes an iteration, as a share, that count as pinned
SYNCS_GONE = 0.25  # fewer synchronising calls an iteration, as a share
SHRUNK = 0.5  # a timeline rule's saving down by this share: the time it measures is mostly gone
SHAPE_CHANGED = ("name", "role", "replaced", "fused", "split", "regrouped", "gone")

# change kinds (records/causes.py KINDS, idiom keys) by the evidence their kernels need
PRECISION = ("precision",)
SHAPE = ("pad-dims", "batch-rows")
GRAPH = ("cuda-graph", "idiom:graph-the-forward", "idiom:graph-the-rest")
FEWER_LAUNCHES = ("fused-optimizer", "idiom:fused-optimizer")
# program causes whose evidence is their kernels' launches
KERNEL_LAUNCHES = ("fusion-candidate", "layout-conversion", "eager-attention")


@dataclass(frozen=True)
class Evidence:
    status: str  # MADE | NOT_MADE | UNCLEAR
    why: str  # what AFTER shows, in a few words


def of_finding(
    change: Change | None,
    status: str,
    cause: str,
    kernel: str | None,
    scope: frozenset[int],
    matches: Mapping[int, KernelMatch],
    before: Side,
    after: Side,
    rechecked: bool,
    shrink: float | None = None,
) -> Evidence:
    """The evidence for one finding of BEFORE, by what its change does. `status`: the
    finding's (findings.STATUSES); `kernel`: a kernel finding's kernel (its full name), None
    for a program finding; `rechecked`: AFTER has the rule's own input for it (Nsight Compute
    metrics of its kernel); `shrink`: a changed finding's drop as a share of its saving."""
    if status in ("persists", "new"):
        return Evidence(NOT_MADE, "the rule still fires")
    kind = change.kind if change is not None else ""
    if kind in GRAPH:
        if after.basis == "gpu-time":
            return Evidence(UNCLEAR, "AFTER has no timeline")
        return _graphs(before, after)
    if kernel is not None:
        scoped = [matches[i] for i in sorted(scope)]
        return _kernel_change(kind, kernel, status, scoped, rechecked)
    if cause in KERNEL_LAUNCHES and scope:  # the profiled launches count them too
        return _launches_gone([matches[i] for i in sorted(scope)])
    if after.basis == "gpu-time":
        return Evidence(UNCLEAR, "AFTER has no timeline")
    if kind in FEWER_LAUNCHES:
        return _fewer_launches(before, after)
    if cause == "pageable-memcpy":
        return _pinned(before, after)
    if cause == "sync-heavy" and (syncs := _fewer_syncs(before, after)) is not None:
        return syncs
    if status == "unchecked":
        return Evidence(UNCLEAR, "AFTER could not apply the rule")
    if status == "changed" and (shrink is None or shrink < SHRUNK):
        return Evidence(UNCLEAR, "the rule fires on AFTER's timeline, a little smaller")
    shrunk = "fires far smaller" if status == "changed" else "no longer fires"
    return Evidence(MADE, f"the rule {shrunk} on AFTER's timeline")


def combined(evidence: Sequence[Evidence]) -> tuple[str, str]:
    """A change's status over its findings' evidence: made (all), partly (some), unclear,
    not made; and the reason of its first made finding (else its first)."""
    if not evidence:
        return NOT_MADE, ""
    made = [e for e in evidence if e.status == MADE]
    if len(made) == len(evidence):
        return MADE, made[0].why
    if made:
        return "partly", f"{made[0].why}; {len(made)} of {len(evidence)} findings"
    unclear = [e for e in evidence if e.status == UNCLEAR]
    return (UNCLEAR, unclear[0].why) if unclear else (NOT_MADE, evidence[0].why)


# ------------------------------------------------------------------------- kernel changes


def _kernel_change(
    kind: str, kernel: str, status: str, scope: list[KernelMatch], rechecked: bool
) -> Evidence:
    if not scope:
        return Evidence(UNCLEAR, "its kernel was not found in the timeline")
    per = [_kernel_match(kind, kernel, m, status, rechecked) for m in scope]
    made = [e for e in per if e.status == MADE]
    if made:
        return made[0]
    unclear = [e for e in per if e.status == UNCLEAR]
    return unclear[0] if unclear else per[0]


def _kernel_match(kind: str, kernel: str, m: KernelMatch, status: str, rechecked: bool) -> Evidence:
    """What one kernel match says of a change to its BEFORE kernel."""
    how = LABELS[m.method]
    if m.method == "signature":
        rewritten = rechecked and status in ("resolved", "changed") and kind == "kernel-rewrite"
        if rewritten and library_of(kernel) is None:
            return Evidence(MADE, "the rule no longer fires on AFTER's profile of it")
        return Evidence(NOT_MADE, "its kernel runs unchanged (same name, grid and block)")
    if m.method == "gone":
        return Evidence(UNCLEAR, "its kernel no longer runs, and nothing took its place")
    if kind in PRECISION:
        return _precision(m)
    if kind in SHAPE:
        if m.method in SHAPE_CHANGED:
            return Evidence(MADE, f"its kernel's shape changed ({how})")
        return Evidence(NOT_MADE, f"its kernel's shape is the same ({how})")
    lib = library_of(kernel)
    if lib is None:  # the user's kernel: replaced, reshaped or regrouped is rewritten
        return Evidence(MADE, f"its kernel was {how}")
    return _library_kernel(m, lib, kernel)


def _library_kernel(m: KernelMatch, library: str, kernel: str) -> Evidence:
    """A library's kernel: made where the library now runs another kernel for the same job."""
    role = role_of(kernel)
    if m.method in ("role", "name"):
        return Evidence(MADE, f"{_LIB.get(library, library)} picked another kernel for it")
    roles = {k.role for k in m.after}
    if role is None or role in roles:
        return Evidence(MADE, f"its kernel was {LABELS[m.method]}")
    n = len(m.after)
    into = "another kernel" if n == 1 else f"{n} other kernels"
    article = "an" if role[0] in "aeiou" else "a"
    return Evidence(NOT_MADE, f"its {role} now runs in {into}, not in {article} {role} kernel")


_LIB = {"cublas": "cuBLAS", "cublaslt": "cuBLASLt", "cudnn": "cuDNN", "cutlass": "cuBLAS",
        "pytorch": "PyTorch", "triton": "torch.compile"}  # fmt: skip


def _precision(m: KernelMatch) -> Evidence:
    before = {_inputs(k) for k in m.before} - {None}
    after = {_inputs(k) for k in m.after} - {None}
    if not before or not after:
        return Evidence(UNCLEAR, "its kernels' names do not say their precision")
    if after != before:
        b, a = "/".join(sorted(before)), "/".join(sorted(after))  # type: ignore[arg-type]
        return Evidence(MADE, f"its kernels' precision changed ({b} -> {a})")
    return Evidence(NOT_MADE, f"its kernels still compute in {'/'.join(sorted(before))}")  # type: ignore[arg-type]


def _inputs(k: KernelTimes) -> str | None:
    """What the kernel computes in: its operands' type, tf32 where the name says so (cuBLAS's
    `f32f32_tf32f32_f32`: fp32 operands, TF32 tensor-core math)."""
    p = parse_kernel_name(k.name).precision
    if p is None:
        return None
    return "tf32" if "tf32" in p.printed.lower() else p.inputs


# ------------------------------------------------------------------------ program changes


def _graphs(before: Side, after: Side) -> Evidence:
    b, a = before.graph_launches, after.graph_launches
    if a is not None and a > (b or 0.0):
        return Evidence(MADE, f"AFTER replays CUDA graphs ({_times(a, 'graph launch')})")
    gone = _fewer_launches(before, after)
    if gone.status == MADE:
        return gone
    if a is None:
        return Evidence(UNCLEAR, "AFTER has no CUDA API calls to count graph launches")
    return Evidence(NOT_MADE, "AFTER launches no more graphs, and as many kernels")


def _times(n: float, what: str) -> str:
    """`1 graph launch an iteration`, `2.5 graph launches an iteration`."""
    return f"{n:.3g} {what}{'' if n == 1 else 'es' if what.endswith('h') else 's'} an iteration"


def _fewer_launches(before: Side, after: Side) -> Evidence:
    b, a = before.launches_per_iteration, after.launches_per_iteration
    if b > 0 and a <= (1 - LAUNCHES_GONE) * b:
        return Evidence(MADE, f"kernel launches an iteration {b:.4g} -> {a:.4g}")
    return Evidence(NOT_MADE, f"kernel launches an iteration {b:.4g} -> {a:.4g}")


def _launches_gone(scope: list[KernelMatch]) -> Evidence:
    b = sum(m.launches("before") for m in scope)
    a = sum(m.launches("after") for m in scope)
    if b > 0 and a <= (1 - LAUNCHES_GONE) * b:
        return Evidence(MADE, f"its kernels' launches an iteration {b:.4g} -> {a:.4g}")
    return Evidence(NOT_MADE, f"its kernels' launches an iteration {b:.4g} -> {a:.4g}")


def _fewer_syncs(before: Side, after: Side) -> Evidence | None:
    """Synchronising calls an iteration down by SYNCS_GONE (None: no API table to count)."""
    b, a = before.syncs, after.syncs
    if b is None or a is None:
        return None
    if b > 0 and a <= (1 - SYNCS_GONE) * b:
        return Evidence(MADE, f"synchronisations an iteration {b:.3g} -> {a:.3g}")
    return Evidence(NOT_MADE, f"as many synchronisations an iteration ({b:.3g} -> {a:.3g})")


def _pinned(before: Side, after: Side) -> Evidence:
    b, a = before.pageable_bytes or 0.0, after.pageable_bytes or 0.0
    if b > 0 and a <= (1 - PAGEABLE_GONE) * b:
        return Evidence(MADE, "fewer copies from pageable memory")
    return Evidence(NOT_MADE, "as many bytes copied from pageable memory")
