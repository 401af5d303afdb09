"""Watching a targeted ncu run, so that it ends as soon as its plan is met and never runs on
with nothing left to come (issue 38).

A run is ended (runner.end_early: SIGTERM, and ncu writes its report with every launch profiled
so far) when
  (a) it has profiled as many launches as the round planned and every signature it wants has
      been among them (early_stop.printed_as);
  (b) the plan's launches stopped coming: from phase 1's start time and position of each
      planned launch, the k-th profiled one is due under ncu at
          its phase-1 time - what the program ran ahead (standby.py)
          + the launches before it x SECONDS_PER_INTERCEPTED + k x the collection's replay
      and the next one is overdue by a generous margin (`factor` x its predicted gap after the
      one before + `slack_s`; the first, `factor` x its due time + `first_slack_s`). A program
      whose launches under ncu differ from phase 1's never meets (a): cudnn.benchmark picking
      other convolutions under ncu, say, or SDPA another attention kernel; before, such a run
      went on to the program's end (the GPT-2 decode loop: killed at 163 s);
  (c) phase 2's wall-clock limit is spent: `--budget SECONDS`, else `default_limit_runs` x
      phase 1's program run (at least `min_limit_s`); phase2.py then skips the later rounds and
      the session says what they would have profiled.
--run-to-end keeps only (c), and that only for an explicit --budget. The watch is polled from
the runner's own thread (runner.run), as well as told of each profiled launch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsdiag.collect.cost import SECONDS_PER_INTERCEPTED
from nsdiag.collect.early_stop import printed_as
from nsdiag.collect.runner import Ending
from nsdiag.model.launches import Signature


@dataclass(frozen=True)
class WatchSettings:
    """The margins of (b) and the default limit of (c); tests make them tiny."""

    factor: float = 2.0  # a planned launch may take this many times its predicted gap ...
    slack_s: float = 10.0  # ... plus this, after the one before
    first_slack_s: float = 30.0  # the first: `factor` x its due time plus this
    default_limit_runs: float = 5.0  # without --budget: phase 2 stops after phase 1's run x this
    min_limit_s: float = 30.0  # ... but never before this (a short script's profile is worth it)
    poll_s: float = 0.5  # how often the runner asks


DEFAULT_WATCH = WatchSettings()


@dataclass(frozen=True)
class Due:
    """One planned launch as the watch expects it: its kernel's short name and when, in seconds
    from the run's start, its progress line should come (None: phase 1 has no times)."""

    label: str
    due_s: float | None


def schedule(
    launches: pd.DataFrame,
    positions: Sequence[int],
    seconds_per_launch: float,
    ahead_s: float = 0.0,
    seconds_per_intercepted: float = SECONDS_PER_INTERCEPTED,
) -> list[Due]:
    """When each of a round's planned launches (positions in launch order, ascending) should be
    profiled under ncu: its phase-1 start less what the program ran ahead, plus ncu's
    interception of every launch up to it and the replay of it and those profiled before it."""
    if not len(positions):
        return []
    at = np.asarray(positions, dtype=np.int64)
    labels = launches["function"].astype(str).to_numpy()[at]
    if "start_ns" not in launches:
        return [Due(str(label), None) for label in labels]
    start = pd.to_numeric(launches["start_ns"], errors="coerce").to_numpy(dtype=float)[at] / 1e9
    out = []
    for k, (label, began, position) in enumerate(zip(labels, start, at, strict=True), start=1):
        if began != began:  # NaN: unknown
            out.append(Due(str(label), None))
            continue
        due = (
            max(float(began) - ahead_s, 0.0)
            + (int(position) + 1) * seconds_per_intercepted
            + k * seconds_per_launch
        )
        out.append(Due(str(label), due))
    return out


@dataclass(frozen=True)
class Limit:
    """Phase 2's wall-clock limit: when its ncu runs must end (a `clock` time), in seconds from
    phase 2's start, and where the seconds came from."""

    deadline: float
    seconds: float
    source: str

    def describe(self) -> str:
        return f"{self.seconds:.0f} s ({self.source})"


