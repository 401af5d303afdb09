"""fusion-candidate: chains of memory-shaped operations that pass intermediates through DRAM.

The chain is found on the analysed region's launch sequence (analysis/program/launch_sequence.py),
one stream at a time, across NVTX ranges, and broken where the host synchronised (an iteration's
end). Consecutive launches of one kernel signature are one operation (a library often splits an
operation into several launches). Two operations link into a chain when
- both have ncu byte counts: the second reads back from DRAM at least `min_read_fraction` of
  what the first wrote (at least `min_intermediate_bytes`), and neither is compute-bound,
  launch-bound or running tensor-core math; chains of such byte-matched kernels that all stream
  at the DRAM roof are left out unless the names say they are elementwise operations (ncu does
  not record which buffer a kernel touched, and unrelated kernels of equal size match on bytes);
- or either lacks byte counts (no ncu data: an nsys timeline alone) and both are named as
  elementwise operations (PyTorch's elementwise kernels, Triton pointwise kernels): the
  estimate is then marked as name-based.
The saving: with bytes, the chain's time minus a fused kernel's (its bytes less each
intermediate's write and read, at the best bandwidth the chain or a measured copy reached);
from names, the chain's time minus its longest operation (a fused elementwise kernel streams
the data once, as one of its steps did). Chains that repeat (every iteration) are one finding.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.diagnosis import Evidence, Finding, FusionChain, share_of
from nsdiag.analysis.program.analyses import FUSION_CANDIDATES
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.model.names import short_names

if TYPE_CHECKING:  # the rule loader imports the analyses' records
    from nsdiag.analysis.rules.spec import RuleSpec

_TENSOR_IDLE_PCT = 5.0  # an operation whose tensor pipe is busier runs real matrix math
ELEMENTWISE = frozenset({"elementwise"})


@dataclass(frozen=True)
class FusionStep:
    """Consecutive launches of one kernel: one operation."""

    name: str
    kind: str  # what its name says (kernel_facts)
    duration_ns: float
    read_bytes: float  # NaN without ncu data
    write_bytes: float
    best_bytes_per_s: float
    bounds: frozenset[str]
    min_dram_pct: float
    tensor_pct: float
    ranges: frozenset[str]  # NVTX ranges of its launches ("" outside any)

    @property
    def has_bytes(self) -> bool:
        return not (np.isnan(self.read_bytes) or np.isnan(self.write_bytes))

    @property
    def elementwise(self) -> bool:
        return self.kind in ELEMENTWISE

    @property
    def fusable(self) -> bool:
        """Memory-shaped: compute-bound, launch-bound and tensor-core kernels (convolutions,
        real GEMMs) are not what this rule fuses away; without ncu data, only what the name
        says is elementwise."""
        if not self.has_bytes:
            return self.elementwise
        return not self.bounds & {"compute", "launch"} and self.tensor_pct < _TENSOR_IDLE_PCT


@dataclass(frozen=True)
class ChainCost:
    """What one occurrence of a chain costs, and what a fused kernel would save."""

    time_ns: float
    moved_bytes: float  # NaN when estimated from names
    intermediate_bytes: float
    saved_ns: float
    stream_bytes_per_s: float  # the bandwidth a fused kernel would stream at (NaN from names)
    by_names: bool


def _step(run: Mapping[str, npt.NDArray[Any]], a: int, b: int) -> FusionStep:
    """Launches a..b-1 of a stream (one kernel, back to back) as one operation."""
    read, write = run["read_bytes"][a:b], run["write_bytes"][a:b]
    return FusionStep(
        name=str(run["name"][a]),
        kind=str(run["kind"][a]),
        duration_ns=float(run["duration_ns"][a:b].sum()),
        read_bytes=float(read.sum()) if not np.isnan(read).any() else np.nan,
        write_bytes=float(write.sum()) if not np.isnan(write).any() else np.nan,
        best_bytes_per_s=float(run["best_bytes_per_s"][a:b].max()),
        bounds=frozenset(str(x) for x in run["bound"][a:b] if x),
        min_dram_pct=float(run["dram_pct"][a:b].min()),
        tensor_pct=float(run["tensor_pct"][a:b].max()),
        ranges=frozenset(str(r) for r in run["range"][a:b]),
    )


_STEP_COLUMNS = ("name", "kind", "bound", "range")
_STEP_NUMBERS = ("duration_ns", "read_bytes", "write_bytes", "best_bytes_per_s", "dram_pct")


def _segments(stream: pd.DataFrame) -> list[list[FusionStep]]:
    """The stream's launches cut at host synchronisations, each as a list of steps (runs of one
    kernel), found with array operations: a stream holds tens of thousands of launches."""
    if not len(stream):
        return []
    run: dict[str, npt.NDArray[Any]] = {c: stream[c].to_numpy(dtype=object) for c in _STEP_COLUMNS}
    for c in (*_STEP_NUMBERS, "tensor_pct"):
        run[c] = stream[c].to_numpy(dtype="float64")
    # NaN (no ncu data) counts as 0 in a step's maxima and minima: done once per stream, not
    # once per step (a BERT timeline has 30,000 steps)
    for c in ("duration_ns", "best_bytes_per_s", "dram_pct", "tensor_pct"):
        run[c] = np.nan_to_num(run[c])
    synced = stream["synced_before"].to_numpy(dtype=bool)
    names = stream["name"].astype(str).to_numpy()
    starts_segment = synced.copy()
    starts_segment[0] = True
    starts_run = starts_segment | np.concatenate([[True], names[1:] != names[:-1]])
    run_starts = np.flatnonzero(starts_run)
    run_ends = np.append(run_starts[1:], len(names))
    out: list[list[FusionStep]] = []
    for a, b in zip(run_starts.tolist(), run_ends.tolist(), strict=True):
        if starts_segment[a]:
            out.append([])
        out[-1].append(_step(run, a, b))
    return out


def _linked(a: FusionStep, b: FusionStep, params: Mapping[str, float]) -> bool:
    if not (a.fusable and b.fusable):
        return False
    if a.has_bytes and b.has_bytes:
        return bool(
            a.write_bytes >= params["min_intermediate_bytes"]
            and b.read_bytes >= params["min_read_fraction"] * a.write_bytes
        )
    return a.elementwise and b.elementwise


def _chains_in(steps: Sequence[FusionStep], params: Mapping[str, float]) -> list[list[FusionStep]]:
    chains: list[list[FusionStep]] = []
    current: list[FusionStep] = []
    for step in steps:
        if current and _linked(current[-1], step, params):
            current.append(step)
            continue
        if len(current) >= 2:
            chains.append(current)
        current = [step]
    if len(current) >= 2:
        chains.append(current)
    return chains


def _kept(chain: Sequence[FusionStep], at_roof: float) -> bool:
    """A byte-matched chain whose kernels all stream at the DRAM roof may be independent
    kernels of equal size; named elementwise operations are chains whatever their speed."""
    return all(s.elementwise for s in chain) or min(s.min_dram_pct for s in chain) < at_roof


def chains(sequence: pd.DataFrame, params: Mapping[str, float]) -> list[list[FusionStep]]:
    """The chains of the launch sequence, per process and stream. `params`:
    FUSION_CANDIDATES's, complete (FUSION_CANDIDATES.params_of)."""
    at_roof = params["at_roof_dram_pct"]
    found: list[list[FusionStep]] = []
    for _, stream in sequence.groupby(["process_id", "stream"], sort=False, dropna=False):
        for steps in _segments(stream):
            found += _chains_in(steps, params)
    return [c for c in found if _kept(c, at_roof)]


