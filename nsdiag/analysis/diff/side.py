"""One side of a comparison: a diagnosed input set seen as time per iteration, the region's and
each kernel signature's, with where in the iteration each signature runs.

Time comes from the timeline where the side has one (the region's kernel launches, every launch
counted), else from the profiled launches (Nsight Compute only: no iterations, and the time is
the profiled GPU time). Verdicts and limiters come from the side's diagnosis, where Nsight
Compute profiled the signature.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsdiag.analysis.diff.stats import Spread
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.records.region import Iteration
from nsdiag.analysis.region.scope import restrict
from nsdiag.analysis.region.windows import launch_times
from nsdiag.model.kernel_facts import parse_kernel_name
from nsdiag.model.launches import Signature, kernel_launches, signatures
from nsdiag.model.names import function_name, normalized
from nsdiag.model.session import Session

# Kernels a library picks for a job (another shape can make it pick another): matched by role.
ROLES = {
    "gemm": "matrix product",
    "conv": "matrix product",
    "conv-fprop": "matrix product",
    "conv-dgrad": "matrix product",
    "conv-wgrad": "matrix product",
    "attention": "attention",
}
# Attention kernels kernel_facts.py does not name (PyTorch's memory-efficient fmha_cutlass*)
ATTENTION_WORDS = ("fmha", "attention", "flash")
GRAPH_LAUNCH = ("cudaGraphLaunch", "cuGraphLaunch")
GPU_BEHIND = 1.1  # the GPU finishes the iterations this much later than the host ends them
MAX_SEQUENCE = 5000  # launches compared in order (a side without iterations: its first ones)


@dataclass(frozen=True)
class KernelTimes:
    """A kernel signature (name, grid, block; a duration group of it where its launches did
    different work) in the side's region."""

    index: int  # in Side.kernels
    name: str
    grid: str
    block: str
    variant: int
    launches: int
    samples: tuple[float, ...]  # its time in each iteration (one value: the whole region)
    position: float  # median place of its launches in their iteration, 0 (first) to 1
    role: str | None  # what a library picked it for (ROLES), None for other kernels
    diagnosis: KernelDiagnosis | None  # where Nsight Compute profiled it

    @property
    def key(self) -> tuple[str, str, str, int]:
        return normalized(self.name), self.grid, self.block, self.variant

    @property
    def time_ns(self) -> float:
        """Per iteration (mean over the side's iterations), or in the region."""
        return float(np.mean(self.samples)) if self.samples else 0.0

    @property
    def launches_per_iteration(self) -> float:
        return self.launches / max(len(self.samples), 1)


@dataclass(frozen=True)
class Run:
    """One recording of a side's program: its region time per iteration and each kernel
    signature's time per iteration (by KernelTimes.key). The runs of one side are the same
    code: their spread is run-to-run noise (noise.py)."""

    sources: tuple[str, ...]
    region_time: Spread
    kernel_ns: Mapping[tuple[str, str, str, int], float]

    @property
    def median_ns(self) -> float:
        return self.region_time.median


@dataclass(frozen=True)
class Side:
    label: str  # before | after
    sources: tuple[str, ...]
    diagnosis: Diagnosis
    region_time: Spread  # iteration wall times; or the region's, or the profiled GPU time
    basis: str  # iterations | region | gpu-time
    kernels: tuple[KernelTimes, ...]  # most time first
    sequence: tuple[int, ...]  # kernel indices in launch order, over one typical iteration
    timeline: pd.DataFrame  # the region's activities (empty without a timeline)
    nvtx: pd.DataFrame  # the NVTX ranges overlapping the region
    extra_runs: tuple[Run, ...] = ()  # further recordings of the same program (--before A B)
    command: tuple[str, ...] | str | None = None  # the profiled command line, where known
    # per iteration (in the region): cudaGraphLaunch calls (None: no CUDA API table) and bytes
    # copied to or from pageable host memory (None: no timeline); what diff's evidence reads
    graph_launches: float | None = None
    pageable_bytes: float | None = None
    syncs: float | None = None  # synchronising CUDA calls per iteration (None: no API table)

    @property
    def runs(self) -> tuple[Run, ...]:
        """Every run of the side, this one (the diagnosed one) first."""
        own = Run(self.sources, self.region_time, {k.key: k.time_ns for k in self.kernels})
        return (own, *self.extra_runs)

    @property
    def iterations(self) -> int:
        return self.region_time.n if self.basis == "iterations" else 0

    @property
    def kernel_time_ns(self) -> float:
        return sum(k.time_ns for k in self.kernels)

    @property
    def launches_per_iteration(self) -> float:
        """Kernel launches per iteration (in the region where there are none)."""
        return sum(k.launches_per_iteration for k in self.kernels)

    def per_iteration(self, ns: float | None) -> float | None:
        """A region total per iteration where the side has iterations."""
        if ns is None:
            return None
        return ns / self.iterations if self.iterations else ns

    def describe(self) -> str:
        """One line: what the time is."""
        if self.basis == "gpu-time":
            return "profiled GPU time (Nsight Compute only: no timeline, no iterations)"
        region = self.diagnosis.region
        return region.description if region is not None else ""


