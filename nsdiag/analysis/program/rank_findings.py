"""The multi-process causes: `rank-imbalance` and `exposed-communication`, from the per-rank
breakdown of analysis/program/ranks.py (ProgramContext.ranks).

rank-imbalance: the late rank (the one whose arrivals at collectives come after every other
rank's, collective after collective) makes the others wait inside communication kernels with
nothing to compute; the time they lose is their exposed wait per step, the saving the smallest
of it over the waiting ranks less the late rank's own wait (the step can shorten only as far as
the next-latest rank lets it). It is reported only when something on the late rank explains its
lateness (analysis/program/lateness.py); a wait as large that nothing explains is held back with the
reason (unexplained_lateness), since the profiler's own overhead makes one.

exposed-communication: collective transfers (communication minus the waits) that run while the
GPU computes nothing, on ranks whose transfers are mostly not overlapped with computation (a
gradient all-reduce issued after the backward pass instead of bucket by bucket during it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.analysis.program.analyses import EXPOSED_COMMUNICATION, RANK_IMBALANCE
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.ranks import CONSISTENT_SHARE
from nsdiag.analysis.program.record import ProgramAnalysis
from nsdiag.analysis.records.findings import Evidence, Finding, share_of
from nsdiag.analysis.records.ranks import EXPLAINED, Lateness, RankAnalysis, RankStep
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model.ranks import is_communication, rank_of


def rank_imbalance(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    ranks = ctx.ranks
    found = _imbalance(rule, ranks)
    if ranks is None or found is None or found[0].cause is None:
        return []
    lateness, late, others, saved_step = found
    waits = np.array([s.wait_ns for s in others])
    step = late.wall_ns
    values: dict[str, Any] = {
        "late_rank": late.rank.rank,
        "late_device": late.rank.device,
        "late_host": late.rank.host or "this host",
        "waiting_ranks": _rank_list([s.rank.rank for s in others]),
        "wait_ms": float(waits.mean()) / 1e6,
        "wait_pct": 100 * float(waits.mean()) / step,
        "step_ms": step / 1e6,
        "last_at": lateness.last_at,
        "collectives": lateness.collectives,
        "late_cause": _late_cause(lateness),
        "late_ranges": _late_ranges(lateness),
        "saved_ms": saved_step / 1e6,
    }
    evidence = (
        Evidence("wait_per_step_ns", float(waits.mean())),
        Evidence("net_wait_share_of_step", saved_step / step, ">=", _min_impact(rule)),
        Evidence("late_share_of_delays", lateness.share, ">=", CONSISTENT_SHARE),
        Evidence("explained_share_of_delay", lateness.explained, ">=", EXPLAINED),
        Evidence("late_rank", float(late.rank.rank)),
    )
    return [
        _finding(RANK_IMBALANCE, rule, ctx, values, evidence, saved_step * ranks.iterations, ranks)
    ]


def unexplained_lateness(rule: RuleSpec, ctx: ProgramContext) -> str | None:
    """Why rank-imbalance holds back a wait that is large enough: no rank is late consistently,
    or nothing on the late rank accounts for its lateness (lateness.py: its host is slower
    throughout, as uneven profiler overhead or a busier CPU makes it). None when it does not."""
    found = _imbalance(rule, ctx.ranks)
    if found is None:
        return None
    lateness, late, others, _ = found
    rank = late.rank.rank
    waiting = _rank_list([s.rank.rank for s in others])
    lost = f"{waiting} wait {float(np.mean([s.wait_ns for s in others])) / 1e6:.2f} ms per step"
    if lateness.share < CONSISTENT_SHARE:
        return (
            f"no rank is late consistently: rank {rank}, the latest, arrives last at "
            f"{lateness.last_at} of {lateness.collectives} collectives and causes "
            f"{100 * lateness.share:.0f}% of the waits ({lost}); the others cause the rest"
        )
    if lateness.cause is not None:
        return None
    return (
        f"rank {rank} arrives last at {lateness.last_at} of {lateness.collectives} collectives "
        f"({lost}), but nothing on it explains it: host stalls of 1 ms or more "
        f"{_ms(lateness.stall_ns)} ms per step more than the others, GPU computation "
        f"{_ms(lateness.extra_compute_ns)} ms, no NVTX range longer; its host runs the same "
        "work slower throughout the step, as a busier CPU core or the profiler's uneven "
        "overhead makes it (compare the ranks' step times without the profiler)"
    )


def _imbalance(
    rule: RuleSpec, ranks: RankAnalysis | None
) -> tuple[Lateness, RankStep, list[RankStep], float] | None:
    """The late rank's lateness, its step, the others' steps and the saving per step, when the
    others lose enough to it: their wait less its own (a rank late only some of the time waits
    for the others the rest of it)."""
    if ranks is None or ranks.lateness is None:
        return None
    late = ranks.step(ranks.lateness.rank)
    others = ranks.others(ranks.lateness.rank)
    if late is None or not others or late.wall_ns <= 0:
        return None
    saved_step = max(min(s.wait_ns for s in others) - late.wait_ns, 0.0)
    if saved_step / late.wall_ns < _min_impact(rule):
        return None
    return ranks.lateness, late, others, saved_step


def _min_impact(rule: RuleSpec) -> float:
    return RANK_IMBALANCE.params_of(rule)["min_impact"]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def exposed_communication(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    ranks = ctx.ranks
    if ranks is None or not ranks.steps:
        return []
    steps = ranks.steps
    transfer = np.array([max(s.communication_ns - s.wait_ns, 0.0) for s in steps])
    exposed = np.array([s.exposed_transfer_ns for s in steps])
    if transfer.sum() <= 0:
        return []
    overlap = 1.0 - float(exposed.sum() / transfer.sum())
    step = steps[0].wall_ns
    saved_step = float(exposed.mean())
    params = EXPOSED_COMMUNICATION.params_of(rule)
    max_overlap, min_impact = params["max_overlap_fraction"], params["min_impact"]
    if step <= 0 or overlap > max_overlap or saved_step / step < min_impact:
        return []
    worst = max(steps, key=lambda s: s.exposed_transfer_ns)
    values: dict[str, Any] = {
        "transfer_ms": float(transfer.mean()) / 1e6,
        "exposed_ms": saved_step / 1e6,
        "overlap_pct": 100 * overlap,
        "step_ms": step / 1e6,
        "collectives": _collective_kinds(ctx),
        "worst_rank": worst.rank.rank,
        "worst_exposed_ms": worst.exposed_transfer_ns / 1e6,
        "saved_ms": saved_step / 1e6,
    }
    evidence = (
        Evidence("overlapped_fraction", overlap, "<=", max_overlap),
        Evidence("exposed_share_of_step", saved_step / step, ">=", min_impact),
        Evidence("exposed_transfer_per_step_ns", saved_step),
    )
    saved_ns = saved_step * ranks.iterations
    return [_finding(EXPOSED_COMMUNICATION, rule, ctx, values, evidence, saved_ns, ranks)]


def _finding(
    analysis: ProgramAnalysis,
    rule: RuleSpec,
    ctx: ProgramContext,
    values: dict[str, Any],
    evidence: tuple[Evidence, ...],
    saved_ns: float,
    ranks: RankAnalysis,
) -> Finding:
    message, fix = analysis.text(rule, values)
    step = ranks.steps[0].wall_ns * ranks.iterations
    return Finding(
        rule=rule.id,
        cause=rule.cause,
        title=rule.title,
        impact=share_of(saved_ns, ctx.wall_ns),
        recoverable=min(saved_ns / step, 1.0) if step else 0.0,
        message=message,
        fix=fix,
        impact_basis=rule.impact_basis,
        evidence=evidence,
        saved_ns=saved_ns,
        details={"ranks": [s.to_json() for s in ranks.steps], "iterations": ranks.iterations},
        estimate="timeline",
    )


def _rank_list(numbers: Sequence[int]) -> str:
    """'rank 0', 'ranks 0, 2, 3', 'ranks 0-6 and 8-255' (runs of consecutive ranks)."""
    ordered = sorted(numbers)
    runs: list[list[int]] = []
    for n in ordered:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs]
    text = " and ".join(parts) if len(parts) <= 2 else ", ".join(parts)
    return ("rank " if len(ordered) == 1 else "ranks ") + text


def _late_cause(lateness: Lateness) -> str:
    """What on the late rank accounts for its lateness: each cause that explains half of it or
    more (lateness.py), then the NVTX ranges it spends longer in."""
    parts = []
    if lateness.stall_ns >= EXPLAINED * lateness.delay_ns:
        parts.append(
            f"Its host stalls {_ms(lateness.stall_ns)} ms per step longer than the others' with "
            f"no CUDA call on the threads that launch its kernels (the longest stall "
            f"{_ms(lateness.largest_stall_ns)} ms): it is late giving its GPU work (data "
            "loading, preprocessing, Python work)."
        )
    if lateness.extra_compute_ns >= EXPLAINED * lateness.delay_ns:
        parts.append(
            f"Its GPU computes {_ms(lateness.extra_compute_ns)} ms more per step than the "
            "others': extra work on this rank, or a slower GPU."
        )
    ranges = _late_ranges(lateness)
    return " ".join(parts + ([ranges] if ranges else []))


def _late_ranges(lateness: Lateness) -> str:
    if not lateness.ranges:
        return ""
    shown = ", ".join(f"'{n}' ({_ms(v)} ms more per step)" for n, v in lateness.ranges)
    return f"It spends longer than the others in NVTX range {shown}."


def _collective_kinds(ctx: ProgramContext) -> str:
    """The collectives of the region by kind and count per step ('AllReduce x6')."""
    t = ctx.session.timeline
    kernels = t[t["kind"] == "kernel"] if len(t) else t
    if not len(t):
        return "none"
    names = kernels["name"].astype(str)[is_communication(kernels["name"])]
    if not len(names):
        return "none"
    kinds = pd.Series(names).str.extract(r"nccl\w*?Kernel_([A-Za-z]+)")[0].fillna("collective")
    ranks = max(len(set(rank_of(kernels))), 1)
    per_step = kinds.value_counts() / ranks / max(ctx.iterations, 1)
    return ", ".join(f"{k} x{v:.0f}" for k, v in per_step.items())