def _cost(chain: Sequence[FusionStep], ceiling: float) -> ChainCost:
    time_ns = sum(step.duration_ns for step in chain)
    if not all(step.has_bytes for step in chain):
        longest = max(step.duration_ns for step in chain)
        return ChainCost(time_ns, np.nan, np.nan, time_ns - longest, np.nan, True)
    moved = sum(step.read_bytes + step.write_bytes for step in chain)
    intermediate = sum(min(a.write_bytes, b.read_bytes) for a, b in itertools.pairwise(chain))
    remaining = max(moved - 2 * intermediate, 0.0)
    stream_bw = max(max(step.best_bytes_per_s for step in chain), ceiling)
    fused_ns = remaining / stream_bw * 1e9 if stream_bw > 0 else time_ns
    return ChainCost(time_ns, moved, intermediate, max(time_ns - fused_ns, 0.0), stream_bw, False)


def _without_attention(ctx: ProgramContext) -> pd.DataFrame:
    """The launch sequence with eager attention's score kernels made unfusable: the
    eager-attention finding claims them (its fix, fused attention, removes them)."""
    inside, _ = ctx.attention
    if not inside.any():
        return ctx.launches
    seq = ctx.launches.copy()
    seq.loc[inside, "kind"] = "attention"
    seq.loc[inside, ["read_bytes", "write_bytes"]] = np.nan
    return seq