def build(label: str, sources: tuple[str, ...], session: Session, diagnosis: Diagnosis) -> Side:
    """The side's times from its timeline where it has one, else from the profiled kernels."""
    region = diagnosis.region
    if region is None or not session.has_timeline():
        return _from_profiled(label, sources, session, diagnosis)
    scoped = restrict(session, region)
    inside = scoped.timeline
    launches = kernel_launches(inside) if len(inside) else _empty_launches()
    iterations = region.iterations
    if iterations:
        starts = np.array([i.start_ns for i in iterations], dtype="int64")
        ends = np.array([i.end_ns for i in iterations], dtype="int64")
        when = launch_times(launches) if len(launches) else np.zeros(0, dtype="int64")
        which = _iteration_of(when, starts, ends)
        walls = _iteration_times(iterations, starts, ends, inside)
        basis = "iterations"
    else:
        which = np.zeros(len(launches), dtype="int64")
        walls = (float(region.wall_ns),)
        basis = "region"
    kernels, sequence = _kernels(launches, which, len(walls), diagnosis)
    n = max(len(walls), 1)
    graphs, pageable = _graph_launches(scoped.api_calls), _pageable_bytes(inside)
    syncs = _syncs(scoped.api_calls)
    return Side(
        label, sources, diagnosis, Spread(walls), basis, kernels, sequence, inside,
        scoped.nvtx_ranges, command=session.meta.command,
        graph_launches=None if graphs is None else graphs / n, pageable_bytes=pageable / n,
        syncs=None if syncs is None else syncs / n,
    )  # fmt: skip


def _syncs(api: pd.DataFrame) -> float | None:
    """Calls that block the host until GPU work finishes, in the region (None: no API table)."""
    if not len(api) or "is_sync" not in api:
        return None
    return float(api["is_sync"].astype(bool).sum())


def _graph_launches(api: pd.DataFrame) -> float | None:
    """cudaGraphLaunch calls in the region (None: the recording has no CUDA API table)."""
    if not len(api) or "name" not in api:
        return None
    return float(api["name"].astype(str).isin(GRAPH_LAUNCH).sum())


def _pageable_bytes(timeline: pd.DataFrame) -> float:
    """Bytes copied from or to pageable host memory in the region."""
    if not len(timeline) or "bytes" not in timeline:
        return 0.0
    pageable = np.zeros(len(timeline), dtype=bool)
    for column in ("src_kind", "dst_kind"):
        if column in timeline:
            pageable |= (timeline[column].astype(str) == "pageable").to_numpy()
    sizes = pd.to_numeric(timeline["bytes"], errors="coerce").fillna(0.0).to_numpy("float64")
    return float(sizes[pageable].sum())


