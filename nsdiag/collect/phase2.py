"""Phase 2: ncu on the launches that matter, one targeted run per plan round (or `--set full` on
every launch with --full), falling back to ncu's sections when the metric list is refused. Its
estimate (cost.py) is told before it starts, cut to --budget (budget.py), and revised after
each run."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from nsdiag.collect import argv as cmd
from nsdiag.collect import budget, cost, early_stop, metric_set, runner, tools
from nsdiag.collect.cost import SECONDS_PER_LAUNCH
from nsdiag.collect.plan import ArgvFor, Plan, plan_launches
from nsdiag.collect.plan import describe as describe_plan
from nsdiag.collect.rounds import PlanSettings, Round
from nsdiag.collect.run_state import RunState
from nsdiag.errors import InputError


def collection(state: RunState) -> tuple[str, list[str]]:
    """The section set phase 2 uses and, for "rules", the metric names this GPU offers."""
    sections = state.options.sections
    if sections != "rules":
        return sections, []
    pending = state.metric_listing
    listing = pending.result() if pending is not None else tools.query_metrics(state.ncu.path)
    metrics = metric_set.rule_metrics(metric_set.parse_query(listing)) if listing else []
    state.status.rule_metrics = len(metrics)
    if len(metrics) < metric_set.MIN_RULE_METRICS:
        state.progress.note(
            "ncu --query-metrics did not list this GPU's metrics; collecting ncu's sections "
            "instead (about 4x slower per launch)"
        )
        return "sections", []
    return sections, metrics


def targeted(state: RunState, launches: pd.DataFrame, program_s: float) -> None:
    """Plan the runs from phase 1's launches, then run each round."""
    with state.timed("plan"):
        sections, metrics = collection(state)
        plan = _plan(state, launches, program_s, sections, _argv_for(state, sections, metrics))
    if plan is None:
        return  # --budget left every signature out: the session keeps the timeline
    with_sections = _argv_for(state, "sections", [])
    with state.timed("phase2"):
        state.progress.phase(
            f"phase 2: ncu on {len(plan.signatures)} kernel signatures", plan.launches
        )
        _run_rounds(
            state, plan, sections, program_s, lambda i, r: with_sections(i, r, plan.name_base)
        )


def _argv_for(state: RunState, collect: str, metrics: list[str]) -> ArgvFor:
    """Round i's ncu command collecting `collect` (the rules' `metrics` by name, or sections)."""

    def argv_for(i: int, r: Round, name_base: str) -> list[str]:
        return cmd.ncu_targeted(
            state.ncu.path,
            state.sd.report(f"targeted-{i}"),
            state.program,
            names=r.names,
            launch_count=r.launch_count,
            launch_skip=r.launch_skip,
            skip_before_match=r.skip_before_match,
            name_base=name_base,
            sections=collect,
            metrics=metrics if collect == "rules" else (),
            profile_from_start=state.start,
            nvtx=state.options.nvtx,
            devices=state.devices,
            rank=state.options.rank,
        )

    return argv_for


