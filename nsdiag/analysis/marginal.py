"""Marginal savings: changes walked greedily over shared budgets of time (analysis/changes.py
groups the findings and says what each change claims of which budget).

A budget is a piece of time that can be saved once: a kernel's time (in one NVTX range), a
stretch of idle time, and the region's wall time, which every change draws on. A claim is what a
change would save on one budget if it came first. The walk ranks, at each step, the change that
saves most of what is left:
- kernel time shrinks (`Budget.shrinks`): a change that saves a fraction r of a
  kernel saves r of what the changes above it left there, so two changes on one kernel compose
  as 1 - (1 - r1)(1 - r2) and never pass its time;
- other time goes (idle gaps, copies, waits): a change takes at most what is left of it;
- what is left of the region caps each saving as it is ranked, so the total never passes it.
Marginal savings only shrink as budgets are taken, so a change popped with a stale value is
valued again and pushed back until its value holds (lazy greedy): the ranked savings never
increase down the list, and each is "after the ones above it".
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

EPS_NS = 1e-3  # rounding slack


@dataclass(frozen=True)
class Budget:
    """One piece of time that can be saved once (analysis/changes.py says which there are)."""

    kind: str  # "region" | "wait" | "kernel" | "own"
    kernel_id: int | None = None  # "kernel": the profiled signature's id in the diagnosis
    range: str | None = None  # "kernel": the NVTX range of its time ("": outside any); None: all
    finding: int | None = None  # "own": the program finding's index
    member: int | None = None  # "own": a chain member without a profile, its place among those

    @property
    def shrinks(self) -> bool:
        """Kernel time: a change saves its fraction of what is left of it."""
        return self.kind == "kernel"


@dataclass(frozen=True)
class Budgets:
    size: Mapping[Budget, float]  # budget -> ns
    region: Budget  # the budget every change draws on (the region's wall time)


@dataclass(frozen=True)
class Taken:
    """A change's place in the ranking and what it took."""

    key: str
    takes: Mapping[Budget, float]  # budget -> ns saved there, scaled to the region's cap
    summed_ns: float  # its claims, as if it came first
    saved_ns: float  # marginal, capped by what was left of the region
    uncapped_ns: float  # marginal before that cap
    after: tuple[str, ...]  # changes ranked above it that took some of the same budgets


def walk(claims: Mapping[str, Mapping[Budget, float]], budgets: Budgets) -> list[Taken]:
    """`claims`: change key -> {budget: ns it would save there first}. The changes ranked,
    most saving first."""
    left = dict(budgets.size)
    summed = {key: sum(c.values()) for key, c in claims.items()}
    heap = [(-summed[key], key) for key in claims]
    heapq.heapify(heap)
    takers: dict[Budget, list[str]] = {}
    out: list[Taken] = []
    while heap:
        _, key = heapq.heappop(heap)
        takes = _takes(claims[key], left, budgets)
        value = sum(takes.values())
        if heap and value < -heap[0][0] - EPS_NS:  # stale: another change now saves more
            heapq.heappush(heap, (-value, key))
            continue
        for res, take in takes.items():
            left[res] -= take
        capped = min(value, max(left.get(budgets.region, 0.0), 0.0))
        left[budgets.region] = left.get(budgets.region, 0.0) - capped
        after = tuple(dict.fromkeys(t for res in claims[key] for t in takers.get(res, [])))
        for res, take in takes.items():
            if take > 0:
                takers.setdefault(res, []).append(key)
        scale = capped / value if value > 0 else 0.0
        shown = {r: t * scale for r, t in takes.items()}
        out.append(Taken(key, shown, summed[key], capped, value, after))
    return out


def _takes(
    claims: Mapping[Budget, float], left: Mapping[Budget, float], budgets: Budgets
) -> dict[Budget, float]:
    """What a change saves on each budget given what is left there."""
    out: dict[Budget, float] = {}
    for res, want in claims.items():
        remaining = left.get(res, 0.0)
        size = budgets.size.get(res, 0.0)
        if res.shrinks:  # the same fraction of what is left
            take = want / size * remaining if size > 0 else 0.0
        else:  # at most what is left
            take = want
        out[res] = max(min(take, remaining), 0.0)
    return out
