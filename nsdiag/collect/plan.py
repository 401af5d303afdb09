"""Phase 2's plan: which kernel signatures to profile, and the ncu runs that profile each once.

From the phase-1 timeline, launches are grouped into signatures (kernel + grid + block) ranked by
total GPU time; the most expensive are chosen until `coverage` of kernel time is reached. ncu
filters launches by kernel name and, with `--filter-mode per-launch-config --launch-count 1`,
profiles the first launch of every launch configuration of each matching name. The name is the
mangled one when the timeline has it (nsys does): one name per template instance, so a single
run profiles every chosen signature. It also profiles the other shapes of the chosen kernels;
those count toward coverage. With bare function names only (the ncu fallback of phase 1),
template variants share a name and can shadow each other; the plan then replays ncu's filter on
the launch sequence and uses more runs or higher counts to reach them.
Pure: DataFrame in, frozen records out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from nsdiag.model.names import function_name

# Verified on the H200 with ncu 2025.3.1 (tools/probes/probe_ncu_filters.sh): per-launch-config
# counts launches per (kernel name in the chosen name base, launch configuration), and launches
# made before cudaProfilerStart are not counted under --profile-from-start off.
LAUNCH_CONFIG_KEY_HAS_NAME = True

# Seconds per profiled launch on the H200, measured (tools/probes/probe_sections.sh, 5 launches of
# an elementwise kernel; GPU-NOTES for duration): the rules' metrics by name 0.5 s, the
# twelve sections they come from 1.9 s, the full set 2.2 s (2.01 s over the 301 launches of the
# benchmark's transformer step, 2.3 s in GPU-NOTES).
SECONDS_PER_LAUNCH = {"full": 2.2, "sections": 1.9, "rules": 0.5, "duration": 0.2}
# Launches of one signature more than this far apart in duration did different work (cuBLAS and
# nvjet reuse a GEMM kernel and grid for different K): each group gets its own profiled launch.
VARIANT_RATIO = 1.5


@dataclass(frozen=True)
class Signature:
    name: str  # demangled
    function: str  # bare function name (ncu's `function` base, nsys's short name)
    grid: str
    block: str
    launches: int
    total_ns: float
    share: float  # of all kernel time in the timeline
    first: int  # index of the first launch in launch order
    filter_name: str = ""  # the name ncu's filter sees: mangled when known, else `function`
    variant: int = 0  # duration group within name + grid + block (0 = shortest launches)
    variants: int = 1
    median_ns: float = 0.0


@dataclass(frozen=True)
class Round:
    """One ncu run: kernels of these names, the first `launch_count` launches of each shape."""

    names: tuple[str, ...]
    launch_count: int
    wanted: tuple[Signature, ...]
    launches: int  # launches this run is expected to profile (wanted and others)
    argv: tuple[str, ...] = ()
    profiled: tuple[Signature, ...] = ()  # every signature it reaches: wanted and other shapes


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

    @property
    def launches(self) -> int:
        return sum(r.launches for r in self.rounds)


@dataclass(frozen=True)
class PlanSettings:
    coverage: float = 0.9
    max_kernels: int = 100
    kernel_regex: str | None = None
    max_launch_count: int = 4
    max_rounds: int = 3
    program_s: float = 10.0  # one run of the program outside ncu (phase 1 measures it)
    seconds_per_launch: float = SECONDS_PER_LAUNCH["rules"]
    key_has_name: bool = LAUNCH_CONFIG_KEY_HAS_NAME


def kernel_launches(timeline: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows in launch order with `function` (nsys short name, else parsed) and
    `filter_name` (the mangled name where every launch has one, else `function`) columns."""
    k = timeline[timeline["kind"] == "kernel"] if "kind" in timeline else timeline
    k = k.copy()
    for column in ("grid", "block"):
        k[column] = k[column].astype(str) if column in k else ""
    order = None
    if "api_start_ns" in k and (k["api_start_ns"].fillna(-1) >= 0).all():
        order = "api_start_ns"  # ncu counts launches in API order, not GPU start order
    elif "start_ns" in k:
        order = "start_ns"
    if order:
        k = k.sort_values(order, kind="stable")
    names = k["name"].astype(str)
    short = (
        k["short_name"].fillna("").astype(str)
        if "short_name" in k
        else pd.Series("", index=k.index)
    )
    k["function"] = [s if s else function_name(n) for s, n in zip(short, names)]
    k["filter_name"] = k["mangled_name"].astype(str) if name_base(k) == "mangled" else k["function"]
    k["duration_ns"] = pd.to_numeric(k["duration_ns"], errors="coerce").fillna(0.0)
    return k.reset_index(drop=True)


