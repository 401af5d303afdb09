"""Phase 2: ncu on the launches that matter, one targeted run per plan round (targeted_runs.py),
or `--set full` on every launch with --full. Its estimate (cost.py) is told before it starts,
cut to --budget (budget.py), and revised after each run; its wall-clock limit (watch.py) stops
it."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from nsdiag.collect import argv as cmd
from nsdiag.collect import budget, cost, metric_set, runner, table_staging, targeted_runs, tools
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
    state.stager = table_staging.stage(state.phase1_timeline, state.sd.root)
    with_sections = _argv_for(state, "sections", [])
    estimated = [of_rounds(sections, program_s, [r]).runs_s for r in plan.rounds]
    with state.timed("phase2"):
        state.progress.phase(
            f"phase 2: ncu on {len(plan.signatures)} kernel signatures", plan.launches
        )
        kept = of_rounds(sections, program_s, plan.rounds, _ahead_s(state))
        phase2_limit = targeted_runs.limit(state, program_s, kept)
        if phase2_limit is not None and kept.total_s > phase2_limit.seconds:
            state.progress.note(
                f"phase 2 stops at its limit of {phase2_limit.describe()}: the estimate is "
                "longer, so the runs it does not reach are skipped"
            )
        state.status.save(state.sd)
        targeted_runs.run_rounds(
            state,
            plan,
            launches,
            sections,
            lambda i, r: with_sections(i, r, plan.name_base),
            estimated,
            phase2_limit,
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
