"""Phase 2: ncu on the launches that matter, one targeted run per plan round (or `--set full` on
every launch with --full), falling back to ncu's sections when the metric list is refused."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from nsdiag.collect import argv as cmd
from nsdiag.collect import metric_set, runner, tools
from nsdiag.collect.plan import Plan, plan_launches
from nsdiag.collect.plan import describe as describe_plan
from nsdiag.collect.rounds import SECONDS_PER_LAUNCH, PlanSettings, Round
from nsdiag.collect.run_state import RunState
from nsdiag.errors import InputError


def collection(state: RunState) -> tuple[str, list[str]]:
    """The section set phase 2 uses and, for "rules", the metric names this GPU offers."""
    sections = state.options.sections
    if sections != "rules":
        return sections, []
    listing = tools.query_metrics(state.ncu.path)
    metrics = metric_set.rule_metrics(metric_set.parse_query(listing)) if listing else []
    state.status.metrics = len(metrics)
    if len(metrics) < metric_set.MIN_RULE_METRICS:
        state.progress.note(
            "ncu --query-metrics did not list this GPU's metrics; collecting ncu's sections "
            "instead (about 4x slower per launch)"
        )
        return "sections", []
    return sections, metrics


def targeted(state: RunState, launches: pd.DataFrame, program_s: float) -> None:
    """Plan the runs from phase 1's launches, then run each round."""
    sections, metrics = collection(state)

    def argv_for(i: int, r: Round, name_base: str, collect: str = sections) -> list[str]:
        return cmd.ncu_targeted(
            state.ncu.path,
            state.sd.report(f"targeted-{i}"),
            state.program,
            names=r.names,
            launch_count=r.launch_count,
            launch_skip=r.launch_skip,
            name_base=name_base,
            sections=collect,
            metrics=metrics if collect == "rules" else (),
            profile_from_start=state.start,
            nvtx=state.options.nvtx,
            devices=state.devices,
            rank=state.options.rank,
        )

    def with_sections(i: int, r: Round) -> list[str]:
        return argv_for(i, r, plan.name_base, "sections")

    plan = _plan(state, launches, program_s, sections, argv_for)
    state.progress.phase(f"phase 2: ncu on {len(plan.signatures)} kernel signatures", plan.launches)
    for i, r in enumerate(plan.rounds, start=1):
        _run_round(state, i, r, sections, with_sections)


def _plan(
    state: RunState,
    launches: pd.DataFrame,
    program_s: float,
    sections: str,
    argv_for: Callable[[int, Round, str], list[str]],
) -> Plan:
    """The plan for these launches, recorded in the status; its notes told to the user."""
    settings = PlanSettings(
        coverage=state.options.coverage,
        max_kernels=state.options.max_kernels,
        kernel_regex=state.options.kernel,
        program_s=program_s,
        seconds_per_launch=SECONDS_PER_LAUNCH[sections],
    )
    state.plan = plan = plan_launches(launches, settings, argv_for)
    state.labels = dict(
        zip(launches["filter_name"].astype(str), launches["function"].astype(str), strict=True)
    )
    state.status.plan = describe_plan(plan)
    for note in plan.notes:
        state.progress.note(note)
    if not plan.rounds:
        raise InputError(plan.notes[0] if plan.notes else "nothing to profile", "check --kernel")
    return plan


def _run_round(
    state: RunState,
    i: int,
    r: Round,
    sections: str,
    sections_argv: Callable[[int, Round], list[str]],
) -> None:
    """Round i, again with ncu's sections if ncu refuses the metric list."""
    result = state.run(f"2-targeted-{i}", r.argv, progress=True)
    if sections == "rules" and not result.ok and result.profiled == 0 and not _severe(result):
        # A metric name this ncu refuses fails the run before any launch: sections instead.
        state.progress.note(
            f"ncu refused the metric list (see {result.log}); collecting its sections instead"
        )
        result = state.run(f"2-targeted-{i}-sections", sections_argv(i, r), progress=True)
    report = state.sd.report(f"targeted-{i}.ncu-rep")
    if report.is_file():
        state.reports.append(report)
    error = runner.failure(result, f"targeted ncu run {i}", state.sd.root)
    if result.profiled == 0 and not _severe(result):
        # the filter matched nothing: a naming mismatch between nsys and ncu, not the program
        state.status.lacks(
            f"run {i} profiled none of its {len(r.wanted)} planned kernel signature(s)"
        )
        return
    if error:
        raise error


def full(state: RunState, launches: int | None) -> None:
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