def name_base(launches: pd.DataFrame) -> str:
    """`mangled` when every launch has a mangled name (what kernel_launches filters by), else `function`."""
    mangled = (
        launches["mangled_name"].fillna("").astype(str) if "mangled_name" in launches else None
    )
    return (
        "mangled" if mangled is not None and len(launches) and (mangled != "").all() else "function"
    )


def duration_groups(durations: Sequence[float], ratio: float = VARIANT_RATIO) -> list[int]:
    """Each launch's group when launches of one name, grid and block did different amounts of
    work (a GEMM kernel reused for several K): sorted durations split where one is more than
    `ratio` times the one before. 0 is the shortest group."""
    order = sorted(set(float(d) for d in durations))
    cuts = [b for a, b in zip(order, order[1:]) if a > 0 and b / a > ratio]
    return [sum(d >= c for c in cuts) for d in durations]


def signatures(launches: pd.DataFrame) -> list[Signature]:
    total = float(launches["duration_ns"].sum())
    rows = []
    keyed = launches.assign(_pos=range(len(launches)))
    if "filter_name" not in keyed:
        keyed["filter_name"] = keyed["function"]
    # A signature is what ncu tells apart: its filter name and shape. Demangled names group the
    # same way (one per mangled name), and with bare function names template variants stay apart.
    # Launches of one signature whose durations fall in separate groups are planned separately:
    # ncu reaches a later group's first launch with a higher launch count.
    for (_, name, grid, block), group in keyed.groupby(
        ["filter_name", "name", "grid", "block"], sort=False
    ):
        labels = duration_groups(group["duration_ns"].tolist())
        count = max(labels) + 1
        for variant, part in group.groupby(pd.Series(labels, index=group.index), sort=True):
            ns = float(part["duration_ns"].sum())
            rows.append(
                Signature(
                    str(name),
                    str(part["function"].iloc[0]),
                    str(grid),
                    str(block),
                    len(part),
                    ns,
                    ns / total if total else 0.0,
                    int(part["_pos"].iloc[0]),
                    str(part["filter_name"].iloc[0]),
                    int(variant),
                    count,
                    float(part["duration_ns"].median()),
                )
            )
    return sorted(rows, key=lambda s: (-s.total_ns, s.first))


def _firsts_of_shape(sigs: Sequence[Signature]) -> dict[tuple[str, str, str], Signature]:
    """For each (filter name, grid, block): the signature whose launch comes first, the one a
    per-launch-config count of 1 reaches (the only one, when filter names are mangled)."""
    out: dict[tuple[str, str, str], Signature] = {}
    for s in sorted(sigs, key=lambda s: s.first):
        out.setdefault((s.filter_name, s.grid, s.block), s)
    return out


def choose(
    sigs: Sequence[Signature], coverage: float, max_kernels: int, kernel_regex: str | None
) -> list[Signature]:
    """The most expensive signatures until `coverage` of the (matching) kernel time is reached.

    Choosing a signature makes ncu profile the other shapes of its kernel name too (one launch
    each): their time counts toward coverage and their launches toward `max_kernels`, the cap on
    profiled signatures."""
    if kernel_regex:
        pattern = re.compile(kernel_regex)
        sigs = [s for s in sigs if pattern.search(s.name) or pattern.search(s.function)]
    goal = coverage * sum(s.total_ns for s in sigs)
    firsts = set(_firsts_of_shape(sigs).values())
    by_name: dict[str, list[Signature]] = {}
    for s in sigs:
        if s in firsts:
            by_name.setdefault(s.filter_name, []).append(s)
    chosen: list[Signature] = []
    reached: set[Signature] = set()  # chosen, or profiled along with a chosen signature
    covered = 0.0
    for s in sigs:
        if covered >= goal and chosen:
            break
        if s in reached:
            continue
        riders = [r for r in by_name.get(s.filter_name, []) if r not in reached and r is not s]
        if chosen and len(reached) + 1 + len(riders) > max_kernels:
            continue  # too many shapes come with it; a cheaper one may still fit
        if not chosen and len(riders) + 1 > max_kernels:
            riders = []  # the most expensive signature is always planned
        chosen.append(s)
        for r in (s, *riders):
            reached.add(r)
            covered += r.total_ns
    return chosen


