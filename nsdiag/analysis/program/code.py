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
from nsdiag.model.text_codes import distinct_pairs, factorize_text

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
    def idle_functions(self) -> tuple[np.ndarray, list[str]]:
        """The idle gaps' outer functions as numbers, and the function of each number: the
        changes that save idle time sum it per function on these, not on the strings."""
        return factorize_text(self.idle["outer"])

    @cached_property
    def idled_in(self) -> set[str]:
        """The functions the host idled the GPU in."""
        return set(self.idle_functions[1])

    @cached_property
    def is_kernel(self) -> np.ndarray:
        """Which activities are kernel launches (the others are copies)."""
        return np.asarray(self.activities["kind"] == "kernel", dtype=bool)

    @cached_property
    def is_copy(self) -> np.ndarray:
        return np.asarray(self.activities["kind"] == "memcpy", dtype=bool)

    @cached_property
    def kernel_launches(self) -> float:
        return float(self.is_kernel.sum())

    @cached_property
    def columns(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The activities' kernel ids, and their names as numbers with the name of each
        number: each change picks its activities from these (a region has 10^4-10^5
        activities and a program tens of changes)."""
        acts = self.activities
        if not len(acts):
            empty = np.array([], dtype="int64")
            return empty, empty, []
        codes, names = factorize_text(acts["name"])
        return acts["kernel_id"].to_numpy(), codes, names

    @cached_property
    def name_code(self) -> dict[object, int]:
        return {name: i for i, name in enumerate(self.columns[2])}

    @cached_property
    def functions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The functions open at each activity's launch (outer, inner) as numbers, with the
        name of each number: a change's sites are counted on these, not on the strings."""
        acts = self.activities
        if not len(acts):
            empty, none = np.array([], dtype="int64"), np.array([], dtype=object)
            return empty, empty, none, none
        outer, outer_names = factorize_text(acts["outer"])
        inner, inner_names = factorize_text(acts["inner"])
        return (
            outer,
            inner,
            np.asarray(outer_names, dtype=object),
            np.asarray(inner_names, dtype=object),
        )

    @cached_property
    def pytorch(self) -> bool:
        """Whether the program's kernels are PyTorch's: a profile with the ranges would name
        its functions."""
        names = self.activities["name"]
        if not len(names):
            names = pd.Series([k.name for k in self.ctx.kernels], dtype=object)
        codes, distinct = factorize_text(names)  # long names: not hashed by pandas
        if (codes < 0).any():  # a missing name, which pd.unique counts among the first
            distinct = pd.unique(names).tolist()
        return any(is_pytorch_kernel(str(n)) for n in distinct[:2000])


def attribute(changes: Sequence[Change], ctx: ProgramContext) -> tuple[Change, ...]:
    """The changes with their code."""
    work = _Work(ctx)
    return tuple(replace(c, code=_code(c, work)) for c in changes)


def _code(change: Change, work: _Work) -> CodeAttribution | None:
    chosen, idle = _of_change(change, work)
    if not chosen.any() and (idle is None or not len(idle)):
        return None
    n = max(work.ctx.iterations, 1)
    per = work.ctx.iterations > 0
    _, name_codes, names = work.columns
    launches = float((chosen & work.is_kernel).sum())
    if not work.ranges.recorded:
        operators = tuple(
            dict.fromkeys(
                op for code in pd.unique(name_codes[chosen]).tolist()
                if (op := operator_of(str(names[code])))
            )
        )  # fmt: skip
        return CodeAttribution(
            source=KERNEL_NAMES if operators else NO_CODE,
            launches=launches / n,
            total_launches=work.kernel_launches / n,
            per_iteration=per,
            operators=operators,
            note=REPROFILE if work.pytorch else "",
        )
    outer, _, outer_names, _ = work.functions
    if idle is not None and len(idle):
        # idle time: the launches the host made in the functions it idled the GPU in
        idled = idle.functions() - {NONE}
        chosen = np.isin(outer, np.flatnonzero([f in idled for f in outer_names.tolist()]))
    sites = _sites(chosen, idle, work, n)
    if idle is not None and len(idle):
        launches = sum(site.launches for site in sites) * n
    return CodeAttribution(
        source=PYTORCH_RANGES,
        sites=sites,
        launches=launches / n,
        total_launches=work.kernel_launches / n,
        per_iteration=per,
    )


@dataclass(frozen=True)
class _Idle:
    """The idle time a change saves: the wait account's gaps (`_Work.idle`), once per column of
    the account its findings save from (a gap saved from two columns counts in both)."""

    work: _Work
    columns: tuple[str, ...]

    @property
    def frame(self) -> pd.DataFrame:
        """The gaps of each column one after the other, with what they save (`saved`)."""
        gaps = self.work.idle
        return pd.concat([gaps.assign(saved=gaps[c]) for c in self.columns], ignore_index=True)

    def functions(self) -> set[str]:
        """The functions the host idled the GPU in."""
        return self.work.idled_in

    def by_function(self) -> pd.Series:
        """The idle time saved per function, sorted by function: `frame.groupby("outer")`'s
        sums, summed on the functions' numbers (each function's gaps in the same order)."""
        codes, functions = self.work.idle_functions
        if (codes < 0).any():  # a gap in no known function: as pandas groups it
            return self.frame.groupby("outer")["saved"].sum()
        gaps = self.work.idle
        saved = pd.concat([gaps[c] for c in self.columns], ignore_index=True)
        sums = saved.groupby(np.tile(codes, len(self.columns))).sum()
        named = pd.Series(
            sums.to_numpy(), index=pd.Index([functions[c] for c in sums.index.tolist()])
        )
        return named.sort_index()

    def __len__(self) -> int:
        return len(self.work.idle) * len(self.columns)


def _of_change(change: Change, work: _Work) -> tuple[np.ndarray, _Idle | None]:
    """Which activities a change is about, and the idle time it saves (None: not idle
    time)."""
    acts = work.activities
    chosen = np.zeros(len(acts), dtype=bool)
    idle_columns: list[str] = []
    ids = {t.kernel_id for t in change.kernels if t.kernel_id is not None}
    names = {t.name for t in change.kernels if t.kernel_id is None}
    kernel_id, name_codes, _ = work.columns
    for f in change.findings:
        cause = cause_of(f.cause, "kernel" if f.kernel and not f.ranges else "program")
        if cause.work == KERNELS:
            names.update(n for n in f.named_kernels if n)
        elif cause.work == COPIES and len(acts):
            copies = work.is_copy.copy()
            if f.ranges:
                copies &= acts["range"].isin(f.ranges).to_numpy()
            chosen |= copies
        elif cause.work.startswith("idle:") and len(work.idle):
            column = cause.work.split(":", 1)[1]
            gaps = work.idle
            if column in gaps:
                idle_columns.append(column)
    if len(acts):
        chosen |= np.isin(kernel_id, list(ids)) & (kernel_id >= 0)
        if names:
            code = work.name_code
            chosen |= np.isin(name_codes, [code[n] for n in names if n in code])
    return chosen, (_Idle(work, tuple(idle_columns)) if idle_columns else None)


def _sites(chosen: np.ndarray, idle: _Idle | None, work: _Work, n: int) -> tuple[CodeSite, ...]:
    """The functions holding the chosen activities' work, most first: by idle time saved where
    the change saves idle time, else by launches. Tens of changes each count a few functions:
    plain Python on the counts, pandas only for the idle sums."""
    kernels = chosen & work.is_kernel
    counted = kernels if kernels.any() else chosen  # a copy change counts its copies
    launches = _launches_by_site(counted, work)
    saves_idle = idle is not None and len(idle) > 0
    by_idle = idle.by_function() if idle is not None and saves_idle else None
    if by_idle is not None and len(by_idle):
        ranked, total = _most_first(by_idle)
    else:
        per_function: dict[str, float] = {}
        for (outer, _), count in launches.items():
            per_function[outer] = per_function.get(outer, 0.0) + count
        ranked, total = _most_first(per_function)
    sites = []
    for function, weight in ranked:
        if function == NONE or total <= 0 or weight < MIN_SITE_SHARE * total:
            continue
        fn = str(function)
        mine = [(inner, count) for (outer, inner), count in launches.items() if outer == fn]
        if mine:
            inner = str(max(mine, key=lambda site: site[1])[0])  # the first of the most
        elif idle is not None and saves_idle and fn in idle.functions():
            gaps = idle.frame
            inner = str(gaps.loc[gaps["outer"] == fn, "inner"].value_counts().index[0])
        else:
            inner = NONE
        sites.append(
            CodeSite(
                function=fn,
                inner=inner if inner != fn else "",
                launches=float(sum(count for _, count in mine)) / n if mine else 0.0,
                host_ns=work.ranges.host_ns(fn) / n,
                idle_ns=float(by_idle.get(fn, 0.0)) / n if by_idle is not None and len(by_idle)
                else None,
            )
        )  # fmt: skip
        if len(sites) == TOP_SITES:
            break
    return tuple(sites)


def _most_first(weights: dict[str, float] | pd.Series) -> tuple[list[tuple[str, float]], float]:
    """The functions by weight, largest first (ties in the order pandas' sort gives them), and
    their total. Most changes' work lies in one function: that needs no Series."""
    if isinstance(weights, dict):
        if len(weights) <= 1:
            return list(weights.items()), float(sum(weights.values()))
        weights = pd.Series(weights, dtype=float)
    ranked = [(str(f), float(w)) for f, w in weights.sort_values(ascending=False).items()]
    return ranked, float(weights.sum())


def _launches_by_site(counted: np.ndarray, work: _Work) -> dict[tuple[str, str], int]:
    """The counted activities' number per (outer, inner) function, sorted by function as a
    groupby of their columns gives it, counted on the functions' numbers."""
    if not counted.any():
        return {}
    outer, inner, outer_names, inner_names = work.functions
    outer, inner = outer[counted], inner[counted]
    known = (outer >= 0) & (inner >= 0)  # a missing function is no site (groupby drops it)
    firsts, seconds, _, count = distinct_pairs(outer[known], inner[known])
    names = zip(outer_names[firsts].tolist(), inner_names[seconds].tolist(), strict=True)
    return dict(sorted(zip(names, count.tolist(), strict=True)))
