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
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.analyses import FUSION_CANDIDATES
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.records.findings import Evidence, Finding, FusionChain, share_of
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model import quantities
from nsdiag.model.names import short_names
from nsdiag.model.text_codes import factorize_text

_TENSOR_IDLE_PCT = 5.0  # an operation whose tensor pipe is busier runs real matrix math
ELEMENTWISE = frozenset({"elementwise"})


class FusionStep(NamedTuple):
    """Consecutive launches of one kernel: one operation of a chain (a named tuple: a decode
    loop's chains hold 30,000 steps, and a frozen dataclass costs four times as much to make)."""

    name: str
    kind: str  # what its name says (kernel_facts)
    duration_ns: float
    read_bytes: float  # NaN without ncu data
    write_bytes: float
    best_bytes_per_s: float
    min_dram_pct: float
    ranges: frozenset[str]  # NVTX ranges of its launches ("" outside any)

    @property
    def has_bytes(self) -> bool:
        return not (math.isnan(self.read_bytes) or math.isnan(self.write_bytes))

    @property
    def elementwise(self) -> bool:
        return self.kind in ELEMENTWISE


@dataclass(frozen=True)
class ChainCost:
    """What one occurrence of a chain costs, and what a fused kernel would save."""

    time_ns: float
    moved_bytes: float  # NaN when estimated from names
    intermediate_bytes: float
    saved_ns: float
    stream_bytes_per_s: float  # the bandwidth a fused kernel would stream at (NaN from names)
    by_names: bool


_HEAVY = ("compute", "launch")  # verdicts of kernels that are not what this rule fuses away


@dataclass(frozen=True)
class _Steps:
    """Every step (a run of one kernel, back to back on its stream) of the launch sequence as
    arrays, found at once: a timeline holds tens of thousands of steps, and the diagnosis
    makes no object of any (`chains` makes FusionSteps of those in a chain)."""

    # The launches are taken stream by stream (the first seen first), in launch order.
    starts: npt.NDArray[np.int64]  # each step's first launch
    ends: npt.NDArray[np.int64]
    starts_segment: npt.NDArray[np.bool_]  # per step: first on its stream or since a sync
    name: npt.NDArray[Any]
    kind: npt.NDArray[Any]
    duration_ns: npt.NDArray[np.float64]
    read_bytes: npt.NDArray[np.float64]
    write_bytes: npt.NDArray[np.float64]
    best_bytes_per_s: npt.NDArray[np.float64]
    heavy: npt.NDArray[np.bool_]  # a launch of it has a _HEAVY verdict
    min_dram_pct: npt.NDArray[np.float64]
    tensor_pct: npt.NDArray[np.float64]
    ranges: npt.NDArray[Any]  # per launch

    @property
    def has_bytes(self) -> npt.NDArray[np.bool_]:
        return ~(np.isnan(self.read_bytes) | np.isnan(self.write_bytes))

    @property
    def elementwise(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.kind == "elementwise", dtype=bool)

    @property
    def fusable(self) -> npt.NDArray[np.bool_]:
        """Memory-shaped: compute-bound, launch-bound and tensor-core kernels (convolutions,
        real GEMMs) are not what this rule fuses away; without ncu data, only what the name
        says is elementwise."""
        metrics = ~self.heavy & (self.tensor_pct < _TENSOR_IDLE_PCT)
        return np.where(self.has_bytes, metrics, self.elementwise)

    def chain_steps(self, indices: npt.NDArray[np.int64]) -> list[FusionStep]:
        """The FusionSteps of the steps at `indices`: each column gathered once as Python
        values (a decode loop's chains hold 30,000 steps: numpy scalars one at a time cost 1 s)."""
        columns = zip(
            self.name[indices].tolist(),
            self.kind[indices].tolist(),
            self.duration_ns[indices].tolist(),
            self.read_bytes[indices].tolist(),
            self.write_bytes[indices].tolist(),
            self.best_bytes_per_s[indices].tolist(),
            self.min_dram_pct[indices].tolist(),
            self.starts[indices].tolist(),
            self.ends[indices].tolist(),
            strict=True,
        )
        ranges = self.ranges
        alone: dict[Any, frozenset[str]] = {}  # a step of one launch: its range's set, shared
        out = []
        for name, kind, duration, read, write, best, dram, a, b in columns:
            if b - a == 1:
                one = ranges[a]
                held = alone.get(one)
                if held is None:
                    held = alone[one] = frozenset((str(one),))
            else:
                held = frozenset(str(r) for r in ranges[a:b])
            out.append(FusionStep(str(name), str(kind), duration, read, write, best, dram, held))
        return out


