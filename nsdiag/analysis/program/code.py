"""Every change names its code: the Python functions whose PyTorch ranges hold its kernels'
launches, its copies or the idle time it saves (code_sites.py reads the ranges), with their
share: "1,216 of 1,992 launches per iteration in torch.optim.AdamW.step, 25.2 ms of host time".

What a change is about comes from its findings' causes (records/causes.py `work`): the kernels it
touches, the copies of its ranges, or the idle GPU time the host spent in one state (a column of
the wait account). Without PyTorch ranges (older recordings, programs not in Python) the kernel
names say what they can (model/pytorch_ops.py: `indexFuncLargeIndex<..., ReduceAdd>` is
`Tensor.index_add_`), and the attribution says what a profile with the ranges would add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import cast

import numpy as np
import pandas as pd

from nsdiag.analysis.program.code_sites import NONE, FunctionRanges
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.records.causes import COPIES, KERNELS, cause_of
from nsdiag.analysis.records.changes import Change
from nsdiag.analysis.records.code import (
    KERNEL_NAMES,
    NO_CODE,
    PYTORCH_RANGES,
    CodeAttribution,
    CodeSite,
)
from nsdiag.model.pytorch_ops import is_pytorch_kernel, operator_of

TOP_SITES = 3  # the functions a change lists, most work first
# A function holding less of a change's work than this share is left out (noise: a warm-up
# call inside the region, a stray copy).
MIN_SITE_SHARE = 0.02
REPROFILE = (
    "nsdiag profile records which PyTorch function launched each kernel (nsys "
    "--pytorch=functions-trace, nsys 2024.5 or later): profile with it to see the Python code"
)


@dataclass
class _Work:
    """What the region holds to attribute (the context computes and keeps it)."""

    ctx: ProgramContext

    @property
    def ranges(self) -> FunctionRanges:
        return self.ctx.functions

    @property
    def activities(self) -> pd.DataFrame:
        return self.ctx.activity_sites

    @cached_property
    def idle(self) -> pd.DataFrame:
        """The wait account's idle gaps with the function the host was in at each midpoint."""
        if self.ctx.timeline is None:
            return pd.DataFrame()
        outer, inner = self.ctx.gap_sites
        return self.ctx.waits.gaps.assign(outer=outer, inner=inner)

    @cached_property
    def kernel_launches(self) -> float:
        return float((self.activities["kind"] == "kernel").sum())

    @cached_property
    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[object, int]]:
        """The activities' kind and kernel id as arrays, and their names as numbers with each
        name's number: each change picks its activities from these (a region has 10^4-10^5
        activities and a program tens of changes)."""
        acts = self.activities
        if not len(acts):
            empty = np.array([], dtype="int64")
            return np.array([], dtype=object), empty, empty, {}
        codes, names = pd.factorize(acts["name"])
        return (
            acts["kind"].to_numpy(),
            acts["kernel_id"].to_numpy(),
            codes,
            {name: i for i, name in enumerate(names.tolist())},
        )

    @cached_property
    def pytorch(self) -> bool:
        """Whether the program's kernels are PyTorch's: a profile with the ranges would name
        its functions."""
        names = self.activities["name"]
        if not len(names):
            names = pd.Series([k.name for k in self.ctx.kernels], dtype=object)
        return any(is_pytorch_kernel(str(n)) for n in pd.unique(names)[:2000])


def attribute(changes: Sequence[Change], ctx: ProgramContext) -> tuple[Change, ...]:
    """The changes with their code."""
    work = _Work(ctx)
    return tuple(replace(c, code=_code(c, work)) for c in changes)


