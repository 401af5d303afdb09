"""`nsdiag profile`: phase 1 (timeline), plan, phase 2 (targeted ncu), exports, tables.

Every step records itself in status.json as it ends, so a run that fails or is interrupted
half-way still leaves a session saying what it holds and what is missing.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

import pandas as pd

from nsdiag.collect import argv as cmd
from nsdiag.collect import metric_set, runner, session_dir, tools
from nsdiag.collect.doctor import gpu_info
from nsdiag.collect.nvtx_filter import in_nvtx_range
from nsdiag.collect.plan import Plan, plan_launches
from nsdiag.collect.plan import describe as describe_plan
from nsdiag.collect.rounds import SECONDS_PER_LAUNCH, PlanSettings, Round
from nsdiag.collect.signatures import Signature, kernel_launches, signatures
from nsdiag.errors import InputError, NsdiagError, ProfilerError
from nsdiag.model.names import function_name, normalized
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
    profile_from_start: bool | None = None  # None: on, off for the bundled reference kernels
    timeout_s: float | None = None  # per command
    sections: str = "rules"  # phase 2: "rules" (their metrics by name), "sections" or "full"


class Progress(Protocol):
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


def resolve_program(args: Sequence[str]) -> tuple[list[str], bool]:
    """The command to profile, and whether it is the bundled reference kernels."""
    if not args:
        from nsdiag.resources import reference_kernels_dir

        return [
            sys.executable,
            str(reference_kernels_dir() / "run_all.py"),
            "--profile-region",
        ], True
    if args[0].endswith(".py"):
        if not Path(args[0]).is_file():
            raise InputError(f"{args[0]} does not exist", "check the script path")
        return [sys.executable, *args], False
    return list(args), False


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault(
        "PYTHONUNBUFFERED", "1"
    )  # the program's prints reach the terminal as they happen
    return env


def dry_run(
    args: Sequence[str], options: ProfileOptions
) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The commands a run would start (phase 2 as a template: it depends on phase 1), and notes."""
    program, reference = resolve_program(args)
    start = options.profile_from_start if options.profile_from_start is not None else not reference
    ncu = tools.find_optional("ncu", options.ncu)
    nsys = tools.find_optional("nsys", options.nsys)
    notes = [
        f"{n} not found here: shown as '{n}'"
        for n, t in (("ncu", ncu), ("nsys", nsys))
        if t is None
    ]
    ncu_path, nsys_path = (ncu.path if ncu else "ncu"), (nsys.path if nsys else "nsys")
    sd = session_dir.SessionDir(options.output or session_dir.default_path(program))
    steps = [
        (
            "phase 1: timeline (nsys)",
            cmd.nsys_profile(nsys_path, sd.report("timeline"), program, profile_from_start=start),
        ),
        (
            "phase 1: export",
            cmd.nsys_export_sqlite(
                nsys_path, sd.report("timeline.nsys-rep"), sd.report("timeline.sqlite")
            ),
        ),
        (
            "phase 1 without a working nsys: durations (ncu)",
            cmd.ncu_durations(
                ncu_path,
                sd.report("durations"),
                program,
                profile_from_start=start,
                nvtx=options.nvtx,
            ),
        ),
    ]
    if options.full:
        steps.append(
            (
                "phase 2: every launch, full set (ncu)",
                cmd.ncu_full(
                    ncu_path,
                    sd.report("full"),
                    program,
                    kernel_regex=options.kernel,
                    profile_from_start=start,
                    nvtx=options.nvtx,
                ),
            )
        )
        report = sd.report("full.ncu-rep")
    else:
        steps.append(
            (
                "phase 2: targeted, one run per plan round (ncu)",
                cmd.template_targeted(
                    ncu_path,
                    sd.report("targeted-1"),
                    program,
                    sections=options.sections,
                    profile_from_start=start,
                    nvtx=options.nvtx,
                ),
            )
        )
        report = sd.report("targeted-1.ncu-rep")
        notes.append(
            f"phase 2 profiles the kernel signatures covering {options.coverage:.0%} of GPU time "
            f"(at most {options.max_kernels}), chosen from phase 1"
        )
    steps += [
        ("export: raw page", cmd.ncu_export_raw(ncu_path, report)),
        ("export: details page", cmd.ncu_export_details(ncu_path, report)),
    ]
    notes.append(f"session folder: {sd.root}")
    return steps, notes