def _steps(sequence: pd.DataFrame, claimed: npt.NDArray[np.bool_] | None) -> _Steps:
    """The sequence's steps, cut at host synchronisations and stream changes. `claimed`: the
    launches another analysis reports (eager attention's score kernels), made unfusable."""
    streams = sequence.groupby(["process_id", "stream"], sort=False, dropna=False).ngroup()
    order = np.argsort(streams.to_numpy(), kind="stable")
    stream = streams.to_numpy()[order]
    names = sequence["name"].astype(str).to_numpy()[order]
    starts_segment = sequence["synced_before"].to_numpy(dtype=bool)[order]
    starts_segment[1:] |= stream[1:] != stream[:-1]
    starts_segment[0] = True
    starts_run = starts_segment.copy()
    starts_run[1:] |= names[1:] != names[:-1]
    starts = np.flatnonzero(starts_run)
    ends = np.append(starts[1:], len(names))

    def numbers(column: str, zero_nan: bool = True) -> npt.NDArray[np.float64]:
        """A column in `order`; NaN (no ncu data) as 0 in a step's sums, maxima and minima,
        except in its bytes, where it marks a step without byte counts."""
        values = sequence[column].to_numpy(dtype="float64")[order]
        return np.nan_to_num(values) if zero_nan else values

    kind = sequence["kind"].to_numpy(dtype=object)[order]
    read, write = numbers("read_bytes", False), numbers("write_bytes", False)
    if claimed is not None and claimed.any():
        mine = claimed[order]
        kind = np.where(mine, "attention", kind)
        read, write = np.where(mine, np.nan, read), np.where(mine, np.nan, write)
    heavy = sequence["bound"].isin(_HEAVY).to_numpy()[order]
    return _Steps(
        starts=starts,
        ends=ends,
        starts_segment=starts_segment[starts],
        name=names[starts],
        kind=kind[starts],
        # a NaN byte count makes its step's sum NaN: the step has no byte counts
        duration_ns=_sums(numbers("duration_ns"), starts, ends),
        read_bytes=_sums(read, starts, ends),
        write_bytes=_sums(write, starts, ends),
        best_bytes_per_s=np.maximum.reduceat(numbers("best_bytes_per_s"), starts),
        heavy=np.logical_or.reduceat(heavy, starts),
        min_dram_pct=np.minimum.reduceat(numbers("dram_pct"), starts),
        tensor_pct=np.maximum.reduceat(numbers("tensor_pct"), starts),
        ranges=sequence["range"].to_numpy(dtype=object)[order],
    )


PAIRWISE_FROM = 8  # ndarray.sum adds fewer values one at a time; from 8 on, in pairs


