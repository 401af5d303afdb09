"""Which Python function launched the work: the PyTorch function ranges nsys records with
`--pytorch=functions-trace` (domain `PyTorch`, one range per call of a traced function:
`torch.optim.AdamW.step`, `torch.autograd.backward`, `torch.nn.modules.Linear.forward`,
`torch.Tensor.to`, ...).

A launch's function is the outermost PyTorch range open on the launching thread at its CUDA call
(the optimizer's step, the backward pass, a module's forward), with the innermost one kept beside
it (`torch.nn.functional.layer_norm` inside a module's forward). Work launched from a thread with
no PyTorch range open (PyTorch's autograd engine runs the backward pass on a thread of its own)
counts under the function open meanwhile on the thread of its process that holds them (the
Python thread, inside `torch.autograd.backward`). Idle GPU time counts under the function the
host was in at the idle stretch's midpoint, on the thread whose work ended it.

These ranges are attribution, like a library's NVTX ranges: never the analysed region
(model/nvtx_owners.py has the domain), never a reason to say "outside NVTX ranges".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.model.intervals import enclosing, enclosing_disjoint
from nsdiag.model.signature import signature_key, signature_values

DOMAIN = "pytorch"  # NvtxDomainCreate's name, lower case
NONE = ""  # no PyTorch function open

ObjArray = npt.NDArray[np.object_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Thread:
    starts: IntArray  # every range, by start
    ends: IntArray
    names: ObjArray
    top: IntArray  # indices of the outermost ranges (no PyTorch range around them)


@dataclass(frozen=True)
class FunctionRanges:
    """The region's PyTorch function ranges, per host thread."""

    threads: dict[tuple[int, int], _Thread]
    main: dict[int, int]  # process id -> the thread holding most of its ranges

    @property
    def recorded(self) -> bool:
        return bool(self.threads)

    def sites(
        self, pids: npt.ArrayLike, tids: npt.ArrayLike, times: npt.ArrayLike
    ) -> tuple[ObjArray, ObjArray]:
        """Per (process, thread, time): the outermost and the innermost PyTorch function open
        there (NONE: none), looked up on the process's main thread where the thread has none."""
        pid = np.asarray(pids, dtype="int64")
        tid = np.asarray(tids, dtype="int64")
        when = np.asarray(times, dtype="int64")
        outer = np.full(len(when), NONE, dtype=object)
        inner = np.full(len(when), NONE, dtype=object)
        self._fill(outer, inner, pid, tid, when, np.ones(len(when), dtype=bool))
        missing = outer == NONE
        if missing.any():
            processes, of = np.unique(pid[missing], return_inverse=True)  # a few processes
            main = np.array([self.main.get(int(p), -1) for p in processes], dtype="int64")[of]
            mtid = tid.copy()
            mtid[missing] = main
            self._fill(outer, inner, pid, mtid, when, missing)
        return outer, inner

    def _fill(
        self,
        outer: ObjArray,
        inner: ObjArray,
        pid: IntArray,
        tid: IntArray,
        when: IntArray,
        todo: npt.NDArray[np.bool_],
    ) -> None:
        for (p, t), thread in self.threads.items():
            rows = np.flatnonzero(todo & (pid == p) & (tid == t))
            if not len(rows):
                continue
            top = thread.top
            hit = enclosing_disjoint(thread.starts[top], thread.ends[top], when[rows])
            ok = hit >= 0
            outer[rows[ok]] = thread.names[top[hit[ok]]]
            deepest = enclosing(thread.starts, thread.ends, when[rows])
            ok = deepest >= 0
            inner[rows[ok]] = thread.names[deepest[ok]]

    def calls(self, function: str) -> int:
        """How many times `function` was called outermost, in the region."""
        return sum(int((t.names[t.top] == function).sum()) for t in self.threads.values())

    def host_ns(self, function: str) -> float:
        """The host's time inside `function` (its outermost ranges' duration), in the region."""
        total = 0.0
        for thread in self.threads.values():
            top = thread.top
            named = top[thread.names[top] == function]
            total += float((thread.ends[named] - thread.starts[named]).sum())
        return total


def function_ranges(nvtx: pd.DataFrame | None) -> FunctionRanges:
    """The PyTorch function ranges of an NVTX table (empty where none were recorded)."""
    empty = FunctionRanges({}, {})
    if nvtx is None or not len(nvtx) or "domain" not in nvtx:
        return empty
    mine = nvtx[nvtx["domain"].astype(str).str.lower() == DOMAIN]
    if not len(mine) or not {"process_id", "thread_id"} <= set(mine.columns):
        return empty
    threads: dict[tuple[int, int], _Thread] = {}
    counts: dict[int, tuple[int, int]] = {}
    for keys, group in mine.groupby(["process_id", "thread_id"], sort=True):
        pid, tid = cast(tuple[int, int], keys)
        group = group.sort_values("start_ns", kind="stable")
        starts = group["start_ns"].to_numpy("int64")
        ends = np.maximum(group["end_ns"].to_numpy("int64"), starts)
        # outermost: no earlier range of the thread still open at its start (push/pop nest)
        reach = np.maximum.accumulate(np.concatenate([[np.iinfo("int64").min], ends[:-1]]))
        key = (int(pid), int(tid))
        threads[key] = _Thread(
            starts, ends, group["name"].astype(str).to_numpy(dtype=object),
            np.flatnonzero(starts >= reach),
        )  # fmt: skip
        if len(group) > counts.get(key[0], (-1, 0))[1]:
            counts[key[0]] = (key[1], len(group))
    return FunctionRanges(threads, {p: t for p, (t, _) in counts.items()})