class _Run:
    """One profile run: the state the steps share."""

    def __init__(
        self,
        program: list[str],
        start: bool,
        options: ProfileOptions,
        progress: Progress,
        sd: session_dir.SessionDir,
        ncu: tools.Tool,
        nsys: tools.Tool | None,
    ) -> None:
        self.program, self.start, self.options, self.progress = program, start, options, progress
        self.sd, self.ncu, self.nsys = sd, ncu, nsys
        self.status = session_dir.Status()
        self.env = child_env()
        self.reports: list[Path] = []  # ncu reports to export
        self.exported: list[tuple[Path, Path | None]] = []
        self.phase1_timeline: Session | Path | None = (
            None  # the SQLite export, or the Session read from it
        )
        self.timings: dict[str, float] = {}
        self.plan: Plan | None = None
        self.launches: pd.DataFrame | None = None  # phase 1's kernel launches
        self.done = 0
        self.profiled = 0
        self.labels: dict[
            str, str
        ] = {}  # ncu's (mangled) kernel names -> short names, for progress

    # -- running commands ---------------------------------------------------------------------
    def run(self, name: str, argv: Sequence[str], progress: bool = False) -> runner.RunResult:
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

    def export(self, reports: Sequence[Path]) -> None:
        """The raw and details pages of every report as CSV. The exports run side by side: each is
        an ncu process reading one report on the CPU, a few seconds each, independent of the others."""
        jobs = [
            (report, page, argv, _csv_for(report, page))
            for report in reports
            for page, argv in (
                ("raw", cmd.ncu_export_raw(self.ncu.path, report)),
                ("details", cmd.ncu_export_details(self.ncu.path, report)),
            )
        ]
        if not jobs:
            return

        def step(out: Path) -> str:
            return f"export-{out.stem.replace('.', '-')}"

        with ThreadPoolExecutor(max_workers=min(len(jobs), 4)) as pool:
            results = list(pool.map(lambda job: self._export(step(job[3]), job[2], job[3]), jobs))
        written: dict[Path, dict[str, Path | None]] = {}
        for (report, page, _, out), result in zip(jobs, results):  # steps recorded in job order
            self.status.step(step(out), result.ok, result.wall_s, result.log)
            written.setdefault(report, {})[page] = (
                out if result.ok and out.is_file() and out.stat().st_size else None
            )
        for report, pages in written.items():
            if pages["raw"] is None:
                self.status.lacks(f"the CSV export of {report.name}")
            else:
                self.exported.append((pages["raw"], pages["details"]))

    def _export(self, name: str, argv: Sequence[str], target: Path) -> runner.RunResult:
        """One ncu export (a report page on standard output) into `target`, logged as `name`."""
        return runner.run(argv, self.sd.log(name), env=self.env, stdout_to=target, timeout_s=600)

    # -- phase 1 ------------------------------------------------------------------------------
    def timeline(self, fallback: bool = True) -> tuple[pd.DataFrame | None, float]:
        """Kernel launches of the profiled region (launch order) and the program's run time;
        without a working nsys, a duration-only ncu pass (or nothing, when `fallback` is off)."""
        self.progress.phase("phase 1: timeline", None)
        if self.nsys is not None:
            frame = self._nsys_timeline()
            if frame is not None:
                return frame, self.timings["1-timeline"]
        self.status.lacks("timeline (no working nsys: program-level findings are not available)")
        return self._ncu_durations() if fallback else (None, 0.0)

    def _nsys_timeline(self) -> pd.DataFrame | None:
        assert self.nsys is not None
        result = self.run(
            "1-timeline",
            cmd.nsys_profile(
                self.nsys.path,
                self.sd.report("timeline"),
                self.program,
                profile_from_start=self.start,
            ),
        )
        report = self.sd.report("timeline.nsys-rep")
        error = runner.failure(result, "the timeline run (nsys)", self.sd.root)
        if result.has("no-gpu"):
            raise error or ProfilerError("the timeline run failed", f"see {result.log}")
        # nsys exits with the program's code and says nothing more: a report written means nsys
        # worked and the program failed, so keep its timeline and stop (ncu would fail the same way).
        program_failed = result.returncode != 0 and not result.timed_out and report.is_file()
        if not program_failed and (not result.ok or not report.is_file()):
            self.progress.note(
                f"nsys did not produce a report ({error or 'no .nsys-rep written'}); "
                "timing kernels with ncu instead"
            )
            return None
        db = self.sd.report("timeline.sqlite")
        exported = self.run("1-timeline-export", cmd.nsys_export_sqlite(self.nsys.path, report, db))
        if program_failed:
            if exported.ok and db.is_file():
                self.phase1_timeline = db
            self.status.lacks("kernel metrics (the program failed in phase 1, so ncu did not run)")
            raise ProfilerError(
                f"the program exited with code {result.returncode} during the timeline run (nsys)",
                f"run it without nsdiag to see why; see {result.log}; "
                f"the partial session is kept in {self.sd.root}",
            )
        if not exported.ok or not db.is_file():
            self.progress.note(
                "nsys could not export the report to SQLite; timing kernels with ncu instead"
            )
            return None
        from nsdiag import load

        session = load(db)
        self.phase1_timeline = session
        timeline = session.timeline
        if self.options.nvtx:
            timeline = in_nvtx_range(timeline, session.nvtx_ranges, self.options.nvtx)
        return kernel_launches(timeline)

    def _ncu_durations(self) -> tuple[pd.DataFrame, float]:
        self.progress.phase("phase 1: kernel durations (ncu)", None)
        out = self.sd.report("durations")
        result = self.run(
            "1-durations",
            cmd.ncu_durations(
                self.ncu.path,
                out,
                self.program,
                profile_from_start=self.start,
                nvtx=self.options.nvtx,
            ),
            progress=True,
        )
        error = runner.failure(result, "the duration pass (ncu)", self.sd.root)
        if error:
            raise error
        report = out.with_name(out.name + ".ncu-rep")
        target = _csv_for(report, "raw")
        exported = self._export(
            "1-durations-export", cmd.ncu_export_raw(self.ncu.path, report), target
        )
        self.status.step("1-durations-export", exported.ok, exported.wall_s, exported.log)
        if not exported.ok:
            raise ProfilerError(f"could not export {report}", f"see {exported.log}")
        from nsdiag import load

        kernels = load(target).kernels
        frame = pd.DataFrame(
            {
                "kind": "kernel",
                "name": kernels["name"].astype(str),
                "short_name": kernels["name"].astype(str).map(function_name),
                "grid": kernels["grid"],
                "block": kernels["block"],
                "duration_ns": kernels["duration_ns"],
            }
        )
        mangled = self._mangled_names(report, len(frame))
        if mangled is not None:
            frame["mangled_name"] = mangled
        program_s = max(result.wall_s - result.profiled * SECONDS_PER_LAUNCH["duration"], 1.0)
        return kernel_launches(frame), program_s

    def _mangled_names(self, report: Path, launches: int) -> list[str] | None:
        """The duration pass's kernel names as mangled (the same launches, in the same order), so
        phase 2 can filter on them as it does with nsys's; None if the export does not give them."""
        target = report.with_name("durations.mangled.raw.csv")
        exported = runner.run(
            cmd.ncu_export_raw(self.ncu.path, report, kernel_base="mangled"),
            self.sd.log("1-durations-export-mangled"),
            env=self.env,
            stdout_to=target,
            timeout_s=600,
        )
        self.status.step("1-durations-export-mangled", exported.ok, exported.wall_s, exported.log)
        if not exported.ok:
            return None
        from nsdiag import load

        try:
            names = load(target).kernels["name"].astype(str).tolist()
        except NsdiagError:
            return None
        return names if len(names) == launches and all(names) else None

    # -- phase 2 ------------------------------------------------------------------------------
    def collection(self) -> tuple[str, list[str]]:
        """The section set phase 2 uses and, for "rules", the metric names this GPU offers."""
        sections = self.options.sections
        if sections != "rules":
            return sections, []
        listing = tools.query_metrics(self.ncu.path)
        metrics = metric_set.rule_metrics(metric_set.parse_query(listing)) if listing else []
        self.status.metrics = len(metrics)
        if len(metrics) < metric_set.MIN_RULE_METRICS:
            self.progress.note(
                "ncu --query-metrics did not list this GPU's metrics; collecting ncu's sections "
                "instead (about 4x slower per launch)"
            )
            return "sections", []
        return sections, metrics

    def targeted(self, launches: pd.DataFrame, program_s: float) -> None:
        sections, metrics = self.collection()
        settings = PlanSettings(
            coverage=self.options.coverage,
            max_kernels=self.options.max_kernels,
            kernel_regex=self.options.kernel,
            program_s=program_s,
            seconds_per_launch=SECONDS_PER_LAUNCH[sections],
        )

        def argv_for(i: int, r: Round, name_base: str, collect: str = sections) -> list[str]:
            return cmd.ncu_targeted(
                self.ncu.path,
                self.sd.report(f"targeted-{i}"),
                self.program,
                names=r.names,
                launch_count=r.launch_count,
                name_base=name_base,
                sections=collect,
                metrics=metrics if collect == "rules" else (),
                profile_from_start=self.start,
                nvtx=self.options.nvtx,
            )

        self.plan = plan = plan_launches(launches, settings, argv_for)
        self.labels = dict(
            zip(launches["filter_name"].astype(str), launches["function"].astype(str))
        )
        self.status.plan = describe_plan(plan)
        for note in plan.notes:
            self.progress.note(note)
        if not plan.rounds:
            raise InputError(
                plan.notes[0] if plan.notes else "nothing to profile", "check --kernel"
            )
        self.progress.phase(
            f"phase 2: ncu on {len(plan.signatures)} kernel signatures", plan.launches
        )
        for i, r in enumerate(plan.rounds, start=1):
            result = self.run(f"2-targeted-{i}", r.argv, progress=True)
            if (
                sections == "rules"
                and not result.ok
                and result.profiled == 0
                and not _severe(result)
            ):
                # A metric name this ncu refuses fails the run before any launch: sections instead.
                self.progress.note(
                    f"ncu refused the metric list (see {result.log}); collecting its sections instead"
                )
                result = self.run(
                    f"2-targeted-{i}-sections",
                    argv_for(i, r, plan.name_base, "sections"),
                    progress=True,
                )
            report = self.sd.report(f"targeted-{i}.ncu-rep")
            if report.is_file():
                self.reports.append(report)
            error = runner.failure(result, f"targeted ncu run {i}", self.sd.root)
            if result.profiled == 0 and not _severe(result):
                # the filter matched nothing: a naming mismatch between nsys and ncu, not the program
                self.status.lacks(
                    f"run {i} profiled none of its {len(r.wanted)} planned kernel signature(s)"
                )
                continue
            if error:
                raise error

    def full(self, launches: int | None) -> None:
        self.progress.phase("ncu --set full on every launch", launches)
        out = self.sd.report("full")
        result = self.run(
            "2-full",
            cmd.ncu_full(
                self.ncu.path,
                out,
                self.program,
                kernel_regex=self.options.kernel,
                profile_from_start=self.start,
                nvtx=self.options.nvtx,
            ),
            progress=True,
        )
        report = out.with_name("full.ncu-rep")
        if report.is_file():
            self.reports.append(report)
        error = runner.failure(result, "the full-set run (ncu)", self.sd.root)
        if error:
            raise error

    # -- results ------------------------------------------------------------------------------
    def finish(self, export: bool = True) -> Session | None:
        if export:
            self.export(
                [
                    report
                    for report in self.reports
                    if all(raw.name != _csv_for(report, "raw").name for raw, _ in self.exported)
                ]
            )
        meta = {
            "command": self.program,
            "profiled_at": datetime.now().isoformat(timespec="seconds"),
            "tools": tools.describe([self.ncu, self.nsys]),
            "profile_mode": "full" if self.options.full else "targeted",
        }
        session = session_dir.assemble(self.exported, self.phase1_timeline, meta)
        if session is not None:
            if self.launches is not None and len(session.kernels):
                session.kernels = timeline_weights(session.kernels, self.launches)
            if self.plan is not None:
                self.status.coverage = coverage(self.plan, session)
                if self.status.coverage["missing"]:
                    m = self.status.coverage
                    self.status.lacks(
                        f"metrics of {len(m['missing'])} planned kernel signature(s) "
                        f"({m['missing_share']:.1%} of GPU time)"
                    )
            session_dir.save_tables(self.sd, session)
        else:
            self.status.lacks("tables (nothing was recorded)")
        self.status.save(self.sd)
        return session