def _code(change: Change, work: _Work) -> CodeAttribution | None:
    acts, idle = _of_change(change, work)
    if not len(acts) and (idle is None or not len(idle)):
        return None
    n = max(work.ctx.iterations, 1)
    per = work.ctx.iterations > 0
    launches = float((acts["kind"] == "kernel").sum()) if len(acts) else 0.0
    if not work.ranges.recorded:
        operators = tuple(
            dict.fromkeys(
                op for name in pd.unique(acts["name"]).tolist() if (op := operator_of(str(name)))
            )
        ) if len(acts) else ()  # fmt: skip
        return CodeAttribution(
            source=KERNEL_NAMES if operators else NO_CODE,
            launches=launches / n,
            total_launches=work.kernel_launches / n,
            per_iteration=per,
            operators=operators,
            note=REPROFILE if work.pytorch else "",
        )
    if idle is not None and len(idle):
        # idle time: the launches the host made in the functions it idled the GPU in
        acts = work.activities[
            work.activities["outer"].isin(set(pd.unique(idle["outer"]).tolist()) - {NONE})
        ]
    sites = _sites(acts, idle, work.ranges, n)
    if idle is not None and len(idle):
        launches = sum(site.launches for site in sites) * n
    return CodeAttribution(
        source=PYTORCH_RANGES,
        sites=sites,
        launches=launches / n,
        total_launches=work.kernel_launches / n,
        per_iteration=per,
    )


def _of_change(change: Change, work: _Work) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The activities a change is about, and the idle time it saves (None: not idle time)."""
    acts = work.activities
    chosen = np.zeros(len(acts), dtype=bool)
    idle_parts: list[pd.DataFrame] = []
    ids = {t.kernel_id for t in change.kernels if t.kernel_id is not None}
    names = {t.name for t in change.kernels if t.kernel_id is None}
    kind, kernel_id, name_codes, name_code = work.columns
    for f in change.findings:
        cause = cause_of(f.cause, "kernel" if f.kernel and not f.ranges else "program")
        if cause.work == KERNELS:
            names.update(n for n in f.named_kernels if n)
        elif cause.work == COPIES and len(acts):
            copies = kind == "memcpy"
            if f.ranges:
                copies &= acts["range"].isin(f.ranges).to_numpy()
            chosen |= copies
        elif cause.work.startswith("idle:") and len(work.idle):
            column = cause.work.split(":", 1)[1]
            gaps = work.idle
            if column in gaps:
                idle_parts.append(gaps.assign(saved=gaps[column]))
    if len(acts):
        chosen |= np.isin(kernel_id, list(ids)) & (kernel_id >= 0)
        if names:
            chosen |= np.isin(name_codes, [name_code[n] for n in names if n in name_code])
    idle = pd.concat(idle_parts, ignore_index=True) if idle_parts else None
    return acts[chosen], idle


def _sites(
    acts: pd.DataFrame, idle: pd.DataFrame | None, ranges: FunctionRanges, n: int
) -> tuple[CodeSite, ...]:
    """The functions holding the work, most first: by idle time saved where the change saves
    idle time, else by launches."""
    kernels = acts[acts["kind"] == "kernel"] if len(acts) else acts
    counted = kernels if len(kernels) else acts  # a copy change counts its copies
    launches = (
        counted.groupby(["outer", "inner"]).size() if len(counted) else pd.Series(dtype=float)
    )
    by_idle = (
        idle.groupby("outer")["saved"].sum() if idle is not None and len(idle) else pd.Series()
    )
    inner_of = (
        idle.groupby("outer")["inner"].agg(lambda s: s.value_counts().index[0])
        if idle is not None and len(idle)
        else pd.Series(dtype=object)
    )
    if len(by_idle):
        weights = by_idle
    else:
        weights = launches.groupby(level=0).sum().astype(float)
    total = float(weights.sum())
    sites = []
    for function, weight in weights.sort_values(ascending=False).items():
        if function == NONE or total <= 0 or weight < MIN_SITE_SHARE * total:
            continue
        fn = str(function)
        mine = launches[launches.index.get_level_values(0) == fn] if len(launches) else launches
        top = cast(tuple[str, str], mine.idxmax()) if len(mine) else (fn, inner_of.get(fn, NONE))
        inner = str(top[1])
        sites.append(
            CodeSite(
                function=fn,
                inner=inner if inner != fn else "",
                launches=float(mine.sum()) / n if len(mine) else 0.0,
                host_ns=ranges.host_ns(fn) / n,
                idle_ns=float(by_idle.get(fn, 0.0)) / n if len(by_idle) else None,
            )
        )
        if len(sites) == TOP_SITES:
            break
    return tuple(sites)
