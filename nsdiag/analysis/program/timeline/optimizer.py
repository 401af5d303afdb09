"""An optimizer stepping its parameters one by one (`torch.optim.AdamW(..., foreach=False)`, as
older recipes build it): the idiom NSD413 names, with its one-line fix (`fused=True`).

Read off the PyTorch function ranges (code_sites.py): the kernels launched inside
`torch.optim.<Optimizer>.step` and the idle GPU time while the host was inside it. A step that
launches many kernels per call, nearly all of them single-tensor kernels (not PyTorch's
multi-tensor `multi_tensor_apply_kernel` nor a fused optimizer kernel), steps its parameters one
at a time: a handful of elementwise kernels each, a few microseconds of GPU work behind tens of
microseconds of Python. The saving is the GPU's idle time while the host was in those steps
(launching, or in Python between the launches: the wait account's `launch` and `cpu`), less what
a fused step still costs the host (FUSED_STEP_HOST_NS a call). The launch-bound and CPU-bound
findings (host_wait.py) count only the idle time this leaves them.

Measured on the H200 (tests/data/idioms): a timm ViT-S step, AdamW(foreach=False) over 152
parameter tensors, 1,216 launches per step inside AdamW.step, 26.0 ms of host time there and
23.8 ms of GPU idle time; with fused=True the step's range took 1.29 ms of host time and the
step went from 69.3 to 50.1 ms under nsys (45.8 to 31.0 ms plain).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.analyses import PER_PARAMETER_OPTIMIZER
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.timeline.findings import (
    Draft,
    make_finding,
    share,
    worth_reporting,
)
from nsdiag.analysis.records.findings import Evidence, Finding
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model.text_codes import factorize_text

STEP = re.compile(r"^torch\.optim\.(?P<optimizer>[A-Za-z_]\w*)\.step$")
# PyTorch's multi-tensor and fused optimizer kernels: a step already batched over parameters
BATCHED = re.compile(r"multi_tensor_apply|fused_adam|FusedAdam|_fused_|fused_sgd", re.IGNORECASE)
# The host time of one AdamW(fused=True).step over ViT-S's 152 parameter tensors on the H200
# (median of the steady steps, tests/data/idioms/optim_fused.sqlite.gz): what the fused step
# still costs, taken off the saving.
FUSED_STEP_HOST_NS = 1.29e6
# Optimizers that take fused=True on CUDA in PyTorch 2.x (the others: foreach=True).
FUSED = ("Adam", "AdamW", "SGD", "Adagrad")


@dataclass(frozen=True)
class Steps:
    """The region's per-parameter optimizer steps, outermost function by function."""

    function: str  # torch.optim.AdamW.step
    optimizer: str  # AdamW
    calls: int
    launches: int  # kernels launched inside the calls
    batched: int  # of them multi-tensor or fused
    host_ns: float  # the calls' host time
    claimed: npt.NDArray[np.bool_]  # per wait-account gap: the host was inside one of them
    idle_ns: float  # the claimed gaps' launch and CPU idle time

    @property
    def saved_ns(self) -> float:
        return max(self.idle_ns - self.calls * FUSED_STEP_HOST_NS, 0.0)


def per_parameter_steps(ctx: ProgramContext) -> Steps | None:
    """The optimizer whose steps launch most single-tensor kernels, if one steps parameters one
    by one (at least min_launches_per_call per call, at most max_batched_share batched); None
    where there is none or no PyTorch ranges were recorded."""
    return _steps(ctx, _params(ctx))


def claimed_gaps(ctx: ProgramContext) -> npt.NDArray[np.bool_]:
    """The wait-account gaps NSD413 reports (its rule applied and its saving large enough):
    launch-bound and CPU-bound count the rest."""
    gaps = ctx.waits.gaps
    rule = _rule(ctx)
    steps = per_parameter_steps(ctx) if rule is not None else None
    if steps is None or rule is None:
        return np.zeros(len(gaps), dtype=bool)
    params = PER_PARAMETER_OPTIMIZER.params_of(rule)
    if not worth_reporting(ctx, steps.saved_ns, params["min_impact"]):
        return np.zeros(len(gaps), dtype=bool)
    return steps.claimed