def _ranks(
    launches: pd.DataFrame, names: set[str], sigs: Sequence[Signature], key_has_name: bool
) -> tuple[dict[Signature, int], pd.DataFrame]:
    """For each signature of `names`, how many launches ncu sees in its launch-configuration
    group before the signature's first launch (0 = it is the first), counting only launches of
    `names` (ncu's name filter applies first)."""
    seen = launches[launches["filter_name"].isin(names)].copy()
    keys = ["filter_name", "grid", "block"] if key_has_name else ["grid", "block"]
    seen["_rank"] = seen.groupby(keys, sort=False).cumcount()
    rank_at = dict(zip(seen.index, seen["_rank"]))
    return {s: int(rank_at[s.first]) for s in sigs if s.filter_name in names}, seen


def _round_for(
    launches: pd.DataFrame,
    pending: Sequence[Signature],
    count: int,
    settings: PlanSettings,
    every: Sequence[Signature] = (),
) -> Round:
    names = {s.filter_name for s in pending}
    ranks, seen = _ranks(launches, names, [*pending, *every], settings.key_has_name)
    wanted = tuple(s for s in pending if ranks[s] < count)
    profiled = tuple(
        s for s in dict.fromkeys([*pending, *every]) if s in ranks and ranks[s] < count
    )
    # Each (name, shape) group yields at most `count` results whichever key ncu uses; shared
    # memory, which the timeline lacks, can only split groups further (a small underestimate).
    sizes = seen.groupby(["filter_name", "grid", "block"], sort=False).size()
    expected = int(sizes.clip(upper=count).sum())
    return Round(tuple(sorted(names)), count, wanted, expected, (), profiled)


def launch_positions(
    launches: pd.DataFrame, r: Round, key_has_name: bool = LAUNCH_CONFIG_KEY_HAS_NAME
) -> list[int]:
    """Positions (in launch order) of the launches ncu profiles in round `r`: per launch
    configuration of the round's names, the first `launch_count`."""
    _, seen = _ranks(launches, set(r.names), (), key_has_name)
    return sorted(int(i) for i in seen.index[seen["_rank"] < r.launch_count])


def _round_s(r: Round, settings: PlanSettings) -> float:
    return settings.program_s + r.launches * settings.seconds_per_launch


def _unprofiled_s(left: Sequence[Signature]) -> float:
    """A signature left unprofiled costs as much as profiling all its launches: coverage wins."""
    return sum(s.launches for s in left) * SECONDS_PER_LAUNCH["full"]


def _follow_s(launches: pd.DataFrame, left: Sequence[Signature], settings: PlanSettings) -> float:
    """What profiling `left` costs in one more run, at its cheapest launch count (one run ahead only)."""
    if not left:
        return 0.0
    costs = []
    for count in range(1, settings.max_launch_count + 1):
        r = _round_for(launches, left, count, settings)
        costs.append(_round_s(r, settings) + _unprofiled_s([s for s in left if s not in r.wanted]))
    return min(costs)


def plan_rounds(
    launches: pd.DataFrame, chosen: Sequence[Signature], settings: PlanSettings
) -> tuple[list[Round], list[Signature]]:
    """Cover `chosen` with as few profiled launches and program runs as the cost model finds:
    for each run try every launch count, looking one run ahead for what it leaves."""
    pending, rounds = list(chosen), list[Round]()
    while pending and len(rounds) < settings.max_rounds:
        best: tuple[float, Round] | None = None
        for count in range(1, settings.max_launch_count + 1):
            r = _round_for(launches, pending, count, settings)
            if not r.wanted:
                continue
            left = [s for s in pending if s not in r.wanted]
            cost = _round_s(r, settings) + (
                _follow_s(launches, left, settings)
                if len(rounds) + 1 < settings.max_rounds
                else _unprofiled_s(left)
            )
            if best is None or cost < best[0] - 1e-9:
                best = (cost, r)
        if best is None:
            break
        rounds.append(best[1])
        pending = [s for s in pending if s not in best[1].wanted]
    return rounds, pending


