"""What `nsdiag profile` is asked to do, how it reports progress, and what it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nsdiag.collect.plan import Plan
from nsdiag.collect.watch import DEFAULT_WATCH, WatchSettings
from nsdiag.model.session import Session


@dataclass(frozen=True)
class ProfileOptions:
    output: Path | None = None
    ncu: str | None = None
    nsys: str | None = None
    full: bool = False
    coverage: float = 0.9
    max_kernels: int = 100
    kernel: str | None = None
    nvtx: str | None = None
    # None (auto): phase 1 records the whole run, and phase 2 starts at cudaProfilerStart when
    # the program calls it; True: both from the start; False: both from cudaProfilerStart
    profile_from_start: bool | None = None
    region: str = "auto"  # the analysed region (analysis/region/): where phase 2 picks launches
    timeout_s: float | None = None  # per command
    sections: str = "rules"  # phase 2: "rules" (their metrics by name), "sections" or "full"
    rank: int = 0  # a distributed run: the rank whose kernels phase 2 profiles
    # phase 2's estimate at most this (least GPU time left out), and its wall-clock limit
    budget_s: float | None = None
    run_to_end: bool = False  # ncu runs go on past their last planned launch (watch.py)
    sequential: bool = False  # phase 2's program starts after phase 1, not beside it (standby.py)
    watch: WatchSettings = DEFAULT_WATCH  # when a run or phase 2 is ended (watch.py)


class Progress(Protocol):
    """What a run tells its user as it goes (the CLI draws it; library code never prints)."""

    def phase(self, title: str, total: int | None) -> None: ...
    def advance(self, done: int, label: str) -> None: ...
    def output(self, line: str) -> None: ...
    def note(self, text: str) -> None: ...


class NullProgress:
    def phase(self, title: str, total: int | None) -> None:
        pass

    def advance(self, done: int, label: str) -> None:
        pass

    def output(self, line: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass(frozen=True)
class ProfileResult:
    session_dir: Path
    missing: tuple[str, ...]
    plan: Plan | None
    session: Session | None
    timings: dict[str, float] = field(default_factory=dict)
    profiled: int = 0  # launches ncu profiled in phase 2

    @property
    def complete(self) -> bool:
        return not self.missing
