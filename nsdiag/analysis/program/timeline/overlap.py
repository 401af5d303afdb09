"""no-copy-compute-overlap: copies and kernels that run one after another where a pipeline
(chunked copies on other streams) would overlap them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.analyses import NO_COPY_COMPUTE_OVERLAP, PAGEABLE_MEMCPY
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.timeline.findings import (
    Draft,
    make_finding,
    peer_params,
    share,
    worth_reporting,
)
from nsdiag.analysis.program.timeline.nvtx import label
from nsdiag.analysis.program.timeline.pinned import pageable_saving, pinned_model, pinned_ratio
from nsdiag.analysis.program.timeline.view import TimelineView
from nsdiag.analysis.records.findings import Evidence, Finding
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model.intervals import union_ns_by_group

STAGES = ("h2d", "d2h", "kernel")  # the pipeline's stages


@dataclass(frozen=True)
class StageOverlap:
    """Busy time of each pipeline stage on one device and NVTX range, and how much of it
    overlapped. possible = sum(stages) - max(stage): what perfect overlap would hide;
    achieved = sum - union."""

    device: int
    range: str
    h2d_ns: float
    d2h_ns: float
    kernel_ns: float
    union_ns: float
    possible_ns: float
    achieved_ns: float
    overlap_fraction: float  # achieved / possible; NaN when nothing could overlap
    copy_streams: tuple[int, ...]
    kernel_streams: tuple[int, ...]
    pageable_saved_ns: float  # what NSD401's pinned-memory fix saves here
    # The union after the pageable fix, minus the slowest stage after that fix (an upper bound
    # reached with enough chunks).
    saved_ns: float

    @property
    def copy_ns(self) -> float:
        return self.h2d_ns + self.d2h_ns

    @property
    def has_both(self) -> bool:
        return self.kernel_ns > 0 and self.copy_ns > 0

    def details(self) -> dict[str, Any]:
        return {
            "h2d_ns": self.h2d_ns,
            "d2h_ns": self.d2h_ns,
            "kernel_ns": self.kernel_ns,
            "union_ns": self.union_ns,
            "possible_ns": self.possible_ns,
            "achieved_ns": self.achieved_ns,
            "overlap_fraction": self.overlap_fraction,
            "copy_streams": list(self.copy_streams),
            "kernel_streams": list(self.kernel_streams),
            "pageable_saved_ns": self.pageable_saved_ns,
        }


def overlap_summary(
    v: TimelineView,
    pinned_params: Mapping[str, float] | None = None,
    copies: pd.DataFrame | None = None,
) -> list[StageOverlap]:
    """One StageOverlap per device and NVTX range with GPU work; `pinned_params`: the
    pinned-copy model's (PAGEABLE_MEMCPY's, its defaults when None); `copies`: that model of
    `v` already built (ProgramContext.pinned_copies), else it is built here."""
    if pinned_params is None:
        pinned_params = PAGEABLE_MEMCPY.defaults
    staged = (v.acts["stage"] != "").to_numpy()
    columns = ["device", "range_code", "range", "stage", "start_ns", "end_ns", "stream"]
    # every activity has a stage (most timelines): read as it is, no copy
    acts = v.acts if staged.all() else v.acts.loc[staged, columns]
    if acts.empty:
        return []
    pair = (
        acts["device"].to_numpy() * (int(acts["range_code"].max()) + 1)
        + acts["range_code"].to_numpy()
    )
    group, _ = pd.factorize(pair)
    first = pd.Series(np.arange(len(acts))).groupby(group).first().to_numpy()
    groups = list(
        zip(acts["device"].to_numpy()[first], acts["range"].to_numpy()[first], strict=True)
    )
    stage_code = stage_numbers(acts["stage"].to_numpy())
    starts, ends = acts["start_ns"].to_numpy(), acts["end_ns"].to_numpy()
    n = len(groups)
    per_stage = union_ns_by_group(group * 3 + stage_code, starts, ends, n * 3).reshape(n, 3)
    total = union_ns_by_group(group, starts, ends, n)
    if copies is None:
        copies = pinned_model(v, pinned_params)
    streams = acts["stream"].groupby([group, acts["stage"].to_numpy() == "kernel"]).unique()
    return [
        _stage_overlap(
            int(device),
            name,
            per_stage[i],
            float(total[i]),
            copies[(copies["device"] == device) & (copies["range"] == name)],
            (streams.get((i, False), []), streams.get((i, True), [])),
        )
        for i, (device, name) in enumerate(groups)
    ]


def stage_numbers(stages: npt.NDArray[np.object_]) -> npt.NDArray[np.int64]:
    """Each activity's stage as its number in STAGES, -1 for none, as a Categorical of STAGES
    numbers them (which hashes 10^5 strings: three comparisons of them cost half)."""
    numbers = np.full(len(stages), -1, dtype="int64")
    for number, stage in enumerate(STAGES):
        numbers[stages == stage] = number
    return numbers


def _stage_overlap(
    device: int,
    name: str,
    per_stage: np.ndarray,
    union: float,
    copies: pd.DataFrame,
    streams: tuple[Any, Any],
) -> StageOverlap:
    h2d, d2h, kern = (float(x) for x in per_stage)
    pageable_saved = pageable_saving(copies)
    scaled = {
        d: per_stage[k] * pinned_ratio(copies[copies["direction"] == d])
        for k, d in enumerate(("h2d", "d2h"))
    }
    possible = h2d + d2h + kern - max(h2d, d2h, kern)
    achieved = max(h2d + d2h + kern - union, 0.0)
    return StageOverlap(
        device=device,
        range=name,
        h2d_ns=h2d,
        d2h_ns=d2h,
        kernel_ns=kern,
        union_ns=union,
        possible_ns=possible,
        achieved_ns=achieved,
        overlap_fraction=achieved / possible if possible > 0 else np.nan,
        copy_streams=tuple(sorted(map(int, streams[0]))),
        kernel_streams=tuple(sorted(map(int, streams[1]))),
        pageable_saved_ns=pageable_saved,
        saved_ns=max(union - pageable_saved - max(scaled["h2d"], scaled["d2h"], kern), 0.0),
    )


def no_copy_compute_overlap(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    pinned = peer_params(PAGEABLE_MEMCPY, ctx.rules)
    summary = overlap_summary(ctx.view, pinned, ctx.pinned_copies(pinned))
    measured = [s for s in summary if s.has_both]
    params = NO_COPY_COMPUTE_OVERLAP.params_of(rule)
    return [
        make_finding(NO_COPY_COMPUTE_OVERLAP, rule, ctx, _draft(params, ctx, s, measured))
        for s in measured
        if s.overlap_fraction < params["max_overlap_fraction"]
        and worth_reporting(ctx, s.saved_ns, params["min_impact"])
    ]


def _draft(
    params: Mapping[str, float], ctx: ProgramContext, s: StageOverlap, measured: list[StageOverlap]
) -> Draft:
    max_fraction = params["max_overlap_fraction"]
    others = [
        f"{label(m.range)} {m.overlap_fraction * 100:.0f}%"
        for m in measured
        if m.range != s.range and m.device == s.device and m.overlap_fraction >= max_fraction
    ]
    streams = sorted(set(s.copy_streams) | set(s.kernel_streams))
    where = (
        f"all on stream {streams[0]}"
        if len(streams) == 1
        else f"on streams {', '.join(map(str, streams))}"
    )
    values = {
        "copy_ms": s.copy_ns / 1e6,
        "h2d_ms": s.h2d_ns / 1e6,
        "d2h_ms": s.d2h_ns / 1e6,
        "kernel_ms": s.kernel_ns / 1e6,
        "possible_overlap_ms": s.possible_ns / 1e6,
        "overlap_pct": s.overlap_fraction * 100,
        "streams": where,
        "overlap_elsewhere": (
            f" Overlap measured elsewhere in this timeline: {', '.join(others)}." if others else ""
        ),
    }
    evidence = (
        Evidence("overlap_fraction", s.overlap_fraction, "<", max_fraction),
        Evidence("copy_time_ns", s.copy_ns),
        Evidence("kernel_time_ns", s.kernel_ns),
        Evidence("possible_overlap_ns", s.possible_ns),
        share(ctx, s.saved_ns, params["min_impact"]),
    )
    details = s.details()
    details["overlap_by_range"] = [
        {"range": m.range or None, "device": m.device, "overlap_fraction": m.overlap_fraction}
        for m in measured
    ]
    return Draft(s.device, s.range, s.saved_ns, values, evidence, details)