def _sums(
    values: npt.NDArray[np.float64], starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Each step's sum of `values`, as ndarray.sum adds them, so a step's bytes are the same to
    the last bit however it was found. np.add.reduceat gives that for steps of one or two
    launches only (it adds a step's first value to the sum of the others); steps of up to
    PAIRWISE_FROM launches (a thousand-odd per timeline) are added one launch at a time, for
    all of them at once; the longer ones (a few) by ndarray.sum itself."""
    sums = np.add.reduceat(values, starts)
    longer = np.flatnonzero(ends - starts > 2)
    lengths = ends[longer] - starts[longer]
    few = longer[lengths < PAIRWISE_FROM]
    if len(few):
        first, count = starts[few], ends[few] - starts[few]
        total = 0.0 + values[first]  # from +0.0, as ndarray.sum (a step of -0.0 sums to 0.0)
        for j in range(1, PAIRWISE_FROM - 1):
            more = count > j
            total[more] = total[more] + values[first[more] + j]
        sums[few] = total
    for i in longer[lengths >= PAIRWISE_FROM].tolist():
        sums[i] = values[starts[i] : ends[i]].sum()
    return sums


def _links(steps: _Steps, params: Mapping[str, float]) -> npt.NDArray[np.bool_]:
    """Per pair of consecutive steps: whether the second continues a chain with the first.
    Both fusable, in one segment, and: with byte counts, the second reads back at least
    `min_read_fraction` of what the first wrote (at least `min_intermediate_bytes`); without,
    both named as elementwise operations."""
    fusable, has_bytes, elementwise = steps.fusable, steps.has_bytes, steps.elementwise
    write, read = steps.write_bytes[:-1], steps.read_bytes[1:]
    with np.errstate(invalid="ignore"):  # NaN bytes: the pair links by names instead
        by_bytes = (write >= params["min_intermediate_bytes"]) & (
            read >= params["min_read_fraction"] * write
        )
    linked = np.where(has_bytes[:-1] & has_bytes[1:], by_bytes, elementwise[:-1] & elementwise[1:])
    return fusable[:-1] & fusable[1:] & ~steps.starts_segment[1:] & linked


def _per_chain(
    ufunc: np.ufunc,
    values: npt.NDArray[Any],
    first: npt.NDArray[np.int64],
    stop: npt.NDArray[np.int64],
) -> Any:
    """`ufunc` reduced over each chain's steps [first, stop), every chain at once (a sentinel
    past the end: the pieces between chains are reduced too, and dropped). For maxima, minima
    and logic only: numpy's add.reduceat adds a segment's first value to the sum of the others,
    not left to right (`_in_order` adds)."""
    bounds = np.column_stack([first, stop]).ravel()
    return ufunc.reduceat(np.append(values, values[:1]), bounds)[::2]


def _chain_bounds(
    sequence: pd.DataFrame,
    params: Mapping[str, float],
    claimed: npt.NDArray[np.bool_] | None = None,
) -> tuple[_Steps, npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """The sequence's steps and its chains' first and past-the-end steps (see `chains`); None
    where it has no chain."""
    if not len(sequence):
        return None
    steps = _steps(sequence, claimed)
    edges = np.diff(np.concatenate([[0], _links(steps, params).astype(np.int8), [0]]))
    # a run of links from step `first` to step `last` - 1 chains steps first..last
    first, stop = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) + 1
    # a byte-matched chain whose kernels all stream at the DRAM roof may be independent kernels
    # of equal size; named elementwise operations are chains whatever their speed
    all_elementwise = _per_chain(np.logical_and, steps.elementwise, first, stop)
    least_dram = _per_chain(np.minimum, steps.min_dram_pct, first, stop)
    kept = all_elementwise | (least_dram < params["at_roof_dram_pct"])
    first, stop = first[kept], stop[kept]
    return (steps, first, stop) if len(first) else None


def chains(
    sequence: pd.DataFrame,
    params: Mapping[str, float],
    claimed: npt.NDArray[np.bool_] | None = None,
) -> list[list[FusionStep]]:
    """The chains of the launch sequence, per process and stream: the longest runs of linked
    steps, two steps or more. `params`: FUSION_CANDIDATES's, complete
    (FUSION_CANDIDATES.params_of); `claimed`: launches left to another analysis."""
    found = _chain_bounds(sequence, params, claimed)
    if found is None:
        return []
    steps, first, stop = found
    lengths = stop - first
    indices = np.repeat(first - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    made = steps.chain_steps(indices)
    cuts = np.cumsum(lengths)[:-1].tolist()
    return [made[a:b] for a, b in itertools.pairwise([0, *cuts, len(made)])]


class _ChainCosts(NamedTuple):
    """What one occurrence of each chain costs (ChainCost), as arrays (one value per chain)."""

    time_ns: npt.NDArray[np.float64]
    moved_bytes: npt.NDArray[np.float64]
    intermediate_bytes: npt.NDArray[np.float64]
    saved_ns: npt.NDArray[np.float64]
    stream_bytes_per_s: npt.NDArray[np.float64]
    by_names: npt.NDArray[np.bool_]

    def of(self, chain: int) -> ChainCost:
        return ChainCost(
            float(self.time_ns[chain]),
            float(self.moved_bytes[chain]),
            float(self.intermediate_bytes[chain]),
            float(self.saved_ns[chain]),
            float(self.stream_bytes_per_s[chain]),
            bool(self.by_names[chain]),
        )


SHORT_CHAIN = 64  # steps: chains this short are summed all at once, a step a round


def _in_order(
    values: npt.NDArray[np.float64], first: npt.NDArray[np.int64], stop: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Each [first, stop)'s sum of `values`, added left to right, so a chain's time is the
    same to the last bit however it is found: every short chain's k-th value in round k, a
    long chain (a decode loop's, 30,000 steps) in a loop of its own."""
    total = values[first].copy()
    lengths = stop - first
    short = lengths <= SHORT_CHAIN
    for k in range(1, int(lengths[short].max(initial=1))):
        live = np.flatnonzero(short & (lengths > k))
        total[live] += values[first[live] + k]
    for chain in np.flatnonzero(~short).tolist():
        running = 0.0
        for value in values[first[chain] : stop[chain]].tolist():
            running += value
        total[chain] = running
    return total


def _chain_costs(
    steps: _Steps,
    first: npt.NDArray[np.int64],
    stop: npt.NDArray[np.int64],
    ceiling: float,
) -> _ChainCosts:
    """What each chain (steps first..stop - 1, two or more) costs and a fused kernel would save
    (the module's docstring says how), every chain at once: a timeline's chains hold tens of
    thousands of steps and a few of them make a finding, so no step becomes an object."""

    time_ns = _in_order(steps.duration_ns, first, stop)
    longest = _per_chain(np.maximum, steps.duration_ns, first, stop)
    by_names = ~_per_chain(np.logical_and, steps.has_bytes, first, stop)
    moved = _in_order(steps.read_bytes + steps.write_bytes, first, stop)
    # each pair of neighbours in a chain passes on the smaller of what one wrote and the next read
    handed = np.minimum(steps.write_bytes[:-1], steps.read_bytes[1:])
    intermediate = _in_order(handed, first, stop - 1)
    stream_bw = np.maximum(_per_chain(np.maximum, steps.best_bytes_per_s, first, stop), ceiling)
    remaining = np.maximum(moved - 2 * intermediate, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # chosen below where no bandwidth
        fused_ns = np.where(stream_bw > 0, remaining / stream_bw * 1e9, time_ns)
    saved = np.where(by_names, time_ns - longest, np.maximum(time_ns - fused_ns, 0.0))
    nan = np.full(len(first), np.nan)
    return _ChainCosts(
        time_ns,
        np.where(by_names, nan, moved),
        np.where(by_names, nan, intermediate),
        saved,
        np.where(by_names, nan, stream_bw),
        by_names,
    )


def fusion_candidates(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = FUSION_CANDIDATES.params_of(rule)
    inside, _ = ctx.attention  # eager attention's score kernels are its finding's
    found = _chain_bounds(ctx.launches, params, inside)
    if found is None:
        return []
    steps, first, stop = found
    ceiling = ctx.measured_dram_ceiling.bytes_per_s if ctx.measured_dram_ceiling else 0.0
    costs = _chain_costs(steps, first, stop, ceiling)
    # the chains that repeat (the same operations in order) are one finding: grouped on the
    # steps' name numbers, summed in chain order
    code, _ = factorize_text(steps.name)
    alike: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for chain, (a, b) in enumerate(zip(first.tolist(), stop.tolist(), strict=True)):
        alike[tuple(code[a:b].tolist())].append(chain)
    saved = costs.saved_ns.tolist()
    findings = []
    for members in alike.values():
        saved_ns = sum(saved[c] for c in members)
        if (share_of(saved_ns, ctx.wall_ns) or 0.0) < params["min_impact"]:
            continue  # too small to report: its text is not written (short names, templates)
        a, b = int(first[members[0]]), int(stop[members[0]])
        names = tuple(str(n) for n in steps.name[a:b].tolist())
        occurrences = [costs.of(c) for c in members]
        findings.append(
            _finding(rule, params, ctx, names, occurrences, _ranges(steps, first, stop, members))
        )
    return findings


def _ranges(
    steps: _Steps, first: npt.NDArray[np.int64], stop: npt.NDArray[np.int64], members: list[int]
) -> set[str]:
    """The NVTX ranges the launches of the chains `members` ran in."""
    held: set[str] = set()
    for chain in members:
        a, b = int(steps.starts[first[chain]]), int(steps.ends[stop[chain] - 1])
        held.update(str(r) for r in set(steps.ranges[a:b].tolist()))
    return held


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
        f"pass {quantities.size(intermediate)} of intermediates through DRAM (written, then read "
        f"back): {quantities.size(moved)} moved where a fused kernel would move "
        f"{quantities.size(fused)}."
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
        ranges=tuple(sorted(r for r in ranges if r)),
        saved_ns=saved_ns,
        details=FusionChain(len(occurrences)),
        estimate="names" if occurrences[0].by_names else "metrics",
        kernels=names,
    )