def _plan(
    state: RunState,
    launches: pd.DataFrame,
    program_s: float,
    sections: str,
    argv_for: ArgvFor,
) -> Plan | None:
    """The plan for these launches, cut to --budget, recorded in the status; its notes and its
    estimate told to the user. None when the budget leaves nothing to profile."""
    settings = PlanSettings(
        coverage=state.options.coverage,
        max_kernels=state.options.max_kernels,
        kernel_regex=state.options.kernel,
        program_s=program_s,
        seconds_per_launch=SECONDS_PER_LAUNCH[sections],
        end_early=not state.options.run_to_end,
        # ncu counts every launch from the program's start in one process only there
        before_match=state.start and not state.devices,
    )
    whole_plan = plan_launches(launches, settings, argv_for)
    state.labels = dict(
        zip(launches["filter_name"].astype(str), launches["function"].astype(str), strict=True)
    )
    if not whole_plan.rounds:
        for note in whole_plan.notes:
            state.progress.note(note)
        notes = whole_plan.notes
        raise InputError(notes[0] if notes else "nothing to profile", "check --kernel")

    ahead_s = _ahead_s(state)

    def estimate(p: Plan) -> cost.Estimate:
        return of_rounds(sections, program_s, p.rounds, ahead_s)

    whole = estimate(whole_plan)
    plan: Plan | None = whole_plan
    fitted = None
    if state.options.budget_s is not None:
        fitted = budget.fit(
            whole_plan,
            state.options.budget_s,
            lambda chosen: plan_launches(launches, settings, argv_for, chosen),
            estimate,
        )
        plan = fitted.plan
        state.status.budget = fitted.to_json()
        if (line := fitted.missing()) is not None:
            state.status.lacks(line)
    state.plan = plan
    state.status.plan = describe_plan(plan) if plan is not None else None
    for note in plan.notes if plan is not None else ():
        state.progress.note(note)
    kept = fitted.estimate if fitted is not None else whole
    state.status.estimate = kept.to_json() if kept is not None else None
    state.status.save(state.sd)
    state.progress.note(_estimate_note(kept, whole, fitted))
    return plan


def of_rounds(
    sections: str, program_s: float, rounds: Sequence[Round], ahead_s: float = 0.0
) -> cost.Estimate:
    """The estimate of these planned runs: the program up to each one's last planned launch,
    the launches it intercepts until then, its profiled launches."""
    return cost.estimate(
        sections,
        program_s,
        [r.launches for r in rounds],
        reach=[r.reach for r in rounds],
        ahead_s=ahead_s,
        intercepted=[r.intercepted for r in rounds],
    )


def _ahead_s(state: RunState) -> float:
    """Program seconds the waiting program (standby.py) has already run: its start-up up to its
    first CUDA call, where ncu holds it."""
    waiting = state.standby
    return min(waiting.head_start_s(), state.first_cuda_s) if waiting and waiting.waiting() else 0.0


def _estimate_note(
    kept: cost.Estimate | None, whole: cost.Estimate, fitted: budget.Fitted | None
) -> str:
    """What phase 2 will take, said before it starts (and what --budget did to it)."""
    if fitted is None or not fitted.left_out:
        cap = f" (within --budget {fitted.budget_s:g} s)" if fitted is not None else ""
        return f"phase 2 estimate: {whole.describe()}{cap}"
    if kept is None:
        return (
            f"phase 2 skipped: --budget {fitted.budget_s:g} s is less than profiling even the "
            f"kernel signature with the most GPU time; all of them: {whole.describe()}"
        )
    planned = len(fitted.left_out) + (len(fitted.plan.signatures) if fitted.plan else 0)
    return (
        f"phase 2 estimate: {kept.describe()}; --budget {fitted.budget_s:g} s leaves out "
        f"{len(fitted.left_out)} of {planned} planned signatures ({fitted.left_out_share:.1%} "
        f"of GPU time; all of them: about {whole.total_s:.0f} s)"
    )


def _run_rounds(
    state: RunState,
    plan: Plan,
    sections: str,
    program_s: float,
    with_sections: Callable[[int, Round], Sequence[str]],
) -> None:
    """Each round in turn, the estimate of the rest revised by how the finished ones went."""
    estimated = [of_rounds(sections, program_s, [r]).runs_s for r in plan.rounds]
    spent = 0.0
    for i, r in enumerate(plan.rounds, start=1):
        # the next round's program starts beside this one, held at its first CUDA call
        following = (
            state.start_standby(f"2-standby-{i + 1}")
            if state.standby is not None and i < len(plan.rounds)
            else None
        )
        spent += _run_round(state, i, r, sections, with_sections, r.intercepted)
        if following is not None:
            state.standby = following
        if i < len(plan.rounds):
            pace = spent / max(sum(estimated[:i]), 1e-9)
            left = pace * sum(estimated[i:])
            state.progress.note(
                f"ncu run {i} of {len(plan.rounds)} done in {spent:.0f} s so far "
                f"(estimated {sum(estimated[:i]):.0f} s); about {left:.0f} s left"
            )


