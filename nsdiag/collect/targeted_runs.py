"""Phase 2's targeted ncu runs, one per plan round: attached to the program waiting for it
(standby.py) or started, again with ncu's sections if it refuses the metric list, each watched
(watch.py) so that it ends once its plan is met, once the planned launches stop coming, or at
phase 2's wall-clock limit, after which the later rounds are skipped and the session says what
they would have profiled. Whatever a run profiled is kept: a run nsdiag ended writes its report,
and an interrupted one's report is kept when ncu wrote it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from nsdiag.collect import runner
from nsdiag.collect.cost import SECONDS_PER_LAUNCH, Estimate
from nsdiag.collect.plan import Plan
from nsdiag.collect.rounds import Round, launch_positions
from nsdiag.collect.run_state import RunState
from nsdiag.collect.watch import Limit, Watch, schedule

SectionsArgv = Callable[[int, Round], Sequence[str]]  # round i's command with ncu's sections


def limit(state: RunState, program_s: float, estimate: Estimate | None) -> Limit | None:
    """Phase 2's wall-clock limit from now: --budget, else `default_limit_runs` x phase 1's run
    (at least `min_limit_s`; none with --run-to-end, whose programs must not be stopped). The
    ncu runs end early enough to leave the exports their estimated seconds."""
    options, settings = state.options, state.options.watch
    if options.budget_s is not None:
        seconds, source = options.budget_s, "--budget"
    elif options.run_to_end:
        return None
    else:
        seconds = max(settings.default_limit_runs * program_s, settings.min_limit_s)
        source = (
            f"{settings.default_limit_runs:g}x phase 1's run of {program_s:.0f} s; "
            "--budget SECONDS sets another"
        )
    exports = estimate.export_s if estimate is not None else 0.0
    runs_s = max(seconds - exports, seconds / 2)
    state.status.phase2_limit = {
        "seconds": round(seconds, 1),
        "source": source,
        "runs_within_s": round(runs_s, 1),
        "reached": False,
        "skipped_runs": [],
    }
    return Limit(time.monotonic() + runs_s, seconds, source)


def run_rounds(
    state: RunState,
    plan: Plan,
    launches: pd.DataFrame,
    sections: str,
    with_sections: SectionsArgv,
    estimated: Sequence[float],
    phase2_limit: Limit | None,
) -> None:
    """Each round in turn, the estimate of the rest revised by how the finished ones went; the
    rounds left when the limit is reached are skipped."""
    spent = 0.0
    for i, r in enumerate(plan.rounds, start=1):
        if phase2_limit is not None and time.monotonic() >= phase2_limit.deadline:
            _skip(state, plan, i, phase2_limit)
            return
        # the next round's program starts beside this one, held at its first CUDA call
        following = (
            state.start_standby(f"2-standby-{i + 1}")
            if state.standby is not None and i < len(plan.rounds)
            else None
        )
        wall, ending = _run_round(state, i, r, launches, sections, with_sections, phase2_limit)
        spent += wall
        if following is not None:
            state.standby = following
        if ending is not None and ending.kind == "limit" and phase2_limit is not None:
            if i < len(plan.rounds):
                _skip(state, plan, i + 1, phase2_limit)
            return
        if i < len(plan.rounds):
            pace = spent / max(sum(estimated[:i]), 1e-9)
            left = pace * sum(estimated[i:])
            state.progress.note(
                f"ncu run {i} of {len(plan.rounds)} done in {spent:.0f} s so far "
                f"(estimated {sum(estimated[:i]):.0f} s); about {left:.0f} s left"
            )


def _skip(state: RunState, plan: Plan, first: int, phase2_limit: Limit) -> None:
    """Rounds `first` on are not run: phase 2's limit is spent."""
    skipped = list(range(first, len(plan.rounds) + 1))
    record = state.status.phase2_limit
    if record is not None:
        record["reached"] = True
        record["skipped_runs"] = skipped
    if not skipped:
        return
    wanted = [s for r in plan.rounds[first - 1 :] for s in r.wanted]
    share = sum(s.share for s in wanted)
    runs = f"run {first}" if len(skipped) == 1 else f"runs {first}-{skipped[-1]}"
    line = (
        f"metrics of {len(wanted)} planned kernel signature(s) ({share:.1%} of GPU time): "
        f"ncu {runs} of {len(plan.rounds)} skipped, phase 2's limit of "
        f"{phase2_limit.describe()} was spent"
    )
    state.status.lacks(line)
    state.progress.note(line)
    state.status.save(state.sd)


