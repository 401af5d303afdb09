"""fusion-candidate: chains of memory-shaped operations that pass intermediates through DRAM.

ncu does not record which buffer a kernel touched, so a chain is matched on bytes: consecutive
operations (on one process, stream and NVTX range) where each reads back from DRAM about what
the previous one wrote.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nsdiag.analysis import verdict
from nsdiag.analysis.context import ProgramContext
from nsdiag.analysis.diagnosis import Evidence, Finding, FusionChain
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.model.names import short_names
from nsdiag.model.tables import records
from nsdiag.model.values import number_or

_COLUMNS = (
    "id",
    "name",
    "grid",
    "block",
    "nvtx_range",
    "dram_read_bytes",
    "dram_write_bytes",
    "dram_bytes_per_second",
    *verdict.INPUTS,
)
_TENSOR_IDLE_PCT = 5.0  # a step whose tensor pipe is busier runs real matrix math


@dataclass(frozen=True)
class FusionStep:
    """Consecutive launches of one signature: one operation, which a library often splits into
    several launches (cuBLAS ran the K=3 GEMM as 16 chunks) that together read what the previous
    operation wrote."""

    name: str
    duration_ns: float
    read_bytes: float
    write_bytes: float
    best_bytes_per_s: float
    bounds: frozenset[str]  # the verdicts of its launches
    min_dram_pct: float
    tensor_pct: float  # the busiest launch's tensor pipe
    ranges: frozenset[str]  # NVTX ranges of its launches ("" outside any)

    @property
    def fusable(self) -> bool:
        """Memory-shaped: compute-bound, launch-bound and tensor-core kernels (convolutions,
        real GEMMs) are not what this rule can fuse away."""
        return not self.bounds & {"compute", "launch"} and self.tensor_pct < _TENSOR_IDLE_PCT


@dataclass(frozen=True)
class ChainCost:
    """What one occurrence of a chain costs, and what a fused kernel would save."""

    time_ns: float
    moved_bytes: float
    intermediate_bytes: float
    saved_ns: float
    stream_bytes_per_s: float  # the bandwidth a fused kernel would stream at


def _num(values: Mapping[str, Any], column: str) -> float:
    return number_or(values.get(column), 0.0)


def _step(launches: list[dict[str, Any]]) -> FusionStep:
    return FusionStep(
        name=str(launches[0].get("name")),
        duration_ns=sum(_num(v, "duration_ns") for v in launches),
        read_bytes=sum(_num(v, "dram_read_bytes") for v in launches),
        write_bytes=sum(_num(v, "dram_write_bytes") for v in launches),
        best_bytes_per_s=max(0.0, *(_num(v, "dram_bytes_per_second") for v in launches)),
        bounds=frozenset(verdict.classify(v).bound for v in launches),
        min_dram_pct=min(_num(v, "dram_throughput_pct") for v in launches),
        tensor_pct=max(0.0, *(_num(v, "pipe_tensor_pct") for v in launches)),
        ranges=frozenset(str(v.get("nvtx_range") or "") for v in launches),
    )


def steps(records: Iterable[dict[str, Any]]) -> list[FusionStep]:
    """Consecutive launches of one signature (name, grid, block) become one step."""
    runs = itertools.groupby(records, key=lambda v: (v.get("name"), v.get("grid"), v.get("block")))
    return [_step(list(launches)) for _, launches in runs]


def _chains_in(
    group: Sequence[FusionStep], min_bytes: float, min_overlap: float
) -> list[list[FusionStep]]:
    chains: list[list[FusionStep]] = []
    current: list[FusionStep] = []
    for step in group:
        if (
            current
            and step.fusable
            and current[-1].write_bytes >= min_bytes
            and step.read_bytes >= min_overlap * current[-1].write_bytes
        ):
            current.append(step)
            continue
        if len(current) >= 2:
            chains.append(current)
        current = [step] if step.fusable else []
    if len(current) >= 2:
        chains.append(current)
    return chains


def chains(derived: pd.DataFrame, params: Mapping[str, float]) -> list[list[FusionStep]]:
    """Runs of consecutive steps (same process, stream and NVTX range) that are not
    compute-bound, where each step reads back from DRAM about what the previous one wrote:
    the intermediate made a round trip through DRAM. Chains whose every kernel already streams
    at the DRAM roof are left out: ncu does not record which buffers a kernel touched, and
    independent, already-optimised kernels of equal size match on bytes alone."""
    min_bytes = params.get("min_intermediate_bytes", 1e6)
    min_overlap = params.get("min_read_fraction", 0.5)
    at_roof = params.get("at_roof_dram_pct", 75.0)
    order = derived.sort_values("id")
    keys = [c for c in ("process_id", "stream", "nvtx_range") if c in order]
    order = order[list(dict.fromkeys(c for c in (*_COLUMNS, *keys) if c in order))]
    groups = order.groupby(keys, sort=False, dropna=False) if keys else [(None, order)]
    found: list[list[FusionStep]] = []
    for _, group in groups:
        found += _chains_in(steps(records(group)), min_bytes, min_overlap)
    return [c for c in found if min(s.min_dram_pct for s in c) < at_roof]


def _cost(chain: Sequence[FusionStep], ceiling: float) -> ChainCost:
    time_ns = sum(step.duration_ns for step in chain)
    moved = sum(step.read_bytes + step.write_bytes for step in chain)
    intermediate = sum(min(a.write_bytes, b.read_bytes) for a, b in itertools.pairwise(chain))
    remaining = max(moved - 2 * intermediate, 0.0)
    stream_bw = max(max(step.best_bytes_per_s for step in chain), ceiling)
    fused_ns = remaining / stream_bw * 1e9 if stream_bw > 0 else time_ns
    return ChainCost(time_ns, moved, intermediate, max(time_ns - fused_ns, 0.0), stream_bw)


def fusion_candidates(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    ceiling = ctx.measured_dram_ceiling.bytes_per_s if ctx.measured_dram_ceiling else 0.0
    costs: dict[tuple[str, ...], list[ChainCost]] = defaultdict(list)
    ranges: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for chain in chains(ctx.derived, rule.params):
        names = tuple(step.name for step in chain)
        ranges[names].update(*(step.ranges for step in chain))
        costs[names].append(_cost(chain, ceiling))
    findings = []
    for names, occurrences in costs.items():
        finding = _finding(rule, ctx, names, occurrences, ranges[names])
        if not finding.impact < rule.params.get("min_impact", 0.01):
            findings.append(finding)
    return findings


def _finding(
    rule: RuleSpec,
    ctx: ProgramContext,
    names: tuple[str, ...],
    occurrences: list[ChainCost],
    ranges: set[str],
) -> Finding:
    time_ns = sum(c.time_ns for c in occurrences)
    moved = sum(c.moved_bytes for c in occurrences)
    intermediate = sum(c.intermediate_bytes for c in occurrences)
    saved_ns = sum(c.saved_ns for c in occurrences)
    stream_bw = occurrences[-1].stream_bytes_per_s
    total = ctx.total_gpu_time_ns
    labels = short_names(names)
    chain_text = " -> ".join(labels[n] for n in names)
    return Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=saved_ns / total if total else 0.0,
        recoverable=saved_ns / time_ns if time_ns else 0.0,
        message=(
            f"{len(names)} operations in a row ({chain_text}) pass "
            f"{intermediate / 1e6:.0f} MB of intermediates through DRAM (written, then read "
            f"back): {moved / 1e6:.0f} MB moved where a fused kernel would move "
            f"{max(moved - 2 * intermediate, 0) / 1e6:.0f} MB."
        ),
        fix=rule.fix,
        impact_basis=rule.impact_basis,
        evidence=(
            Evidence("chain_time_ns", time_ns),
            Evidence("dram_bytes_moved", moved),
            Evidence(
                "intermediate_bytes",
                intermediate,
                ">=",
                rule.params.get("min_intermediate_bytes", 1e6),
            ),
            Evidence("fused_bandwidth_bytes_per_s", stream_bw),
        ),
        kernel=names[0],
        range=", ".join(sorted(r for r in ranges if r)) or None,
        saved_ns=saved_ns,
        details=FusionChain(names, len(occurrences)),
    )
