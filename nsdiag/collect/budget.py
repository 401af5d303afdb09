"""`--budget SECONDS`: phase 2 cut to fit. The plan's signatures come most GPU time first; the
longest such prefix whose estimate (cost.py) fits the budget is kept, the rest left out, and
status.json says which and why. Pure: plans in, a plan out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nsdiag.collect.cost import Estimate
from nsdiag.collect.plan import Plan
from nsdiag.model.launches import Signature

Replan = Callable[[Sequence[Signature]], Plan]  # the plan for these chosen signatures
Estimator = Callable[[Plan], Estimate]


@dataclass(frozen=True)
class Fitted:
    budget_s: float
    whole: Estimate  # the plan before the cut
    plan: Plan | None  # None: not even the most valuable signature fits
    estimate: Estimate | None  # of `plan`
    left_out: tuple[Signature, ...]

    @property
    def left_out_share(self) -> float:
        return sum(s.share for s in self.left_out)

    def missing(self) -> str | None:
        """status.json's `missing` line for what the budget left out (None: nothing)."""
        if not self.left_out:
            return None
        return (
            f"metrics of {len(self.left_out)} planned kernel signature(s) "
            f"({self.left_out_share:.1%} of GPU time) left out by --budget {self.budget_s:g} s "
            f"(phase 2 for all of them was estimated at {self.whole.total_s:.0f} s)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": self.budget_s,
            "whole_plan_estimated_s": round(self.whole.total_s, 1),
            "kept_estimated_s": round(self.estimate.total_s, 1) if self.estimate else None,
            "kept": len(self.plan.signatures) if self.plan else 0,
            "left_out_share": round(self.left_out_share, 6),
            "left_out": [
                {"name": s.name, "grid": s.grid, "block": s.block, "share": round(s.share, 6)}
                for s in self.left_out
            ],
            "reason": self.reason(),
        }

    def reason(self) -> str:
        if not self.left_out:
            return "the whole plan fits the budget"
        if self.plan is None:
            return (
                "even the signature with the most GPU time alone exceeds the budget "
                "(one ncu run includes a run of the program): phase 2 was skipped"
            )
        return (
            f"the whole plan's estimate exceeds the budget: the {len(self.left_out)} "
            "signature(s) with the least GPU time were left out"
        )


def fit(plan: Plan, budget_s: float, replan: Replan, estimate: Estimator) -> Fitted:
    """The plan of the most valuable signatures that fits `budget_s`. Binary search on the
    prefix length: more signatures mean more launches, so the estimate grows with it (the
    planner's choice of runs can make it dip; the search then keeps a shorter prefix)."""
    whole = estimate(plan)
    sigs = plan.signatures
    if whole.total_s <= budget_s:
        return Fitted(budget_s, whole, plan, whole, ())
    best: tuple[Plan, Estimate] | None = None
    low, high = 1, len(sigs) - 1
    while low <= high:
        k = (low + high) // 2
        candidate = replan(sigs[:k])
        cost = estimate(candidate)
        if cost.total_s <= budget_s and candidate.rounds:
            best, low = (candidate, cost), k + 1
        else:
            high = k - 1
    if best is None:
        return Fitted(budget_s, whole, None, None, tuple(sigs))
    kept, cost = best
    return Fitted(budget_s, whole, kept, cost, tuple(sigs[len(kept.signatures) :]))
