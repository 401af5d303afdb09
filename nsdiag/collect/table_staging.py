"""The phase-1 timeline's tables written while ncu runs (issue 38).

A launch-heavy program's timeline is large (the GPT-2 decode loop: 170,000 launches, 374,000
API calls, 157,000 ranges), and writing it as gzipped CSV took 12 of the 14 s that `tables`
spent after phase 2 on the H200 (cProfile, tests/data/idioms/logs/hot_decode.txt). Phase 2 spends
that time waiting on ncu, so a thread writes the timeline's tables into a staging folder then;
the final save moves each file into place when the session's table is still that content and
writes it itself otherwise (model/store.py). The staging folder never outlives the run.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pandas as pd

from nsdiag.errors import NsdiagError
from nsdiag.model import store
from nsdiag.model.session import Session

# The tables phase 1 fills; below this many rows in all, writing them at the end is quicker than
# a thread (a second of work at most).
TIMELINE_TABLES = ("timeline", "api_calls", "nvtx_ranges")
MIN_ROWS = 50_000
STAGING = ".tables-staged"  # inside the session folder


class TableStager:
    """Writes the timeline's tables in a thread; `take()` waits for them."""

    def __init__(self, timeline: Session, session_root: Path) -> None:
        self.folder = session_root / STAGING
        self._frames = {name: getattr(timeline, name) for name in TIMELINE_TABLES}
        self._written: dict[str, tuple[pd.DataFrame, Path]] = {}
        self._thread = threading.Thread(target=self._write, name="nsdiag-tables", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for name, frame in self._frames.items():
                path = self.folder / f"{name}.csv.gz"
                store.write_table(frame, path)
                self._written[name] = (frame, path)
        except (NsdiagError, OSError, ValueError):
            return  # the final save writes whatever is not staged here

    def take(self) -> store.Staged:
        """The tables written so far, once the thread is done (the save writes the others)."""
        self._thread.join()
        return dict(self._written)

    def discard(self) -> None:
        """Remove the staging folder (after the save, or when the run ends without one)."""
        self._thread.join()
        shutil.rmtree(self.folder, ignore_errors=True)


def stage(timeline: Session | Path | None, session_root: Path) -> TableStager | None:
    """A stager for phase 1's timeline when it is large enough to be worth a thread."""
    if not isinstance(timeline, Session):
        return None
    rows = sum(len(getattr(timeline, name)) for name in TIMELINE_TABLES)
    return TableStager(timeline, session_root) if rows >= MIN_ROWS else None
