"""A timeline's kernel launches grouped into signatures: what phase 2's plan chooses among, and
what profiled kernels are matched back to (model/matching.py).

A signature is a kernel name + grid + block, ranked by total GPU time. Launches of one signature
whose durations fall in separate groups (a GEMM kernel reused for several K) are kept apart as
duration groups, each planned on its own. Launches slowed by a communication kernel beside them
(`contended`: a data-parallel backward pass beside its all-reduce) did the same work and join
the nearest group their uncontended twins form. Pure: DataFrame in, frozen records out.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsdiag.model.names import function_name
from nsdiag.model.ranks import overlaps_communication
from nsdiag.model.signature import SignatureKey, signature_codes, signature_key
from nsdiag.model.text_codes import factorize_text

# Launches of one signature more than this far apart in duration did different work (cuBLAS and
# nvjet reuse a GEMM kernel and grid for different K): each group gets its own profiled launch.
VARIANT_RATIO = 1.5


@dataclass(frozen=True)
class Signature:
    """A kernel signature's launches in the analysed region (all launches where no region is
    marked: see `signatures`)."""

    name: str  # demangled
    function: str  # bare function name (ncu's `function` base, nsys's short name)
    grid: str
    block: str
    launches: int
    total_ns: float
    share: float  # of all kernel time in the region
    first: int  # index of its first launch in the region, in launch order
    filter_name: str = ""  # the name ncu's filter sees: mangled when known, else `function`
    variant: int = 0  # duration group within name + grid + block (0 = shortest launches)
    variants: int = 1
    median_ns: float = 0.0
    # every launch of it in the region, in launch order (any of them will do for ncu)
    positions: tuple[int, ...] = field(default=(), compare=False)

    @property
    def key(self) -> SignatureKey:
        """What profiled kernels are matched to it by (model/signature.py)."""
        return signature_key(self.name, self.grid, self.block)

    @property
    def shape(self) -> tuple[str, str, str]:
        """Its function (the nsys short name where there is one), grid and block: what a
        profiled kernel's `SignatureKey.shape` falls back to."""
        return self.function, self.grid, self.block


