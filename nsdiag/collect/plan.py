"""Phase 2's plan: which kernel signatures to profile, and the ncu runs that profile each once.

From the phase-1 timeline, launches are grouped into signatures (kernel + grid + block:
model/launches.py, keyed by model/signature.py) ranked by total GPU time; the most expensive are
chosen until `coverage` of kernel time is reached (selection.py), and the fewest ncu runs that
reach them are planned (rounds.py).
A run also profiles the other shapes of the chosen kernels; those count toward coverage.
Pure: DataFrame in, frozen records out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from nsdiag.collect.cost import SECONDS_PER_LAUNCH
from nsdiag.collect.rounds import (
    PlanSettings,
    Round,
    clear_cache,
    plan_rounds,
    round_for,
    round_s,
)
from nsdiag.collect.selection import choose
from nsdiag.model.launches import (
    VARIANT_RATIO,
    Signature,
    kernel_launches,
    name_base,
    signatures,
)

# Round i's ncu command: (i, the round, the name base) -> argv
ArgvFor = Callable[[int, Round, str], Sequence[str]]
DEFAULT_SETTINGS = PlanSettings()


@dataclass(frozen=True)
class Plan:
    signatures: tuple[Signature, ...]  # chosen, most time first
    rounds: tuple[Round, ...]
    uncovered: tuple[Signature, ...]  # chosen but not reachable within the run limits
    total_ns: float
    total_launches: int
    selected_share: float  # chosen signatures' share of kernel time
    planned_share: float  # share the rounds are expected to profile (other shapes too)
    estimated_s: float  # ncu runs, program start-up included
    full_estimated_s: float  # `ncu --set full` on every launch, for comparison
    notes: tuple[str, ...] = field(default=())
    name_base: str = "mangled"  # ncu --kernel-name-base the rounds use
    # of `uncovered`: kernels whose other shapes would cost more launches than they are worth
    declined: tuple[Signature, ...] = ()

    @property
    def launches(self) -> int:
        return sum(r.launches for r in self.rounds)


def make_plan(
    timeline: pd.DataFrame,
    settings: PlanSettings = DEFAULT_SETTINGS,
    argv_for: ArgvFor | None = None,
) -> Plan:
    """The plan for a phase-1 timeline. `argv_for(i, round, name_base)` builds round i's ncu
    command."""
    return plan_launches(kernel_launches(timeline), settings, argv_for)


def plan_launches(
    launches: pd.DataFrame,
    settings: PlanSettings = DEFAULT_SETTINGS,
    argv_for: ArgvFor | None = None,
    chosen: Sequence[Signature] | None = None,
) -> Plan:
    """`make_plan` on launches `kernel_launches` already prepared; `chosen` replaces the
    choice by coverage (--budget: the first signatures of a plan already made)."""
    if launches.empty:
        raise ValueError("the timeline holds no kernel launch")
    clear_cache()  # the planner's caches are keyed by this frame
    base = name_base(launches)
    sigs = signatures(launches)
    inside = launches["in_region"].astype(bool) if "in_region" in launches else None
    # shares are of the analysed region's kernel time (signatures count only its launches)
    total = float(
        launches.loc[inside, "duration_ns"].sum()
        if inside is not None
        else launches["duration_ns"].sum()
    )
    if chosen is None:
        chosen = choose(sigs, settings.coverage, settings.max_kernels, settings.kernel_regex)
    rounds, uncovered, declined = plan_rounds(launches, chosen, settings)
    rounds = [
        round_for(
            launches, r.wanted, r.launch_count, settings, sigs, r.launch_skip, r.skip_before_match
        )
        for r in rounds
    ]
    if argv_for is not None:
        rounds = [_with_argv(r, argv_for(i, r, base)) for i, r in enumerate(rounds, start=1)]

    def share(items: Iterable[Signature]) -> float:
        return sum(s.total_ns for s in items) / total if total else 0.0

    profiled = {s for r in rounds for s in r.profiled}
    return Plan(
        tuple(chosen),
        tuple(rounds),
        tuple(uncovered),
        total,
        len(launches),
        share(chosen),
        share(profiled),
        sum(round_s(r, settings) for r in rounds),
        settings.program_s + len(launches) * SECONDS_PER_LAUNCH["full"],
        tuple(_notes(settings, chosen, uncovered, share, declined)),
        base,
        tuple(declined),
    )


def _with_argv(r: Round, argv: Sequence[str]) -> Round:
    return replace(r, argv=tuple(argv))


def _notes(
    settings: PlanSettings,
    chosen: Sequence[Signature],
    uncovered: Sequence[Signature],
    share: Callable[[Iterable[Signature]], float],
    declined: Sequence[Signature] = (),
) -> list[str]:
    """What the user should know about the plan: no match, declined and shadowed signatures,
    duration groups."""
    notes = []
    if settings.kernel_regex and not chosen:
        notes.append(f"no kernel matches --kernel {settings.kernel_regex!r}")
    if declined:
        names = sorted({_label(s) for s in declined})
        notes.append(
            f"{len(declined)} chosen signature(s) ({share(declined):.1%} of kernel time) will "
            f"not be profiled: ncu would profile every launch shape of their kernels "
            f"({', '.join(names)}), more launches than that GPU time is worth at "
            f"{settings.seconds_per_launch:.1f} s each (their timeline figures stay)"
        )
        uncovered = [s for s in uncovered if s not in declined]
    if uncovered:
        # the planner weighs a run against the GPU time it reaches (rounds.py), so this is
        # either a choice or a limit; the note names both
        notes.append(
            f"{len(uncovered)} chosen signature(s) ({share(uncovered):.1%} of kernel time) will "
            "not be profiled: they are shadowed by earlier launches of the same shape within "
            f"{settings.max_rounds} ncu run(s), or reaching them would take another ncu run of "
            f"the program (about {settings.program_s:.0f} s) for that little GPU time"
        )
    later = [s for s in chosen if s.variant and s not in uncovered]
    if later:
        notes.append(
            f"{len(later)} chosen signature(s) ({share(later):.1%} of kernel time) are later "
            "duration groups of a kernel and shape that also ran with other work (launches more "
            f"than {VARIANT_RATIO}x apart): ncu counts further into their launch configuration to "
            "reach them"
        )
    return notes


def _label(s: Signature) -> str:
    """A kernel's name that tells template instances apart: the functor a generic kernel was
    instantiated with (`float16_copy_kernel_cuda` for a `vectorized_elementwise_kernel`)."""
    for word in re.findall(r"[A-Za-z0-9_]*_kernel[A-Za-z0-9_]*", s.name):
        if word != s.function:
            return str(word)
    return s.function


def describe(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data (status.json, dry run)."""

    def sig(s: Signature) -> dict[str, Any]:
        return {
            "name": s.name,
            "function": s.function,
            "grid": s.grid,
            "block": s.block,
            "launches": s.launches,
            "total_ns": s.total_ns,
            "share": round(s.share, 6),
            **(
                {"variant": s.variant, "variants": s.variants, "median_ns": s.median_ns}
                if s.variants > 1
                else {}
            ),
        }

    return {
        "kernel_launches": plan.total_launches,
        "kernel_time_ns": plan.total_ns,
        "selected_share": round(plan.selected_share, 6),
        "planned_share": round(plan.planned_share, 6),
        "estimated_s": round(plan.estimated_s, 1),
        "full_set_estimated_s": round(plan.full_estimated_s, 1),
        "signatures": [sig(s) for s in plan.signatures],
        "name_base": plan.name_base,
        "rounds": [
            {
                "names": list(r.names),
                "launch_count": r.launch_count,
                "launch_skip": r.launch_skip,
                "launch_skip_before_match": r.skip_before_match,
                "expected_launches": r.launches,
                "reach": round(r.reach, 3),
                "wanted": [sig(s) for s in r.wanted],
                "argv": list(r.argv),
            }
            for r in plan.rounds
        ],
        "uncovered": [sig(s) for s in plan.uncovered],
        "declined": [sig(s) for s in plan.declined],
        "notes": list(plan.notes),
    }
