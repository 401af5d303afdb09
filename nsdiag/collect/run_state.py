"""One `nsdiag profile` run: the state its steps share, and the command runner that records
every step in status.json as it ends (so an interrupted run still says what it holds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from nsdiag.analysis.region.windows import Region
from nsdiag.collect import runner, session_dir, tools
from nsdiag.collect.options import ProfileOptions, Progress
from nsdiag.collect.plan import Plan
from nsdiag.collect.program import child_env
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

    def run(self, name: str, argv: Sequence[str], progress: bool = False) -> runner.RunResult:
        """Run one step's command, logged as `name`, and record it in the status."""
        base = self.done

        def advance(n: int, label: str) -> None:
            self.done = base + n
            self.progress.advance(self.done, self.labels.get(label, label))

        result = runner.run(
            argv,
            self.sd.log(name),
            env=self.env,
            on_output=self.progress.output,
            on_progress=advance if progress else None,
            timeout_s=self.options.timeout_s,
        )
        self.timings[name] = result.wall_s
        if name.startswith("2-"):
            self.profiled += result.profiled
        self.status.step(
            name, result.ok, result.wall_s, result.log, argv=list(argv), profiled=result.profiled
        )
        self.status.save(self.sd)
        return result

    def run_export(self, name: str, argv: Sequence[str], target: Path) -> runner.RunResult:
        """One ncu export (a report page on standard output) into `target`, logged as `name`."""
        return runner.run(argv, self.sd.log(name), env=self.env, stdout_to=target, timeout_s=600)
