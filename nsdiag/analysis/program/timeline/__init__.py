"""Timeline (Nsight Systems) program analyses: copies, overlap, syncs, idle gaps, launch overhead.

Each analysis reports per device and NVTX range, with the time a fix would save; how the time is
split between them so that impacts never double count is described in attribution.py.

- view.py: the timeline prepared once per diagnosis (activities, busy segments, idle gaps)
- attribution.py: which syncs and which NVTX ranges claim idle time
- nvtx.py: the NVTX range open on a host thread at a given time
- pinned.py: how long each host-device copy would take from pinned memory
- findings.py: a timeline finding, its share of the device time and of its range's wall time
- pageable.py, overlap.py, syncs.py, idle.py, launches.py: one analysis each
"""

from nsdiag.analysis.program.timeline.idle import gpu_idle_gaps
from nsdiag.analysis.program.timeline.launches import launch_overhead, launch_runs
from nsdiag.analysis.program.timeline.overlap import (
    StageOverlap,
    no_copy_compute_overlap,
    overlap_summary,
)
from nsdiag.analysis.program.timeline.pageable import pageable_memcpy
from nsdiag.analysis.program.timeline.syncs import sync_heavy
from nsdiag.analysis.program.timeline.view import TimelineView, prepare

__all__ = [
    "StageOverlap",
    "TimelineView",
    "gpu_idle_gaps",
    "launch_overhead",
    "launch_runs",
    "no_copy_compute_overlap",
    "overlap_summary",
    "pageable_memcpy",
    "prepare",
    "sync_heavy",
]