def make_plan(
    timeline: pd.DataFrame,
    settings: PlanSettings = PlanSettings(),
    argv_for: Callable[[int, Round, str], Sequence[str]] | None = None,
) -> Plan:
    """The plan for a phase-1 timeline. `argv_for(i, round, name_base)` builds round i's ncu command."""
    return plan_launches(kernel_launches(timeline), settings, argv_for)


def plan_launches(
    launches: pd.DataFrame,
    settings: PlanSettings = PlanSettings(),
    argv_for: Callable[[int, Round, str], Sequence[str]] | None = None,
) -> Plan:
    """`make_plan` on launches `kernel_launches` already prepared."""
    if launches.empty:
        raise ValueError("the timeline holds no kernel launch")
    base = name_base(launches)
    sigs = signatures(launches)
    total = float(launches["duration_ns"].sum())
    chosen = choose(sigs, settings.coverage, settings.max_kernels, settings.kernel_regex)
    rounds, uncovered = plan_rounds(launches, chosen, settings)
    rounds = [_round_for(launches, r.wanted, r.launch_count, settings, sigs) for r in rounds]
    if argv_for is not None:
        rounds = [
            Round(
                r.names,
                r.launch_count,
                r.wanted,
                r.launches,
                tuple(argv_for(i, r, base)),
                r.profiled,
            )
            for i, r in enumerate(rounds, start=1)
        ]
    share = lambda items: sum(s.total_ns for s in items) / total if total else 0.0  # noqa: E731
    notes = []
    if settings.kernel_regex and not chosen:
        notes.append(f"no kernel matches --kernel {settings.kernel_regex!r}")
    if uncovered:
        notes.append(
            f"{len(uncovered)} chosen signature(s) ({share(uncovered):.1%} of kernel time) are shadowed by "
            f"earlier launches of the same shape beyond {settings.max_rounds} ncu run(s) and will not be profiled"
        )
    later = [s for s in chosen if s.variant and s not in uncovered]
    if later:
        notes.append(
            f"{len(later)} chosen signature(s) ({share(later):.1%} of kernel time) are later duration groups of a "
            "kernel and shape that also ran with other work (launches more than "
            f"{VARIANT_RATIO}x apart): ncu counts further into their launch configuration to reach them"
        )
    profiled = set(s for r in rounds for s in r.profiled)
    estimated = sum(_round_s(r, settings) for r in rounds)
    full = settings.program_s + len(launches) * SECONDS_PER_LAUNCH["full"]
    return Plan(
        tuple(chosen),
        tuple(rounds),
        tuple(uncovered),
        total,
        len(launches),
        share(chosen),
        share(profiled),
        estimated,
        full,
        tuple(notes),
        base,
    )


def in_nvtx_range(
    timeline: pd.DataFrame, nvtx_ranges: pd.DataFrame, expression: str
) -> pd.DataFrame:
    """Timeline rows launched while an NVTX range named like `expression` (ncu syntax: 'name',
    'name/', 'domain@name', 'outer/inner/') was open on the launching thread."""
    parts = [p for p in expression.split("/") if p]
    name = parts[-1].split("@")[-1] if parts else expression
    if "api_start_ns" not in timeline or "name" not in nvtx_ranges:
        return timeline.iloc[0:0]
    ranges = nvtx_ranges[nvtx_ranges["name"].astype(str) == name]
    same_thread = "thread_id" in timeline and "thread_id" in ranges
    keep = pd.Series(False, index=timeline.index)
    for r in ranges.itertuples():
        inside = (timeline["api_start_ns"] >= r.start_ns) & (timeline["api_start_ns"] <= r.end_ns)
        if same_thread:
            inside &= timeline["thread_id"] == r.thread_id
        keep |= inside
    return timeline[keep]


def describe(plan: Plan) -> dict:
    """The plan as JSON-ready data (status.json, dry run)."""

    def sig(s: Signature) -> dict:
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
                "expected_launches": r.launches,
                "wanted": [sig(s) for s in r.wanted],
                "argv": list(r.argv),
            }
            for r in plan.rounds
        ],
        "uncovered": [sig(s) for s in plan.uncovered],
        "notes": list(plan.notes),
    }