def fusion_candidates(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    ceiling = ctx.measured_dram_ceiling.bytes_per_s if ctx.measured_dram_ceiling else 0.0
    params = FUSION_CANDIDATES.params_of(rule)
    costs: dict[tuple[str, ...], list[ChainCost]] = defaultdict(list)
    ranges: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for chain in chains(_without_attention(ctx), params):
        names = tuple(step.name for step in chain)
        ranges[names].update(*(step.ranges for step in chain))
        costs[names].append(_cost(chain, ceiling))
    findings = []
    for names, occurrences in costs.items():
        finding = _finding(rule, params, ctx, names, occurrences, ranges[names])
        if not (finding.impact or 0.0) < params["min_impact"]:
            findings.append(finding)
    return findings


def _values(
    names: tuple[str, ...], occurrences: list[ChainCost], ctx: ProgramContext, saved_ns: float
) -> dict[str, object]:
    """The values of NSD410's templates (FUSION_CANDIDATES.values)."""
    labels = short_names(names)
    count = len(occurrences)
    by_names = occurrences[0].by_names
    moved = sum(c.moved_bytes for c in occurrences)
    intermediate = sum(c.intermediate_bytes for c in occurrences)
    fused = max(moved - 2 * intermediate, 0) if not by_names else np.nan
    return {
        "operations": len(names),
        "chain": " -> ".join(labels[n] for n in names),
        "occurrences": count,
        "per_iteration": (
            f", {count / ctx.iterations:.3g} per iteration"
            if ctx.iterations and count >= ctx.iterations
            else ""
        ),
        "chain_traffic": _traffic(by_names, intermediate, moved, fused),
        "intermediate_mb": intermediate / 1e6,
        "moved_mb": moved / 1e6,
        "fused_mb": fused / 1e6,
        "saved_ms": saved_ns / 1e6,
    }


def _traffic(by_names: bool, intermediate: float, moved: float, fused: float) -> str:
    if by_names:
        return (
            "each named as an elementwise operation that reads what the previous one wrote (no "
            "ncu byte counts: estimated from the kernels' names and durations). A fused kernel "
            "streams the data once, as the longest of them does."
        )
    return (
        f"pass {intermediate / 1e6:.0f} MB of intermediates through DRAM (written, then read "
        f"back): {moved / 1e6:.0f} MB moved where a fused kernel would move {fused / 1e6:.0f} MB."
    )


def _evidence(params: Mapping[str, float], occurrences: list[ChainCost]) -> tuple[Evidence, ...]:
    time_ns = sum(c.time_ns for c in occurrences)
    if occurrences[0].by_names:
        return (
            Evidence("chain_time_ns", time_ns),
            Evidence("chain_occurrences", float(len(occurrences))),
        )
    return (
        Evidence("chain_time_ns", time_ns),
        Evidence("dram_bytes_moved", sum(c.moved_bytes for c in occurrences)),
        Evidence(
            "intermediate_bytes",
            sum(c.intermediate_bytes for c in occurrences),
            ">=",
            params["min_intermediate_bytes"],
        ),
        Evidence("fused_bandwidth_bytes_per_s", occurrences[-1].stream_bytes_per_s),
    )


def _finding(
    rule: RuleSpec,
    params: Mapping[str, float],
    ctx: ProgramContext,
    names: tuple[str, ...],
    occurrences: list[ChainCost],
    ranges: set[str],
) -> Finding:
    time_ns = sum(c.time_ns for c in occurrences)
    saved_ns = sum(c.saved_ns for c in occurrences)
    message, fix = FUSION_CANDIDATES.text(rule, _values(names, occurrences, ctx, saved_ns))
    return Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=share_of(saved_ns, ctx.wall_ns),
        recoverable=saved_ns / time_ns if time_ns else 0.0,
        message=message,
        fix=fix,
        impact_basis=rule.impact_basis,
        evidence=_evidence(params, occurrences),
        kernel=names[0],
        range=", ".join(sorted(r for r in ranges if r)) or None,
        saved_ns=saved_ns,
        details=FusionChain(names, len(occurrences)),
        estimate="names" if occurrences[0].by_names else "metrics",
    )
