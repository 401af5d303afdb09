"""The multi-process causes: `rank-imbalance` and `exposed-communication`, from the per-rank
breakdown of analysis/ranks.py (ProgramContext.ranks).

rank-imbalance: the late rank (the one whose arrivals at collectives come after every other
rank's) makes the others wait inside communication kernels with nothing to compute; the time
they lose is their exposed wait per step, the saving the smallest of it over the waiting ranks
(the step can shorten only as far as the next-latest rank lets it).

exposed-communication: collective transfers (communication minus the waits) that run while the
GPU computes nothing, on ranks whose transfers are mostly not overlapped with computation (a
gradient all-reduce issued after the backward pass instead of bucket by bucket during it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.analysis.context import ProgramContext
from nsdiag.analysis.diagnosis import Evidence, Finding, share_of
from nsdiag.analysis.program_values import program_text
from nsdiag.analysis.ranks import RankAnalysis, RankStep
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.model.ranks import is_communication, rank_of


def rank_imbalance(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    ranks = ctx.ranks
    if ranks is None or ranks.late_rank is None:
        return []
    late = ranks.step(ranks.late_rank)
    others = ranks.others(ranks.late_rank)
    if late is None or not others:
        return []
    waits = np.array([s.wait_ns for s in others])
    saved_step = float(waits.min())
    step = late.wall_ns
    min_impact = float(rule.params.get("min_impact", 0.2))
    if step <= 0 or saved_step / step < min_impact:
        return []
    values: dict[str, Any] = {
        "late_rank": late.rank.rank,
        "late_device": late.rank.device,
        "late_host": late.rank.host or "this host",
        "waiting_ranks": _rank_list([s.rank.rank for s in others]),
        "wait_ms": float(waits.mean()) / 1e6,
        "wait_pct": 100 * float(waits.mean()) / step,
        "step_ms": step / 1e6,
        "late_cause": _late_cause(late, others),
        "late_ranges": _late_ranges(ctx, ranks, late),
        "saved_ms": saved_step / 1e6,
    }
    evidence = (
        Evidence("wait_per_step_ns", float(waits.mean())),
        Evidence("wait_share_of_step", saved_step / step, ">=", min_impact),
        Evidence("late_rank", float(late.rank.rank)),
    )
    return [_finding(rule, ctx, values, evidence, saved_step * ranks.iterations, ranks)]


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
    max_overlap = float(rule.params.get("max_overlap_fraction", 0.25))
    min_impact = float(rule.params.get("min_impact", 0.03))
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
    return [_finding(rule, ctx, values, evidence, saved_step * ranks.iterations, ranks)]


def _finding(
    rule: RuleSpec,
    ctx: ProgramContext,
    values: dict[str, Any],
    evidence: tuple[Evidence, ...],
    saved_ns: float,
    ranks: RankAnalysis,
) -> Finding:
    message, fix = program_text(rule, values)
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


def _late_cause(late: RankStep, others: Sequence[RankStep]) -> str:
    """Whether the late rank's GPU computes more than the others' or sits idle longer."""
    extra_compute = late.compute_ns - float(np.median([s.compute_ns for s in others]))
    extra_idle = late.idle_ns - float(np.median([s.idle_ns for s in others]))
    if extra_compute >= extra_idle and extra_compute > 0:
        return (
            f"Its GPU computes {extra_compute / 1e6:.2f} ms more per step than the others': "
            "extra work on this rank, or a slower GPU."
        )
    return (
        f"Its GPU sits idle {extra_idle / 1e6:.2f} ms more per step than the others': its host "
        "is late giving it work (data loading, preprocessing, Python work)."
    )


def _late_ranges(ctx: ProgramContext, ranks: RankAnalysis, late: RankStep) -> str:
    """NVTX ranges the late rank spends much more time in than the median other rank."""
    nvtx = ctx.session.nvtx_ranges
    if not len(nvtx) or "rank" not in nvtx:
        return ""
    frame = pd.DataFrame(
        {
            "rank": rank_of(nvtx),
            "name": nvtx["name"].astype(str).to_numpy(),
            "ns": pd.to_numeric(nvtx["duration_ns"], errors="coerce")
            .fillna(0)
            .to_numpy(dtype="float64"),
        }
    )
    table = frame.groupby(["name", "rank"])["ns"].sum().unstack().fillna(0.0)
    if late.rank.rank not in table.columns:
        return ""
    others = table.drop(columns=[late.rank.rank])
    extra = (table[late.rank.rank] - others.median(axis=1)) / ranks.iterations
    wait = float(np.median([s.wait_ns for s in ranks.others(late.rank.rank)]))
    found = extra[extra >= 0.25 * wait].sort_values(ascending=False)
    if found.empty:
        return ""
    shown = ", ".join(f"'{n}' ({v / 1e6:.2f} ms more per step)" for n, v in found.head(3).items())
    return f" It spends longer than the others in NVTX range {shown}."


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
