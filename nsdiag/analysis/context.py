"""What every program analysis reads, built once per diagnosis (engine.diagnose)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from nsdiag.analysis.diagnosis import KernelDiagnosis
from nsdiag.analysis.roofline import MeasuredCeiling
from nsdiag.model.session import Session

if TYPE_CHECKING:  # the timeline analyses import this module
    from nsdiag.analysis.timeline.view import TimelineView


@dataclass(frozen=True)
class ProgramContext:
    """One diagnosis's inputs to the program analyses. What they will share next (the analysed
    region, detected iterations) becomes a field here, filled in engine.diagnose."""

    session: Session
    derived: pd.DataFrame  # one row per profiled launch, with the derived metrics
    kernels: Sequence[KernelDiagnosis]  # per signature, longest first
    total_gpu_time_ns: float  # of the kernel signatures (ncu data)
    timeline: TimelineView | None  # prepared once, when the session has a timeline
    measured_dram_ceiling: MeasuredCeiling | None

    @property
    def view(self) -> TimelineView:
        """The prepared timeline; only analyses that need a timeline ask for it."""
        if self.timeline is None:
            raise ValueError("this session has no timeline")
        return self.timeline
