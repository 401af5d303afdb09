"""Timeline (Nsight Systems) program analyses: copies, overlap, syncs, idle gaps, launch overhead.

Each analysis reports per device and NVTX range, with the time a fix would save; how the time is
split between them so that impacts never double count is described in attribution.py.

- view.py: the timeline prepared once per diagnosis (activities, busy segments, idle gaps)
- attribution.py: which syncs drained the GPU, and which NVTX ranges the host was in
- waits.py: every idle nanosecond by what the host did meanwhile (launching, CPU work,
  allocating, waiting), and the syncs' share of it
- nvtx.py: the NVTX range open on a host thread at a given time
- pinned.py: how long each host-device copy would take from pinned memory
- findings.py: a timeline finding, its share of the device time and of its range's wall time
- pageable.py, overlap.py: one analysis each; host_wait.py: the four host-wait analyses
  (launch-bound, CPU-bound, sync-bound, what fits neither)

The package imports none of its modules: the program context imports waits.py through it, and
the analyses import the context.
"""
