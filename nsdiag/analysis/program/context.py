"""What every program analysis reads, built once per diagnosis (engine.diagnose)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import pandas as pd

from nsdiag.analysis.program.code_sites import (
    FunctionRanges,
    activity_sites,
    function_ranges,
    gap_sites,
)
from nsdiag.analysis.program.launch_sequence import launches
from nsdiag.analysis.program.score_chains import attention_rows
from nsdiag.analysis.program.timeline.pinned import pinned_model
from nsdiag.analysis.program.timeline.view import TimelineView
from nsdiag.analysis.program.timeline.waits import WaitAccount, account
from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.analysis.records.kernel import MeasuredCeiling
from nsdiag.analysis.records.ranks import RankAnalysis
from nsdiag.analysis.records.region import Region
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.model.session import Session


@dataclass(frozen=True)
class ProgramContext:
    """One diagnosis's inputs to the program analyses, built once in engine.diagnose."""

    session: Session  # the analysed region's part of the session (scope.restrict)
    derived: pd.DataFrame  # one row per profiled launch in the region, with the derived metrics
    kernels: Sequence[KernelDiagnosis]  # per signature, longest first
    total_gpu_time_ns: float  # of the kernel signatures (ncu data), in the region
    timeline: TimelineView | None  # prepared once, when the session has a timeline
    measured_dram_ceiling: MeasuredCeiling | None
    region: Region | None = None  # the analysed region (None: no timeline)
    wall_ns: float = 0.0  # the currency's denominator: the region's wall time, else GPU time
    ranks: RankAnalysis | None = None  # per-rank breakdown (two ranks or more)
    rules: Sequence[RuleSpec] = ()  # the rules applied (empty: the shipped ones)

    @property
    def iterations(self) -> int:
        return len(self.region.iterations) if self.region is not None else 0

    @cached_property
    def launches(self) -> pd.DataFrame:
        """The region's launch sequence (analysis/program/launch_sequence.py), built once per
        diagnosis: fusion and layout both read it. Readers must not change it."""
        return launches(self.session, self.derived, self.kernels)

    @cached_property
    def _pinned_copies(self) -> dict[tuple[tuple[str, float], ...], pd.DataFrame]:
        return {}

    def pinned_copies(self, params: Mapping[str, float]) -> pd.DataFrame:
        """The region's host-device copies under the pinned-copy model with `params`
        (timeline/pinned.py), built once per set of params: pageable-memcpy reports from it and
        no-copy-compute-overlap reads it, with the same thresholds. Readers must not change it."""
        key = tuple(sorted(params.items()))
        if key not in self._pinned_copies:
            self._pinned_copies[key] = pinned_model(self.view, params)
        return self._pinned_copies[key]

    @cached_property
    def attention(self) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """Per launch of `launches`: inside an eager-attention score chain, and the chain's
        number (-1: none) (score_chains.py), built once: eager_attention reports the chains,
        fusion leaves their kernels alone."""
        return attention_rows(self.launches)

    @cached_property
    def waits(self) -> WaitAccount:
        """The region's idle GPU time by what the host did meanwhile (timeline/waits.py), built
        once per diagnosis: the four host-wait analyses report disjoint parts of it."""
        return account(self.view, self.session.api_calls, self.region)

    @cached_property
    def functions(self) -> FunctionRanges:
        """The region's PyTorch function ranges (code_sites.py; empty where not recorded)."""
        return function_ranges(self.session.nvtx_ranges)

    @cached_property
    def activity_sites(self) -> pd.DataFrame:
        """The region's kernels and copies with the functions that launched them."""
        return activity_sites(
            self.session.timeline, self.kernels, self.functions, launches=self.launches
        )

    @cached_property
    def gap_sites(self) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.object_]]:
        """Per idle gap of `waits`: the functions the host was in (outermost, innermost)."""
        return gap_sites(self.waits.gaps, self.functions)

    @property
    def view(self) -> TimelineView:
        """The prepared timeline; only analyses that need a timeline ask for it."""
        if self.timeline is None:
            raise ValueError("this session has no timeline")
        return self.timeline