class Watch:
    """One run's watch: `seen` after each progress line (launches profiled so far, the name ncu
    printed), `overdue` and `waiting` whenever the runner polls. Thread-safe: both threads call
    it."""

    def __init__(
        self,
        expected: int,
        wanted: Sequence[Signature],
        due: Sequence[Due],
        seconds_per_launch: float,
        *,
        limit: Limit | None = None,
        settings: WatchSettings = DEFAULT_WATCH,
        planned_stop: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.expected = max(expected, 1)
        self.pending = list(dict.fromkeys(wanted))
        self.due = list(due)
        self.seconds_per_launch = seconds_per_launch  # ncu's replay of one profiled launch
        self.limit = limit
        self.settings = settings
        self.planned_stop = planned_stop  # (a) and (b); off with --run-to-end
        self.poll_s = settings.poll_s
        self.clock = clock
        self.started = clock()
        self.profiled = 0
        self.last_at = self.started  # when the last progress line came
        self._lock = threading.Lock()

    def seen(self, profiled: int, printed: str) -> Ending | None:
        """(a): everything the round planned is profiled."""
        with self._lock:
            self.profiled, self.last_at = profiled, self.clock()
            self.pending = [s for s in self.pending if not printed_as(s, printed)]
            if self.planned_stop and profiled >= self.expected and not self.pending:
                return Ending("planned", f"{profiled} launches profiled: everything planned")
        return None

    def overdue(self) -> Ending | None:
        """(c) the limit is spent, or (b) the next planned launch is overdue."""
        with self._lock:
            now = self.clock()
            if self.limit is not None and now >= self.limit.deadline:
                return Ending(
                    "limit",
                    f"phase 2's limit of {self.limit.describe()} was reached with "
                    f"{self.profiled} of {self.expected} planned launches profiled",
                )
            if not self.planned_stop:
                return None
            wait = self._allowed_s()
            if wait is None or now - self.last_at < wait:
                return None
            return Ending("stalled", self._stalled(now - self.last_at))

    def waiting(self) -> str | None:
        """What the run waits for, for the progress line."""
        with self._lock:
            now = self.clock()
            k = self.profiled + 1
            if k > self.expected and not self.pending:
                return None
            what = self._next_label()
            head = (
                f"waiting for launch {k} of {self.expected} ({what})"
                if k <= self.expected
                else f"waiting for {what} (planned, not profiled yet)"
            )
            gap = self._gap_s()
            allowed = self._allowed_s() if self.planned_stop else None
            if gap is not None and now - self.last_at <= gap:
                return f"{head}, due in ~{gap - (now - self.last_at):.0f} s"
            if allowed is not None:
                left = max(allowed - (now - self.last_at), 0.0)
                return f"{head}, late: ending the run in ~{left:.0f} s"
            if self.limit is not None:
                return f"{head}; phase 2's limit in ~{max(self.limit.deadline - now, 0):.0f} s"
            return head

    def _next_label(self) -> str:
        k = self.profiled + 1
        if k <= min(self.expected, len(self.due)):
            return self.due[k - 1].label
        names = [s.function for s in self.pending]
        return ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")

    def _gap_s(self) -> float | None:
        """The predicted seconds between the last progress line and the next one."""
        k = self.profiled + 1
        if k > len(self.due):  # beyond the plan (other shapes of its names): one more replay
            return self.seconds_per_launch if self.due else None
        due = self.due[k - 1].due_s
        if due is None:
            return None
        if k == 1:
            return due
        before = self.due[k - 2].due_s
        return due - before if before is not None else None

    def _allowed_s(self) -> float | None:
        """How long after the last progress line the next may come before the run is ended."""
        gap = self._gap_s()
        if gap is None:
            return None
        slack = self.settings.first_slack_s if self.profiled == 0 else self.settings.slack_s
        return self.settings.factor * gap + slack

    def _stalled(self, waited_s: float) -> str:
        k = self.profiled + 1
        what = self._next_label()
        if k <= self.expected:
            return (
                f"launch {k} of {self.expected} ({what}) had not come {waited_s:.0f} s after "
                f"{'the run started' if k == 1 else 'the one before'} (about "
                f"{self._gap_s() or 0:.0f} s expected): ended with {self.profiled} profiled"
            )
        return (
            f"{what} had not come {waited_s:.0f} s after the last profiled launch: ended with "
            f"{self.profiled} profiled"
        )