def kernel_launches(timeline: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows in launch order with `function` (nsys short name, else parsed),
    `filter_name` (the mangled name where every launch has one, else `function`) and
    `contended` (it ran beside a communication kernel: model/ranks.overlaps_communication; kept
    when the caller set it before leaving the communication kernels out) columns."""
    if "contended" not in timeline:
        timeline = timeline.assign(contended=overlaps_communication(timeline))
    # a new frame either way (the mask makes one), whose columns are set below
    k = timeline[timeline["kind"] == "kernel"] if "kind" in timeline else timeline.copy()
    for column in ("grid", "block"):
        k[column] = k[column].astype(str) if column in k else ""
    order = None
    if "api_start_ns" in k and (k["api_start_ns"].fillna(-1) >= 0).all():
        order = "api_start_ns"  # ncu counts launches in API order, not GPU start order
    elif "start_ns" in k:
        order = "start_ns"
    if order:
        k = k.sort_values(order, kind="stable")
    names = k["name"].astype(str)
    short = (
        k["short_name"].fillna("").astype(str)
        if "short_name" in k
        else pd.Series("", index=k.index)
    )
    # a timeline has 10^5 launches of 10^2 names: each name without a short one parsed once
    function = short.to_numpy(dtype=object).copy()
    unnamed = function == ""
    if unnamed.any():
        bare = names.to_numpy(dtype=object)[unnamed].tolist()
        parsed = {n: function_name(n) for n in set(bare)}
        function[unnamed] = [parsed[n] for n in bare]
    k["function"] = function
    k["filter_name"] = k["mangled_name"].astype(str) if name_base(k) == "mangled" else k["function"]
    k["duration_ns"] = pd.to_numeric(k["duration_ns"], errors="coerce").fillna(0.0)
    return k.reset_index(drop=True)


def name_base(launches: pd.DataFrame) -> str:
    """`mangled` when every launch has a mangled name (what kernel_launches filters by), else
    `function`."""
    mangled = (
        launches["mangled_name"].fillna("").astype(str) if "mangled_name" in launches else None
    )
    return (
        "mangled" if mangled is not None and len(launches) and (mangled != "").all() else "function"
    )


def duration_groups(
    durations: Sequence[float],
    ratio: float = VARIANT_RATIO,
    contended: Sequence[bool] | None = None,
) -> list[int]:
    """Each launch's group when launches of one name, grid and block did different amounts of
    work (a GEMM kernel reused for several K): sorted durations split where one is more than
    `ratio` times the one before. 0 is the shortest group. Contended launches (slowed by a
    communication kernel beside them) take no part in the split and join the group whose median
    is nearest on a log scale, when any launch ran uncontended."""
    slowed = list(contended) if contended is not None else [False] * len(durations)
    clean = [float(d) for d, c in zip(durations, slowed, strict=True) if not c]
    basis = clean or [float(d) for d in durations]
    order = sorted(set(basis))
    cuts = [b for a, b in itertools.pairwise(order) if a > 0 and b / a > ratio]
    labels = [sum(d >= c for c in cuts) for d in durations]
    if not clean or len(clean) == len(labels):
        return labels
    members: dict[int, list[float]] = {}
    for d, c, label in zip(durations, slowed, labels, strict=True):
        if not c:
            members.setdefault(label, []).append(float(d))
    medians = {g: statistics.median(v) for g, v in members.items()}
    return [
        min(medians, key=lambda g: abs(math.log(max(d, 1.0) / max(medians[g], 1.0))))
        if c
        else label
        for d, c, label in zip(durations, slowed, labels, strict=True)
    ]


def _duration_labels(durations: np.ndarray, contended: np.ndarray | None) -> np.ndarray:
    """`duration_groups` of one signature's launches, on arrays (a signature of thousands of
    launches, hundreds of signatures): the cuts between sorted distinct durations of the
    uncontended launches, each launch's group the number of cuts at or below it; a contended
    launch joins the one group where there is one (a DDP step overlaps most kernels with a
    collective), else `duration_groups` finds the nearest."""
    mixed = contended is not None and bool(contended.any()) and not bool(contended.all())
    if np.isnan(durations).any():
        return _duration_groups(durations, contended)
    order = np.unique(durations[~contended] if mixed and contended is not None else durations)
    low, high = order[:-1], order[1:]
    with np.errstate(all="ignore"):  # a ratio past float range is still a cut, as in Python
        cuts = high[(low > 0) & (high / np.where(low > 0, low, 1.0) > VARIANT_RATIO)]
    labels = np.searchsorted(cuts, durations, side="right")
    if not mixed or contended is None:
        return labels
    groups = np.unique(labels[~contended])
    if len(groups) > 1:
        return _duration_groups(durations, contended)
    labels[contended] = groups[0]
    return labels


def _duration_groups(durations: np.ndarray, contended: np.ndarray | None) -> np.ndarray:
    return np.asarray(
        duration_groups(
            durations.tolist(), contended=contended.tolist() if contended is not None else None
        )
    )


def _median(values: np.ndarray) -> float:
    """The median of the values that are there (as pandas' `median` skips NaN)."""
    present = values[~np.isnan(values)]
    return float(np.median(present)) if len(present) else float("nan")


# What `signatures` reads of kernel_launches' rows: a caller that filters 10^5 launches first
# filters these alone (the timeline's other twenty columns would be copied for nothing).
SIGNATURE_COLUMNS = (
    "name", "function", "grid", "block", "filter_name", "duration_ns", "contended", "in_region",
)  # fmt: skip


def signatures(launches: pd.DataFrame) -> list[Signature]:
    """The launches grouped into signatures, most time first. With an `in_region` column only
    the region's launches count (time, launches, duration groups, the first launch); signatures
    that ran only outside it are left out."""
    inside = launches["in_region"].astype(bool) if "in_region" in launches else None
    keyed = launches.assign(_pos=range(len(launches)))
    if inside is not None:
        keyed = keyed[inside.to_numpy()]
    total = float(keyed["duration_ns"].sum())
    if "filter_name" not in keyed:
        keyed["filter_name"] = keyed["function"]
    rows = []
    # A signature is what ncu tells apart: its filter name and shape. Demangled names group the
    # same way (one per mangled name), and with bare function names template variants stay apart.
    # The key's exact variant (model/signature.py): one timeline spells each name one way.
    # Launches missing a part of the key are left out (as a groupby on the parts leaves them).
    # Launches of one signature whose durations fall in separate groups are planned separately:
    # ncu reaches a later group's first launch with a higher launch count.
    parts = ["filter_name", "name", "grid", "block"]
    numbers, texts = signature_codes(keyed, exact=True, function="filter_name")
    one, _ = factorize_text(texts)  # two spellings with one key text are one signature
    complete = np.logical_and.reduce([keyed[c].notna().to_numpy() for c in parts])  # no frame
    codes = np.where(complete, one[numbers], -1) if len(numbers) else numbers
    # Column arrays indexed per group: a DataFrame groupby builds a frame per signature and per
    # duration group, which is most of the time on a step of thousands of launches.
    column = {c: keyed[c].to_numpy() for c in ("name", "function", "grid", "block", "filter_name")}
    durations = keyed["duration_ns"].to_numpy(dtype="float64")
    position = keyed["_pos"].to_numpy()
    contended = keyed["contended"].astype(bool).to_numpy() if "contended" in keyed else None
    order = np.argsort(codes, kind="stable")  # each group's launches stay in launch order
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    for members in np.split(order, bounds):
        if not len(members) or codes[members[0]] < 0:  # a part of the key missing
            continue
        first = members[0]
        labels = _duration_labels(
            durations[members], contended[members] if contended is not None else None
        )
        count = int(labels.max()) + 1
        for variant in np.unique(labels).tolist():
            part = members[labels == variant] if count > 1 else members
            ns = float(np.nansum(durations[part]))
            positions = tuple(position[part].tolist())
            rows.append(
                Signature(
                    str(column["name"][first]),
                    str(column["function"][part[0]]),
                    str(column["grid"][first]),
                    str(column["block"][first]),
                    len(part),
                    ns,
                    ns / total if total else 0.0,
                    positions[0],
                    str(column["filter_name"][part[0]]),
                    int(variant),
                    count,
                    _median(durations[part]),
                    positions,
                )
            )
    return sorted(rows, key=lambda s: (-s.total_ns, s.first))