def _run_round(
    state: RunState,
    i: int,
    r: Round,
    sections: str,
    sections_argv: Callable[[int, Round], Sequence[str]],
    intercepted: int,
) -> float:
    """Round i, again with ncu's sections if ncu refuses the metric list; its wall seconds.
    Each run ends once it has profiled what the round planned (early_stop.py), unless
    --run-to-end."""

    def stop() -> Callable[[int, str], bool] | None:
        if state.options.run_to_end:
            return None
        return early_stop.stop_condition(r.launches, r.wanted)

    result, wall = _attached_or_started(state, i, r, sections, intercepted, stop)
    if sections == "rules" and not result.ok and result.profiled == 0 and not _severe(result):
        # A metric name this ncu refuses fails the run before any launch: sections instead.
        state.progress.note(
            f"ncu refused the metric list (see {result.log}); collecting its sections instead"
        )
        result = state.run(
            f"2-targeted-{i}-sections",
            sections_argv(i, r),
            progress=True,
            collection="sections",
            intercepted=intercepted,
            stop_when=stop(),
        )
        wall += result.wall_s
    report = state.sd.report(f"targeted-{i}.ncu-rep")
    if report.is_file():
        state.reports.append(report)
    error = runner.failure(result, f"targeted ncu run {i}", state.sd.root)
    if result.profiled == 0 and not _severe(result):
        # the filter matched nothing: a naming mismatch between nsys and ncu, not the program
        state.status.lacks(
            f"run {i} profiled none of its {len(r.wanted)} planned kernel signature(s)"
        )
        return wall
    if error:
        raise error
    return wall


def _attached_or_started(
    state: RunState,
    i: int,
    r: Round,
    sections: str,
    intercepted: int,
    stop: Callable[[], Callable[[int, str], bool] | None],
) -> tuple[runner.RunResult, float]:
    """Round i's run: attached to the program waiting for it (standby.py: started beside phase 1
    or the run before) when there is one, else (or when attaching fails) starting the program;
    the result and its wall seconds."""

    def run(name: str, argv: Sequence[str], ahead_s: float | None = None) -> runner.RunResult:
        return state.run(
            name,
            argv,
            progress=True,
            collection=sections,
            intercepted=intercepted,
            stop_when=stop(),
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
    if attached.ok or attached.profiled or _severe(attached) or attached.has("metric-refused"):
        return attached, attached.wall_s  # a refused metric list: _run_round's sections next
    state.progress.note(
        f"attaching to the waiting program failed (see {attached.log}); starting it again"
    )
    again = run(f"2-targeted-{i}-restarted", r.argv)
    return again, attached.wall_s + again.wall_s


def full(state: RunState, launches: int | None, program_s: float) -> None:
    if launches is not None:  # without a timeline the number of launches is unknown
        estimate = cost.estimate("full", program_s, [launches])
        state.status.estimate = estimate.to_json()
        state.progress.note(f"ncu --set full on {launches} launches: {estimate.describe()}")
    state.progress.phase("ncu --set full on every launch", launches)
    out = state.sd.report("full")
    result = state.run(
        "2-full",
        cmd.ncu_full(
            state.ncu.path,
            out,
            state.program,
            kernel_regex=state.options.kernel,
            profile_from_start=state.start,
            nvtx=state.options.nvtx,
            devices=state.devices,
            rank=state.options.rank,
        ),
        progress=True,
        collection="full",
        intercepted=launches,
    )
    report = out.with_name("full.ncu-rep")
    if report.is_file():
        state.reports.append(report)
    error = runner.failure(result, "the full-set run (ncu)", state.sd.root)
    if error:
        raise error


def _severe(result: runner.RunResult) -> bool:
    """A failure of the program or the machine, not of what ncu was asked to collect or match."""
    return result.timed_out or any(
        result.has(k) for k in ("counter-permission", "no-gpu", "app-error")
    )