def per_parameter_optimizer(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = PER_PARAMETER_OPTIMIZER.params_of(rule)
    steps = _steps(ctx, params)
    if steps is None or not worth_reporting(ctx, steps.saved_ns, params["min_impact"]):
        return []
    n = max(ctx.iterations, 1)
    per = " per iteration" if ctx.iterations else ""
    total = float((ctx.activity_sites["kind"] == "kernel").sum())
    values = {
        "function": steps.function,
        "optimizer": steps.optimizer,
        "per": per,
        "launches": round(steps.launches / n),
        "all_launches": round(total / n),
        "per_call": round(steps.launches / max(steps.calls, 1)),
        "batched": steps.batched,
        "host_ms": steps.host_ns / n / 1e6,
        "idle_ms": steps.idle_ns / n / 1e6,
        "fused_ms": steps.calls * FUSED_STEP_HOST_NS / n / 1e6,
        "saved_per_ms": steps.saved_ns / n / 1e6,
        "flag": "fused=True" if steps.optimizer in FUSED else "foreach=True",
    }
    evidence = (
        Evidence("launches_per_call", steps.launches / max(steps.calls, 1), ">=",
                 params["min_launches_per_call"]),
        Evidence("batched_share", steps.batched / max(steps.launches, 1), "<=",
                 params["max_batched_share"]),
        Evidence("step_host_ns", steps.host_ns),
        Evidence("step_idle_ns", steps.idle_ns),
        share(ctx, steps.saved_ns, params["min_impact"]),
    )  # fmt: skip
    claimed = ctx.waits.gaps.loc[steps.claimed]
    device = int(claimed["device"].mode().iloc[0]) if len(claimed) else 0
    # the program's NVTX range the steps ran in (a `train_step` around the whole step)
    ranges = claimed["next_range"].fillna("").astype(str)
    ranges = ranges[ranges != ""]
    where = str(ranges.mode().iloc[0]) if len(ranges) else ""
    details = {
        "function": steps.function,
        "calls": steps.calls,
        "launches": steps.launches,
        "batched_launches": steps.batched,
        "host_ns": steps.host_ns,
        "idle_ns": steps.idle_ns,
        "fused_step_host_ns": FUSED_STEP_HOST_NS,
    }
    draft = Draft(device, where, steps.saved_ns, values, evidence, details)
    return [make_finding(PER_PARAMETER_OPTIMIZER, rule, ctx, draft)]


def _rule(ctx: ProgramContext) -> RuleSpec | None:
    return next((r for r in ctx.rules if r.analysis == PER_PARAMETER_OPTIMIZER.name), None)


def _params(ctx: ProgramContext) -> dict[str, float]:
    rule = _rule(ctx)
    return PER_PARAMETER_OPTIMIZER.params_of(rule) if rule else PER_PARAMETER_OPTIMIZER.defaults


# One diagnosis asks three times (this analysis, launch-bound, CPU-bound): found once per
# context (keyed by identity; the context is not hashable).
_SEEN: dict[int, tuple[ProgramContext, tuple[float, float], Steps | None]] = {}


def _steps(ctx: ProgramContext, params: dict[str, float]) -> Steps | None:
    if ctx.timeline is None or not ctx.functions.recorded:
        return None
    key = (params["min_launches_per_call"], params["max_batched_share"])
    hit = _SEEN.get(id(ctx))
    if hit is not None and hit[0] is ctx and hit[1] == key:
        return hit[2]
    if len(_SEEN) > 8:
        _SEEN.clear()
    found = _find(ctx, *key)
    _SEEN[id(ctx)] = (ctx, key, found)
    return found


def _matching(names: pd.Series, pattern: re.Pattern[str]) -> int:
    """How many of `names` `pattern` finds (str.contains), searched once per distinct name: a
    per-parameter step launches the same few kernels tens of thousands of times."""
    codes, distinct = factorize_text(names)
    hit = np.array([isinstance(n, str) and bool(pattern.search(n)) for n in distinct], dtype=bool)
    return int(hit[codes[codes >= 0]].sum())


def _find(ctx: ProgramContext, min_per_call: float, max_batched: float) -> Steps | None:
    acts = ctx.activity_sites
    # the kernels' outermost functions by number: the activities are not copied per function
    kernel = (acts["kind"] == "kernel").to_numpy()
    function_of, functions = factorize_text(acts["outer"])
    outer, _ = ctx.gap_sites
    gaps = ctx.waits.gaps
    best: Steps | None = None
    for code in np.unique(function_of[kernel]).tolist():
        function = str(functions[code]) if code >= 0 else ""
        if not STEP.match(function):
            continue
        mine = kernel & (function_of == code)
        launched = int(mine.sum())
        batched = _matching(acts["name"][mine], BATCHED)
        calls = ctx.functions.calls(function)
        if not calls or launched / calls < min_per_call or batched > max_batched * launched:
            continue
        claimed = np.asarray(outer == function, dtype=bool)
        idle = float((gaps.loc[claimed, "launch"] + gaps.loc[claimed, "cpu"]).sum())
        match = STEP.match(function)
        found = Steps(
            function,
            match["optimizer"] if match else function,
            calls,
            launched,
            batched,
            ctx.functions.host_ns(function),
            claimed,
            idle,
        )
        if best is None or found.saved_ns > best.saved_ns:
            best = found
    return best
