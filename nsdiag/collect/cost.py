"""What phase 2 costs, measured on the H200 (ncu 2025.3.1), and the estimate told before it runs:

    estimate = ncu runs x program run time + launches intercepted x seconds per interception
               + launches profiled x passes x seconds per pass + exports

The program's run time is phase 1's (the planner's `program_s`). Seconds per pass differ by
collection: ncu's sections gather and process per-launch tables that metrics asked for by name
do not, so a pass of `--set full` costs about three of the rules' metrics. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Replay passes per profiled launch, as ncu prints them ("==PROF== Profiling "k": 0%...100% - 38
# passes"): full, every --set full launch in tests/data/logs/reference.log and calibration.log;
# sections, the twelve the rules read together (tests/data/profile/probe_sections.log,
# "targeted: 5 launches ... 35 passes"); rules, the rules' 136 metrics by name with SpeedOfLight,
# LaunchStats and Occupancy (duration-groups/probe_metric_passes.log, "all + 3 sections ... 24
# passes"); duration, gpu__time_duration.sum alone ("- 1 pass", probe_ncu_filters.log).
PASSES = {"full": 38, "sections": 35, "rules": 24, "duration": 1}

# Seconds per profiled launch beyond the program's own run: full 2.2 and sections 1.9
# (probe_sections.log: 5 launches, 16.86 s and 15.19 s against a 5.81 s plain run; 2.01-2.24 s per
# launch over the benchmark's full-set slices, tests/data/profile/*/full-*.json); rules 0.5 (per
# launch, wall minus the nsys phase, median 0.47 s over the 19 targeted runs of 20 or more launches
# in the recorded sessions, tests/data/**/status.json; tests/test_collect_cost.py derives it);
# duration 0.2 (GPU-NOTES.md: 13 launches, 7.5 s against a 4.9 s plain run). The planner weighs
# its runs with these figures.
SECONDS_PER_LAUNCH = {"full": 2.2, "sections": 1.9, "rules": 0.5, "duration": 0.2}
SECONDS_PER_PASS = {k: SECONDS_PER_LAUNCH[k] / PASSES[k] for k in PASSES}

# Seconds ncu adds to each kernel launch it intercepts and does not profile, with the plan's
# filter (`--kernel-name-base mangled -k regex:^(24 mangled names)$ --filter-mode
# per-launch-config`): tools/probes/probe_ncu_filter_cost.sh on the H200, ncu 2025.3.1,
# tests/data/idioms/logs/probe_filter_{decode,optim}.log. GPT-2 generate() at batch 1 (27,274
# launches per request, 0.56-0.75 s plain) took 7.0-7.6 s per request under it, about 0.24 ms a
# launch (a trivial regex matching nothing 0.09 ms, `--kernel-name-base function` 0.3 ms, no
# filter and a skip past the end 0.2 ms); a ViT-S step with foreach=False AdamW (~2,000
# launches, 36-38 ms plain) 465-520 ms. A run pays it for every launch up to its last planned
# one (all of them with --run-to-end): on launch-heavy programs more than the replay itself.
SECONDS_PER_INTERCEPTED = 0.25e-3

# The CSV exports of one report, the details page being the longer: about 0.5 s plus 0.03 s per
# launch (recorded sessions: 0.5 s for 1 launch, 1.6 s for 51, 2.9-3.6 s for 73-92), 0.2 s per
# launch for the full set (lm_train_full: 7.45 s for 37). Two reports export at once.
EXPORT_BASE_S = 0.5
EXPORT_S_PER_LAUNCH = {"full": 0.2, "sections": 0.03, "rules": 0.03, "duration": 0.03}


@dataclass(frozen=True)
class Estimate:
    """Phase 2's expected wall time, term by term (status.json's `estimate`, the note before it)."""

    collection: str
    runs: int
    program_s: float  # one run of the program, per ncu run
    launches: int
    passes: int  # per profiled launch
    seconds_per_pass: float
    export_s: float
    reach: float = 0.0  # program runs the ncu runs take, in whole runs (0: `runs` whole runs)
    ahead_s: float = 0.0  # program seconds the first run's program ran before it (standby.py)
    intercepted: int = 0  # launches the runs intercept up to their last planned one
    seconds_per_intercepted: float = SECONDS_PER_INTERCEPTED

    @property
    def replay_s(self) -> float:
        return self.launches * self.passes * self.seconds_per_pass

    @property
    def intercept_s(self) -> float:
        return self.intercepted * self.seconds_per_intercepted

    @property
    def program_runs(self) -> float:
        """Runs of the program the ncu runs cost: each ends after its last planned launch."""
        return self.reach or float(self.runs)

    @property
    def runs_s(self) -> float:
        """The ncu runs alone (what the planner's `estimated_s` counts)."""
        program = max(self.program_runs * self.program_s - self.ahead_s, 0.0)
        return program + self.intercept_s + self.replay_s

    @property
    def total_s(self) -> float:
        return self.runs_s + self.export_s

    def describe(self) -> str:
        part = (
            f" (ended after their last planned launch: {self.program_runs:.2f} of a run)"
            if self.program_runs < self.runs - 1e-9
            else ""
        )
        ahead = f" - {self.ahead_s:.1f} s it ran ahead" if self.ahead_s > 0 else ""
        intercepted = (
            f" + {self.intercepted:,} launches intercepted x "
            f"{self.seconds_per_intercepted * 1e3:.2f} ms"
            if self.intercepted
            else ""
        )
        return (
            f"about {self.total_s:.0f} s: {self.runs} ncu run(s) x {self.program_s:.1f} s of "
            f"program{part}{ahead}{intercepted} + {self.launches} launches x {self.passes} "
            f"passes x {self.seconds_per_pass:.3f} s + {self.export_s:.1f} s of exports"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "collection": self.collection,
            "runs": self.runs,
            "program_s": round(self.program_s, 2),
            "program_runs": round(self.program_runs, 3),
            **({"ahead_s": round(self.ahead_s, 1)} if self.ahead_s > 0 else {}),
            **(
                {"intercepted": self.intercepted, "intercept_s": round(self.intercept_s, 1)}
                if self.intercepted
                else {}
            ),
            "launches": self.launches,
            "passes_per_launch": self.passes,
            "seconds_per_pass": round(self.seconds_per_pass, 4),
            "replay_s": round(self.replay_s, 1),
            "export_s": round(self.export_s, 1),
            "total_s": round(self.total_s, 1),
        }


def export_s(launches_per_report: Sequence[int], collection: str) -> float:
    """Wall seconds of the exports: at least the longest report's, about half the sum."""
    per = EXPORT_S_PER_LAUNCH.get(collection, EXPORT_S_PER_LAUNCH["rules"])
    costs = [EXPORT_BASE_S + n * per for n in launches_per_report]
    return max([sum(costs) / 2, *costs]) if costs else 0.0


def estimate(
    collection: str,
    program_s: float,
    launches_per_run: Sequence[int],
    passes: int | None = None,
    reach: Sequence[float] = (),
    ahead_s: float = 0.0,
    intercepted: Sequence[int] = (),
) -> Estimate:
    """Phase 2 of these ncu runs (launches each), at `passes` per launch (default: the
    collection's measured count); `reach`, each run's share of the program before it ends
    (default: whole runs); `ahead_s`, what the first run's program already ran (standby.py);
    `intercepted`, the launches each run intercepts up to its last planned one (rounds.py)."""
    return Estimate(
        collection,
        len(launches_per_run),
        program_s,
        sum(launches_per_run),
        passes if passes is not None else PASSES[collection],
        SECONDS_PER_PASS[collection],
        export_s(launches_per_run, collection),
        float(sum(reach)) if len(reach) == len(launches_per_run) else 0.0,
        ahead_s,
        int(sum(intercepted)),
    )
