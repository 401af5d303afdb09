"""Ending a targeted ncu run once it has profiled what its round planned (issue 26): which
printed name is which signature, and how far into the program a run's last planned launch is.

ncu profiles the launches a round asks for as the program reaches them and then keeps
intercepting every launch to the program's end. On BERT served at batch 1 that tail was most
of the run: 7 launches profiled, 36,521 intercepted, 42.9 s under ncu against a 21.2 s
timeline run. So once ncu has printed as many profiled launches as the round expects and every
signature it wants has been among them, the run is ended (watch.py, which also ends runs whose
planned launches stop coming, and phase 2 at its time limit); what phase 1 recorded of the
program's later launches is not affected. `--run-to-end` turns this off, for programs that must
not be stopped half-way (they write files, say, that a stop would leave half-written).

How long a run takes to reach its last planned launch is read from phase 1's timeline (`reach`:
the share of the run's time before it), so the planner prices early-ended runs as they will
run. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from nsdiag.model.launches import Signature

# ncu prints a kernel's name in the chosen name base (mangled names in full, function names cut
# to about 30 characters and "..."), so a printed name is matched to any of a signature's names.
_CUT = "..."
MIN_REACH = 0.05  # the program's start-up always runs, whatever the timeline's origin


def printed_as(signature: Signature, printed: str) -> bool:
    """Whether ncu's progress line name `printed` can be this signature's kernel."""
    names = {signature.filter_name, signature.function, signature.name} - {""}
    if printed in names:
        return True
    if printed.endswith(_CUT) and len(printed) > len(_CUT):
        head = printed[: -len(_CUT)]
        return any(n.startswith(head) for n in names)
    return False


def reach(launches: pd.DataFrame, positions: Sequence[int]) -> float:
    """The share of phase 1's run that passes before the last of these launches (positions in
    launch order) ends: 1 when unknown. Timeline times count from the start of the recording,
    so the program's start-up is inside the share."""
    if "start_ns" not in launches:
        return 1.0
    start = pd.to_numeric(launches["start_ns"], errors="coerce")
    ends = start + pd.to_numeric(launches["duration_ns"], errors="coerce").fillna(0.0)
    array = ends.to_numpy(dtype=float)
    finite = array[np.isfinite(array)]
    return reach_of(array, positions, float(finite.max()) if len(finite) else float("nan"))


def reach_of(ends: np.ndarray, positions: Sequence[int] | np.ndarray, end: float) -> float:
    """`reach` on the launches' end times (ns, NaN unknown) and the latest of them, as the
    planner keeps them (launch_codes.Codes)."""
    if not len(positions) or not len(ends):
        return 1.0
    chosen = ends[np.asarray(positions)]
    if np.isnan(chosen).all():
        return 1.0
    last = float(np.nanmax(chosen))
    if not end > 0 or last != last:  # NaN: times unknown
        return 1.0
    return min(max(last / end, MIN_REACH), 1.0)