def _csv_for(report: Path, page: str) -> Path:
    """Where a report's page is exported: `targeted-1.ncu-rep` -> `targeted-1.raw.csv`."""
    return report.with_name(f"{report.name.removesuffix('.ncu-rep')}.{page}.csv")


def _severe(result: runner.RunResult) -> bool:
    """A failure of the program or the machine, not of what ncu was asked to collect or match."""
    return result.timed_out or any(
        result.has(k) for k in ("counter-permission", "no-gpu", "app-error")
    )


def _key(name: str, grid: object, block: object) -> tuple[str, str, str, str]:
    return function_name(name), str(grid), str(block), normalized(name)


def coverage(plan: Plan, session: Session) -> dict:
    """Which planned signatures the ncu reports hold (matched by function, grid, block and the
    demangled name with the spelling differences between nsys and ncu removed; a signature split
    into duration groups needs a launch matched to its own group)."""
    k = session.kernels
    variant = (
        k["timeline_variant"].fillna(0).astype(int)
        if "timeline_variant" in k
        else pd.Series(0, index=k.index)
    )
    profiled = (
        {(_key(str(n), g, b), v) for n, g, b, v in zip(k["name"], k["grid"], k["block"], variant)}
        if len(k)
        else set()
    )
    keys = {p[0] for p in profiled}
    shapes = {p[0][:3] for p in profiled}
    found: list[Signature] = []
    missing: list[Signature] = []
    for s in plan.signatures:
        key = _key(s.name, s.grid, s.block)
        hit = (key, s.variant) in profiled if s.variants > 1 else (key in keys or key[:3] in shapes)
        (found if hit else missing).append(s)
    return {
        "planned": len(plan.signatures),
        "profiled": len(found),
        "profiled_share": round(sum(s.share for s in found), 6),
        "missing_share": round(sum(s.share for s in missing), 6),
        "missing": [
            {"name": s.name, "grid": s.grid, "block": s.block, "share": round(s.share, 6)}
            for s in missing
        ],
    }