def _run_round(
    state: RunState,
    i: int,
    r: Round,
    launches: pd.DataFrame,
    sections: str,
    sections_argv: SectionsArgv,
    phase2_limit: Limit | None,
) -> tuple[float, runner.Ending | None]:
    """Round i, again with ncu's sections if ncu refuses the metric list; its wall seconds and
    why nsdiag ended it (None: it ended by itself)."""
    positions = launch_positions(launches, r)
    options = state.options

    def watch(collection: str, ahead_s: float) -> Watch:
        due = schedule(launches, positions, SECONDS_PER_LAUNCH[collection], ahead_s)
        return Watch(
            r.launches,
            r.wanted,
            due,
            SECONDS_PER_LAUNCH[collection],
            limit=phase2_limit,
            settings=options.watch,
            planned_stop=not options.run_to_end,
        )

    report = state.sd.report(f"targeted-{i}.ncu-rep")
    try:
        result, wall = _attached_or_started(state, i, r, sections, watch)
        if sections == "rules" and not result.ok and result.profiled == 0 and not severe(result):
            # A metric name this ncu refuses fails the run before any launch: sections instead.
            state.progress.note(
                f"ncu refused the metric list (see {result.log}); collecting its sections instead"
            )
            result = state.run(
                f"2-targeted-{i}-sections",
                sections_argv(i, r),
                progress=True,
                collection="sections",
                intercepted=r.intercepted,
                watch=watch("sections", 0.0),
            )
            wall += result.wall_s
    except runner.Interrupted:
        _keep(state, report)  # ncu writes what it profiled when stopped (stop_group)
        raise
    _keep(state, report)
    ending = result.ending
    if ending is not None and ending.kind != "planned":
        _ended(state, i, result, ending)
    error = runner.failure(result, f"targeted ncu run {i}", state.sd.root)
    if result.profiled == 0 and not severe(result):
        # the filter matched nothing: a naming mismatch between nsys and ncu, not the program
        why = f" ({ending.detail})" if ending is not None else ""
        state.status.lacks(
            f"run {i} profiled none of its {len(r.wanted)} planned kernel signature(s){why}"
        )
        return wall, ending
    if error:
        raise error
    return wall, ending


def _keep(state: RunState, report: Path) -> None:
    if report.is_file() and report not in state.reports:
        state.reports.append(report)


def _ended(state: RunState, i: int, result: runner.RunResult, ending: runner.Ending) -> None:
    """A run nsdiag ended before its plan was met: said now, and in the session."""
    if ending.kind == "stalled":
        because = (
            "the program's launches under ncu differ from phase 1's (cudnn.benchmark or "
            "attention picking other kernels, say)"
        )
        state.progress.note(f"ncu run {i}: {ending.detail}; {because}")
        if result.profiled:
            state.status.lacks(
                f"metrics of the launches ncu run {i} had not profiled when it was ended: "
                f"{ending.detail}; {because}"
            )
    else:
        state.progress.note(f"ncu run {i}: {ending.detail}; keeping what it profiled")


def _attached_or_started(
    state: RunState,
    i: int,
    r: Round,
    sections: str,
    watch: Callable[[str, float], Watch],
) -> tuple[runner.RunResult, float]:
    """Round i's run: attached to the program waiting for it (standby.py: started beside phase 1
    or the run before) when there is one, else (or when attaching fails) starting the program;
    the result and its wall seconds."""

    def run(name: str, argv: Sequence[str], ahead_s: float | None = None) -> runner.RunResult:
        # the watch's times count from the run's start: what the program ran ahead comes off
        ran = min(ahead_s, state.first_cuda_s) if ahead_s is not None else 0.0
        return state.run(
            name,
            argv,
            progress=True,
            collection=sections,
            intercepted=r.intercepted,
            watch=watch(sections, ran),
            ahead_s=ahead_s,
        )

    waiting = state.standby
    if waiting is None or not waiting.waiting():
        result = run(f"2-targeted-{i}", r.argv)
        return result, result.wall_s
    try:
        attached = run(
            f"2-targeted-{i}", waiting.attach_argv(r.argv, state.program), waiting.head_start_s()
        )
    finally:
        waiting.end()  # the program ends with the run (early stop: ncu kept its report)
    if attached.ok or attached.profiled or severe(attached) or attached.has("metric-refused"):
        return attached, attached.wall_s  # a refused metric list: _run_round's sections next
    state.progress.note(
        f"attaching to the waiting program failed (see {attached.log}); starting it again"
    )
    again = run(f"2-targeted-{i}-restarted", r.argv)
    return again, attached.wall_s + again.wall_s


def severe(result: runner.RunResult) -> bool:
    """A failure of the program or the machine, not of what ncu was asked to collect or match."""
    return result.timed_out or any(
        result.has(k) for k in ("counter-permission", "no-gpu", "app-error")
    )