def _iteration_of(when: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The iteration each launch time falls in (-1: none), iterations sorted by start."""
    which = np.searchsorted(starts, when, side="right") - 1
    return np.where((which >= 0) & (when < ends[np.clip(which, 0, None)]), which, -1)


def _iteration_times(
    iterations: Sequence[Iteration], starts: np.ndarray, ends: np.ndarray, inside: pd.DataFrame
) -> tuple[float, ...]:
    """Each iteration's time: its host window, or, in a loop that runs ahead of the GPU, the
    time between the GPU finishing the work of the iteration before and of this one. Such a
    loop queues work faster than it runs: its host windows measure the launches, the gaps
    between GPU completions what the user waits for. One measure for the whole side (the GPU's
    where its iterations end more than GPU_BEHIND later in all), not the larger of the two per
    iteration, which would add the jitter of both."""
    hosts = np.array([float(i.wall_ns) for i in iterations])
    if not len(inside) or "end_ns" not in inside:
        return tuple(hosts)
    done = pd.to_numeric(inside["end_ns"], errors="coerce").to_numpy("float64")
    which = _iteration_of(launch_times(inside), starts, ends)
    valid = (which >= 0) & np.isfinite(done)
    finished = ends.astype("float64")  # an iteration with no GPU work ends with its window
    np.maximum.at(finished, which[valid], done[valid])
    finished = np.maximum.accumulate(finished)
    gpu = np.diff(finished, prepend=float(starts[0]))
    behind = gpu.sum() > GPU_BEHIND * hosts.sum()
    return tuple(float(t) for t in (gpu if behind else hosts))


def _from_profiled(
    label: str, sources: tuple[str, ...], session: Session, diagnosis: Diagnosis
) -> Side:
    k = session.kernels
    order = k.sort_values("id", kind="stable") if "id" in k else k
    names = order["name"].astype(str)
    launches = pd.DataFrame(
        {
            "name": names.to_numpy(),
            "grid": order["grid"].astype(str).to_numpy() if "grid" in order else "",
            "block": order["block"].astype(str).to_numpy() if "block" in order else "",
            "duration_ns": pd.to_numeric(
                order["duration_ns"] if "duration_ns" in order else pd.Series(0.0, order.index),
                errors="coerce",
            )
            .fillna(0.0)
            .to_numpy(),
        }
    )
    launches["function"] = launches["filter_name"] = [function_name(n) for n in launches["name"]]
    which = np.zeros(len(launches), dtype="int64")
    kernels, sequence = _kernels(launches, which, 1, diagnosis)
    total = float(launches["duration_ns"].sum())
    return Side(
        label, sources, diagnosis, Spread((total,)), "gpu-time", kernels, sequence,
        pd.DataFrame(), pd.DataFrame(), command=session.meta.command,
    )  # fmt: skip


def _empty_launches() -> pd.DataFrame:
    columns = ("name", "grid", "block", "duration_ns", "function", "filter_name")
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def _kernels(
    launches: pd.DataFrame, which: np.ndarray, n: int, diagnosis: Diagnosis
) -> tuple[tuple[KernelTimes, ...], tuple[int, ...]]:
    """Signatures with their time per iteration and place in the iteration, and one typical
    iteration's launches in order (as indices into the signatures)."""
    if not len(launches):
        return (), ()
    durations = pd.to_numeric(launches["duration_ns"], errors="coerce").fillna(0.0).to_numpy()
    counted = which >= 0
    frame = pd.DataFrame({"it": which})
    ordinal = frame.groupby("it").cumcount().to_numpy()
    size = frame.groupby("it")["it"].transform("size").to_numpy()
    place = np.where(size > 1, ordinal / np.maximum(size - 1, 1), 0.0)
    found = _diagnosed(diagnosis)
    owner = np.full(len(launches), -1, dtype="int64")
    out = []
    for index, s in enumerate(signatures(launches)):
        at = np.array(s.positions, dtype="int64")
        owner[at] = index
        use = at[counted[at]]
        samples = np.bincount(which[use], weights=durations[use], minlength=n)[:n]
        out.append(
            KernelTimes(
                index=index,
                name=s.name,
                grid=s.grid,
                block=s.block,
                variant=s.variant,
                launches=len(use),
                samples=tuple(float(x) for x in samples),
                position=float(np.median(place[use])) if len(use) else math.nan,
                role=role_of(s.name),
                diagnosis=_lookup(found, s),
            )
        )
    return tuple(out), _typical_iteration(which, owner, n)


def role_of(name: str) -> str | None:
    role = ROLES.get(parse_kernel_name(name).kind or "")
    if role is None and any(w in function_name(name).lower() for w in ATTENTION_WORDS):
        return "attention"
    return role


def _typical_iteration(which: np.ndarray, owner: np.ndarray, n: int) -> tuple[int, ...]:
    """The launches of the middle iteration (the region's first MAX_SEQUENCE where there are no
    iterations), as signature indices in launch order."""
    middle = n // 2 if n > 1 else 0
    picked = owner[(which == middle) & (owner >= 0)]
    return tuple(int(x) for x in picked[:MAX_SEQUENCE])


Key = tuple[str, str, str]


def _diagnosed(diagnosis: Diagnosis) -> dict[Key, KernelDiagnosis]:
    """The profiled signatures by their name as nsys and ncu both spell it (normalized()), grid
    and block; and by bare function name, grid and block where that names one signature only
    (template variants of one function share a grid: PyTorch's elementwise kernels)."""
    found: dict[Key, KernelDiagnosis] = {}
    by_function: dict[Key, set[int]] = {}
    for k in diagnosis.kernels:
        for name in (k.name, k.demangled):
            found.setdefault((normalized(name), k.grid, k.block), k)
            by_function.setdefault(("\x00" + function_name(name), k.grid, k.block), set()).add(k.id)
    ids = {k.id: k for k in diagnosis.kernels}
    for key, which in by_function.items():
        if len(which) == 1:
            found.setdefault(key, ids[next(iter(which))])
    return found


def _lookup(found: dict[Key, KernelDiagnosis], s: Signature) -> KernelDiagnosis | None:
    return found.get((normalized(s.name), s.grid, s.block)) or found.get(
        ("\x00" + (s.function or function_name(s.name)), s.grid, s.block)
    )
