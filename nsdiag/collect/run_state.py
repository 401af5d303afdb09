"""One `nsdiag profile` run: the state its steps share, and the command runner that records
every step in status.json as it ends (so an interrupted run still says what it holds)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from nsdiag.analysis.records.region import Region
from nsdiag.collect import breakdown, runner, session_dir, tools
from nsdiag.collect.options import ProfileOptions, Progress
from nsdiag.collect.plan import Plan
from nsdiag.collect.program import child_env
from nsdiag.collect.standby import Standby
from nsdiag.collect.standby import start as start_held
from nsdiag.collect.table_staging import TableStager
from nsdiag.model.session import Session


@dataclass
class RunState:
    program: list[str]
    start: bool  # ncu profiles from the program's start (else from cudaProfilerStart)
    options: ProfileOptions
    progress: Progress
    sd: session_dir.SessionDir
    ncu: tools.Tool
    nsys: tools.Tool | None
    status: session_dir.Status = field(default_factory=session_dir.Status)
    env: dict[str, str] = field(default_factory=child_env)
    reports: list[Path] = field(default_factory=list)  # ncu reports to export
    exported: list[tuple[Path, Path | None]] = field(default_factory=list)  # (raw, details) CSVs
    phase1_timeline: Session | Path | None = None  # the SQLite export, or the Session read from it
    timings: dict[str, float] = field(default_factory=dict)
    plan: Plan | None = None
    launches: pd.DataFrame | None = None  # phase 1's kernel launches ncu counts, `in_region`
    region: Region | None = None  # the analysed region phase 1 found (phase 2 profiles in it)
    devices: tuple[int, ...] = ()  # a distributed run: the chosen rank's GPU (ncu --devices)
    done: int = 0  # launches profiled so far (the progress bar)
    profiled: int = 0  # launches profiled in phase 2
    labels: dict[str, str] = field(default_factory=dict)  # ncu's (mangled) names -> short names
    phase: str = "start"  # the phase running now (status.json's `interrupted` names it)
    step: str | None = None  # the command running now
    step_started: float = 0.0  # time.monotonic() when it started
    standby: Standby | None = None  # the next targeted run's program, started ahead (standby.py)
    standbys: list[Standby] = field(default_factory=list)  # every one started: all are ended
    first_cuda_s: float = 0.0  # phase 1: the program's start-up before its first CUDA call
    timeline_step: str = "1-timeline"  # phase 1's nsys run that recorded the timeline
    metric_listing: Future[str | None] | None = None  # `ncu --query-metrics`, run beside phase 1
    stager: TableStager | None = None  # phase 1's tables, written while ncu runs

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Run a phase (phase1, plan, phase2, export, tables): named while it runs, its wall
        seconds in the breakdown even when it fails or is interrupted."""
        outer, self.phase, start = self.phase, phase, time.monotonic()
        try:
            yield
        finally:
            self.status.phases[phase] = self.status.phases.get(phase, 0.0) + (
                time.monotonic() - start
            )
        self.phase = outer  # only when it ended normally: an interrupt names the innermost

    def run(
        self,
        name: str,
        argv: Sequence[str],
        progress: bool = False,
        collection: str | None = None,
        intercepted: int | None = None,
        watch: runner.Watch | None = None,
        ahead_s: float | None = None,
    ) -> runner.RunResult:
        """Run one step's command, logged as `name`, and record it in the status; an ncu run
        also records what it collected and how many launches it saw (the breakdown), one that
        attached to the waiting program how long that had run (`ahead_s`), and one its `watch`
        ended why (watch.py)."""
        base = self.done
        self.step, self.step_started = name, time.monotonic()

        def advance(n: int, label: str) -> None:
            self.done = base + n
            self.progress.advance(self.done, self.labels.get(label, label))

        def waiting(text: str) -> None:
            self.progress.advance(self.done, text)

        result = runner.run(
            argv,
            self.sd.log(name),
            env=self.env,
            on_output=self.progress.output,
            on_progress=advance if progress else None,
            timeout_s=self.options.timeout_s,
            watch=watch,
            on_wait=waiting if progress else None,
        )
        self.timings[name] = result.wall_s
        if name.startswith("2-"):
            self.profiled += result.profiled
        self.step = None
        self.status.step(
            name,
            result.ok,
            result.wall_s,
            result.log,
            argv=list(argv),
            profiled=result.profiled,
            **({"collection": collection} if collection else {}),
            **({"intercepted": intercepted} if intercepted is not None else {}),
            **(
                {"ended_early": True, "ended_by": e.kind, "ended_why": e.detail}
                if (e := result.ending) is not None
                else {}
            ),
            **({"attached_after_s": round(ahead_s, 2)} if ahead_s is not None else {}),
            **({"passes": p} if (p := breakdown.passes_summary(result.passes)) else {}),
        )
        self.status.save(self.sd)
        return result

    def start_standby(self, name: str) -> Standby | None:
        """A targeted run's program, started now and held by ncu (standby.py), logged as `name`;
        ended with the run whatever happens (profile.py)."""
        started = start_held(self.ncu.path, self.program, self.sd.log(name), self.env)
        if started is not None:
            self.standbys.append(started)
        return started

    def run_export(self, name: str, argv: Sequence[str], target: Path) -> runner.RunResult:
        """One ncu export (a report page on standard output) into `target`, logged as `name`."""
        return runner.run(argv, self.sd.log(name), env=self.env, stdout_to=target, timeout_s=600)