def timeline_weights(kernels: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """Each profiled launch with its signature's launch count and total time in the phase-1
    timeline (`timeline_launches`, `timeline_total_ns`; `timeline_variant` of `timeline_variants`
    where the signature's launches fall in several duration groups): a targeted session profiles one
    launch of a signature that ran many times, and its share of GPU time comes from the timeline."""
    Variants = list[
        tuple[float, int, float, int, int]
    ]  # (median ns, launches, total ns, variant, variants)
    exact: dict[tuple[str, str, str, str], Variants] = {}
    by_shape: dict[tuple[str, str, str], dict[str, Variants]] = {}
    for s in signatures(launches):
        entry = (s.median_ns, s.launches, s.total_ns, s.variant, s.variants)
        exact.setdefault(_key(s.name, s.grid, s.block), []).append(entry)
        by_shape.setdefault((s.function, s.grid, s.block), {}).setdefault(s.name, []).append(entry)
    durations = (
        kernels["duration_ns"]
        if "duration_ns" in kernels
        else pd.Series(float("nan"), index=kernels.index)
    )
    counts, totals, groups, of = [], [], [], []
    for name, grid, block, ns in zip(
        kernels["name"].astype(str), kernels["grid"], kernels["block"], durations
    ):
        key = _key(name, grid, block)
        shape = by_shape.get(key[:3], {})
        variants = exact.get(key) or (next(iter(shape.values())) if len(shape) == 1 else None)
        hit = _nearest(variants, ns) if variants else None
        counts.append(hit[1] if hit else float("nan"))
        totals.append(hit[2] if hit else float("nan"))
        groups.append(hit[3] if hit else float("nan"))
        of.append(hit[4] if hit else float("nan"))
    return kernels.assign(
        timeline_launches=counts,
        timeline_total_ns=totals,
        timeline_variant=groups,
        timeline_variants=of,
    )


def _nearest(
    variants: list[tuple[float, int, float, int, int]], duration_ns: float
) -> tuple[float, int, float, int, int]:
    """The duration group a profiled launch belongs to: the nearest median, on a log scale."""
    if len(variants) == 1 or not duration_ns or duration_ns != duration_ns or duration_ns <= 0:
        return max(variants, key=lambda v: v[2])
    return min(variants, key=lambda v: abs(math.log(duration_ns / v[0])) if v[0] > 0 else math.inf)


def profile(
    args: Sequence[str],
    options: ProfileOptions = ProfileOptions(),
    progress: Progress | None = None,
    nsdiag_argv: Sequence[str] = (),
) -> ProfileResult:
    """Profile a program (no args: the bundled reference kernels) into a new session folder."""
    progress = progress or NullProgress()
    program, reference = resolve_program(args)
    start = options.profile_from_start if options.profile_from_start is not None else not reference
    ncu = tools.find_tool("ncu", options.ncu)
    nsys = tools.find_optional("nsys", options.nsys)
    when = datetime.now()
    sd = session_dir.create(options.output, program, when)
    session_dir.write_command(sd, nsdiag_argv, program, when)
    session_dir.write_env(sd, tools.describe([ncu, nsys]))
    session_dir.write_device(sd, gpu_info())
    state = _Run(program, start, options, progress, sd, ncu, nsys)
    state.status.save(sd)
    try:
        launches, program_s = state.timeline(fallback=not options.full)
        state.launches = launches
        if launches is not None and launches.empty:
            raise ProfilerError(
                "the program launched no CUDA kernel"
                + (" in the profiled region" if not start else "")
                + (f" inside NVTX range {options.nvtx!r}" if options.nvtx else ""),
                "check that it uses the GPU; with cudaProfilerStart/Stop pass --profile-from-start off",
            )
        if options.full:
            state.full(len(launches) if launches is not None else None)
        else:
            assert launches is not None
            state.targeted(launches, program_s)
        state.status.complete = True
        session = state.finish()
    except (runner.Interrupted, KeyboardInterrupt) as exc:
        state.status.error = "interrupted (Ctrl-C)"
        _finish_quietly(state, export=False)
        raise runner.Interrupted(
            f"interrupted; the partial session is kept in {sd.root}",
            getattr(exc, "hint", "") or "run again to profile everything",
        ) from exc
    except NsdiagError as exc:
        state.status.error = str(exc)
        _finish_quietly(state, export=True)
        raise
    except BaseException:
        state.status.error = "nsdiag failed unexpectedly"
        state.status.save(sd)
        raise
    return ProfileResult(
        sd.root, tuple(state.status.missing), state.plan, session, state.timings, state.profiled
    )


def _finish_quietly(state: _Run, export: bool) -> None:
    """Keep what was recorded; a failure here must not hide the original error."""
    try:
        state.finish(export=export)
    except (NsdiagError, OSError, ValueError, KeyError):
        state.status.lacks("tables (the partial reports could not be read)")
        state.status.save(state.sd)