# What activity_sites reads of the timeline.
_ACTIVITY_COLUMNS = (
    "kind", "name", "grid", "block", "process_id", "thread_id", "api_start_ns", "start_ns",
    "nvtx_range",
)  # fmt: skip


def activity_sites(
    timeline: pd.DataFrame,
    kernels: Sequence[KernelDiagnosis],
    functions: FunctionRanges,
    launches: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The region's kernels and copies (kind, name, range, kernel_id: the profiled signature's
    id or -1) with the functions open at their launch (outer, inner). `launches`: the
    timeline's launch sequence (launch_sequence.py), whose launches are keyed already."""
    columns = ["kind", "name", "range", "kernel_id", "outer", "inner"]
    if not len(timeline) or "kind" not in timeline:
        return pd.DataFrame(columns=columns)
    read = [c for c in _ACTIVITY_COLUMNS if c in timeline]  # not the timeline's every column
    chosen = timeline["kind"].isin(["kernel", "memcpy"]).to_numpy()
    acts = timeline.loc[chosen, read].reset_index(drop=True)
    ids: dict[str, int] = {}
    for k in kernels:
        for name in (k.name, k.demangled):
            ids.setdefault(signature_key(name, k.grid, k.block).text, k.id)
    kernel_id = np.full(len(acts), -1, dtype="int64")
    is_kernel = (acts["kind"] == "kernel").to_numpy()
    if is_kernel.any() and ids and _keyed(launches, len(timeline)):
        assert launches is not None
        # the same key texts, from the same cells: the sequence's id of each timeline row
        by_row = np.full(len(timeline), -1, dtype="int64")
        found = launches["kernel_id"].to_numpy("float64")
        by_row[launches["timeline_row"].to_numpy("int64")] = np.where(
            np.isnan(found), -1, found
        ).astype("int64")
        kernel_id[is_kernel] = by_row[np.flatnonzero(chosen)[is_kernel]]
    elif is_kernel.any() and ids:
        keyed = acts.loc[is_kernel, [c for c in ("name", "grid", "block") if c in acts]]
        kernel_id[is_kernel] = signature_values(keyed, ids, -1).astype("int64")
    outer = inner = np.full(len(acts), NONE, dtype=object)
    if functions.recorded and {"process_id", "thread_id"} <= set(acts.columns):
        when = acts["api_start_ns"] if "api_start_ns" in acts else acts["start_ns"]
        outer, inner = functions.sites(
            _ids(acts["process_id"]),
            _ids(acts["thread_id"]),
            pd.to_numeric(when, errors="coerce").fillna(acts["start_ns"]).to_numpy("int64"),
        )
    ranges = (
        acts["nvtx_range"].astype(str).to_numpy(dtype=object)
        if "nvtx_range" in acts
        else np.full(len(acts), "", dtype=object)
    )
    return pd.DataFrame(
        {
            "kind": acts["kind"].to_numpy(),
            "name": acts["name"].astype(str).to_numpy(dtype=object),
            "range": ranges,
            "kernel_id": kernel_id,
            "outer": outer,
            "inner": inner,
        }
    )


def _keyed(launches: pd.DataFrame | None, rows: int) -> bool:
    """Whether the launch sequence keyed every kernel of a timeline of `rows` rows."""
    if launches is None or not {"kernel_id", "timeline_row"} <= set(launches.columns):
        return False
    at = launches["timeline_row"].to_numpy("int64")
    return len(at) > 0 and bool((at >= 0).all() and (at < rows).all())


def gap_sites(gaps: pd.DataFrame, functions: FunctionRanges) -> tuple[ObjArray, ObjArray]:
    """The functions the host was in at each idle gap's midpoint, on the thread whose work ended
    it (timeline/waits.py's gaps)."""
    if not len(gaps) or not functions.recorded:
        blank = np.full(len(gaps), NONE, dtype=object)
        return blank, blank
    middle = (gaps["start_ns"].to_numpy("int64") + gaps["end_ns"].to_numpy("int64")) // 2
    return functions.sites(
        gaps["process_id"].to_numpy("int64"), gaps["thread_id"].to_numpy("int64"), middle
    )


def _ids(column: pd.Series) -> IntArray:
    return pd.to_numeric(column, errors="coerce").fillna(-1).to_numpy("int64")
