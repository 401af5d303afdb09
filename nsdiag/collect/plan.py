"""Phase 2's plan: which kernel signatures to profile, and the ncu runs that profile each once.

From the phase-1 timeline, launches are grouped into signatures (name + grid + block) ranked by
total GPU time; the smallest set covering `coverage` of kernel time (at most `max_kernels`) is
chosen. ncu can only filter by function name (no template arguments) and, with
`--filter-mode per-launch-config`, count launches per launch configuration; so the plan
replays ncu's filter on the phase-1 launch sequence to know which launches each run will
profile, and uses more than one run when a wanted launch would be shadowed by earlier launches
of the same shape (template variants of one function, or other functions, see below).
Pure: DataFrame in, frozen records out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pandas as pd

# Does ncu's per-launch-config key include the kernel's name? Its documentation names grid,
# block and shared memory only, and a third-party run reports the name is not part of it; so by
# default launches of different functions with the same shape count together. Setting this to
# True (once verified on a GPU) lets the plan need fewer/cheaper runs; coverage is checked after
# the run either way.
LAUNCH_CONFIG_KEY_HAS_NAME = False

# Seconds per profiled launch on the H200 (GPU-NOTES: full set 2.3 s, basic 0.5 s, duration only
# 0.2 s). The targeted section list sits between basic and full; 1.5 s is an estimate until the
# benchmark (benchmarks/bench_profile.py) measures it.
SECONDS_PER_LAUNCH = {"full": 2.3, "targeted": 1.5, "basic": 0.5, "duration": 0.2}

_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|unsigned)\)(?=-?\w)")
_QUALIFIER = re.compile(r"(?:[A-Za-z_]\w*|<unnamed>|\(anonymous namespace\))::")


def function_name(name: str) -> str:
    """The bare function name of a demangled kernel name, as ncu's `function` name base and nsys's
    short name have it: 'void at::native::f<4, g<float>>(int, T2)' -> 'f'."""
    text = name.strip()
    for opener, closer in (("(", ")"), ("<", ">")):   # parameters, then template arguments
        if text.endswith(closer):
            start = _matching_open(text, opener, closer)
            if start > 0:
                text = text[:start]
    depth, cut = 0, 0
    for i, ch in enumerate(text):                     # the last '::' or space outside brackets
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif depth == 0 and (ch == " " or (ch == ":" and text[i - 1:i] == ":")):
            cut = i + 1
    return text[cut:] or name


def _matching_open(text: str, opener: str, closer: str) -> int:
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == closer:
            depth += 1
        elif text[i] == opener:
            depth -= 1
            if depth == 0:
                return i
    return -1


def normalized(name: str) -> str:
    """A demangled name with the spelling differences between nsys and ncu removed (namespace
    qualifiers, casts on template integers, spaces), to match a profiled kernel to its signature."""
    text = _CAST.sub("", str(name))
    text = _QUALIFIER.sub("", text)
    return re.sub(r"\s+", "", text)


@dataclass(frozen=True)
class Signature:
    name: str
    function: str
    grid: str
    block: str
    launches: int
    total_ns: float
    share: float            # of all kernel time in the timeline
    first: int              # index of the first launch in launch order


@dataclass(frozen=True)
class Round:
    """One ncu run: these functions, the first `launch_count` launches of each shape."""
    functions: tuple[str, ...]
    launch_count: int
    wanted: tuple[Signature, ...]
    launches: int           # launches this run is expected to profile (wanted and others)
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    signatures: tuple[Signature, ...]      # chosen, most time first
    rounds: tuple[Round, ...]
    uncovered: tuple[Signature, ...]       # chosen but not reachable within the run limits
    total_ns: float
    total_launches: int
    selected_share: float                  # chosen signatures' share of kernel time
    planned_share: float                   # share the rounds are expected to profile
    estimated_s: float                     # ncu runs, program start-up included
    full_estimated_s: float                # `ncu --set full` on every launch, for comparison
    notes: tuple[str, ...] = field(default=())

    @property
    def launches(self) -> int:
        return sum(r.launches for r in self.rounds)


@dataclass(frozen=True)
class PlanSettings:
    coverage: float = 0.9
    max_kernels: int = 40
    kernel_regex: str | None = None
    max_launch_count: int = 4
    max_rounds: int = 3
    program_s: float = 10.0                # one run of the program outside ncu (phase 1 measures it)
    seconds_per_launch: float = SECONDS_PER_LAUNCH["targeted"]
    key_has_name: bool = LAUNCH_CONFIG_KEY_HAS_NAME


def kernel_launches(timeline: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows in launch order with a `function` column (nsys short name, else parsed)."""
    k = timeline[timeline["kind"] == "kernel"] if "kind" in timeline else timeline
    k = k.copy()
    for column in ("grid", "block"):
        k[column] = k[column].astype(str) if column in k else ""
    order = None
    if "api_start_ns" in k and (k["api_start_ns"].fillna(-1) >= 0).all():
        order = "api_start_ns"        # ncu counts launches in API order, not GPU start order
    elif "start_ns" in k:
        order = "start_ns"
    if order:
        k = k.sort_values(order, kind="stable")
    names = k["name"].astype(str)
    short = k["short_name"].fillna("").astype(str) if "short_name" in k else pd.Series("", index=k.index)
    k["function"] = [s if s else function_name(n) for s, n in zip(short, names)]
    k["duration_ns"] = pd.to_numeric(k["duration_ns"], errors="coerce").fillna(0.0)
    return k.reset_index(drop=True)


def signatures(launches: pd.DataFrame) -> list[Signature]:
    total = float(launches["duration_ns"].sum())
    rows = []
    keyed = launches.assign(_pos=range(len(launches)))
    for (name, grid, block), group in keyed.groupby(["name", "grid", "block"], sort=False):
        ns = float(group["duration_ns"].sum())
        rows.append(Signature(str(name), str(group["function"].iloc[0]), str(grid), str(block), len(group), ns,
                              ns / total if total else 0.0, int(group["_pos"].iloc[0])))
    return sorted(rows, key=lambda s: (-s.total_ns, s.first))


def choose(sigs: Sequence[Signature], coverage: float, max_kernels: int, kernel_regex: str | None) -> list[Signature]:
    """The most expensive signatures until `coverage` of the (matching) kernel time is reached."""
    if kernel_regex:
        pattern = re.compile(kernel_regex)
        sigs = [s for s in sigs if pattern.search(s.name) or pattern.search(s.function)]
    goal = coverage * sum(s.total_ns for s in sigs)
    chosen: list[Signature] = []
    covered = 0.0
    for s in sigs:
        if len(chosen) >= max_kernels or (covered >= goal and chosen):
            break
        chosen.append(s)
        covered += s.total_ns
    return chosen


def _ranks(launches: pd.DataFrame, functions: set[str], wanted: Sequence[Signature],
           key_has_name: bool) -> tuple[dict[Signature, int], pd.DataFrame]:
    """For each wanted signature, how many launches ncu sees in its launch-configuration group
    before the signature's first launch (0 = it is the first), counting only launches of
    `functions` (ncu's name filter applies first)."""
    seen = launches[launches["function"].isin(functions)].copy()
    keys = ["function", "grid", "block"] if key_has_name else ["grid", "block"]
    seen["_rank"] = seen.groupby(keys, sort=False).cumcount()
    rank_at = dict(zip(seen.index, seen["_rank"]))
    return {s: int(rank_at[s.first]) for s in wanted}, seen


def _round_for(launches: pd.DataFrame, pending: Sequence[Signature], count: int, settings: PlanSettings) -> Round:
    functions = {s.function for s in pending}
    ranks, seen = _ranks(launches, functions, pending, settings.key_has_name)
    wanted = tuple(s for s in pending if ranks[s] < count)
    # Each (function, shape) group yields at most `count` results whichever key ncu uses; shared
    # memory, which the timeline lacks, can only split groups further (a small underestimate).
    sizes = seen.groupby(["function", "grid", "block"], sort=False).size()
    expected = int(sizes.clip(upper=count).sum())
    return Round(tuple(sorted(functions)), count, wanted, expected)


def _round_s(r: Round, settings: PlanSettings) -> float:
    return settings.program_s + r.launches * settings.seconds_per_launch


def plan_rounds(launches: pd.DataFrame, chosen: Sequence[Signature],
                settings: PlanSettings) -> tuple[list[Round], list[Signature]]:
    """Cover `chosen` with as few profiled launches and program runs as the cost model finds:
    for each run try every launch count, looking one run ahead for what it leaves."""
    pending, rounds = list(chosen), list[Round]()
    while pending and len(rounds) < settings.max_rounds:
        best: tuple[float, Round] | None = None
        for count in range(1, settings.max_launch_count + 1):
            r = _round_for(launches, pending, count, settings)
            if not r.wanted:
                continue
            cost = _round_s(r, settings)
            left = [s for s in pending if s not in r.wanted]
            if left and len(rounds) + 1 < settings.max_rounds:
                follow = _round_for(launches, left, settings.max_launch_count, settings)
                cost += _round_s(follow, settings)
                left = [s for s in left if s not in follow.wanted]
            # a signature left unprofiled costs as much as profiling all its launches: coverage wins
            cost += sum(s.launches for s in left) * SECONDS_PER_LAUNCH["full"]
            if best is None or cost < best[0] - 1e-9:
                best = (cost, r)
        if best is None:
            break
        rounds.append(best[1])
        pending = [s for s in pending if s not in best[1].wanted]
    return rounds, pending


def make_plan(timeline: pd.DataFrame, settings: PlanSettings = PlanSettings(),
              argv_for: Callable[[int, Round], Sequence[str]] | None = None) -> Plan:
    """The plan for a phase-1 timeline. `argv_for(i, round)` builds round i's ncu command."""
    launches = kernel_launches(timeline)
    if launches.empty:
        raise ValueError("the timeline holds no kernel launch")
    sigs = signatures(launches)
    total = float(launches["duration_ns"].sum())
    chosen = choose(sigs, settings.coverage, settings.max_kernels, settings.kernel_regex)
    rounds, uncovered = plan_rounds(launches, chosen, settings)
    if argv_for is not None:
        rounds = [Round(r.functions, r.launch_count, r.wanted, r.launches, tuple(argv_for(i, r)))
                  for i, r in enumerate(rounds, start=1)]
    share = lambda items: sum(s.total_ns for s in items) / total if total else 0.0  # noqa: E731
    notes = []
    if settings.kernel_regex and not chosen:
        notes.append(f"no kernel matches --kernel {settings.kernel_regex!r}")
    if uncovered:
        notes.append(f"{len(uncovered)} chosen signature(s) ({share(uncovered):.1%} of kernel time) are shadowed by "
                     f"earlier launches of the same shape beyond {settings.max_rounds} ncu run(s) and will not be profiled")
    estimated = sum(_round_s(r, settings) for r in rounds)
    full = settings.program_s + len(launches) * SECONDS_PER_LAUNCH["full"]
    return Plan(tuple(chosen), tuple(rounds), tuple(uncovered), total, len(launches), share(chosen),
                share([s for r in rounds for s in r.wanted]), estimated, full, tuple(notes))


def in_nvtx_range(timeline: pd.DataFrame, nvtx_ranges: pd.DataFrame, expression: str) -> pd.DataFrame:
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
        return {"name": s.name, "function": s.function, "grid": s.grid, "block": s.block, "launches": s.launches,
                "total_ns": s.total_ns, "share": round(s.share, 6)}
    return {
        "kernel_launches": plan.total_launches, "kernel_time_ns": plan.total_ns,
        "selected_share": round(plan.selected_share, 6), "planned_share": round(plan.planned_share, 6),
        "estimated_s": round(plan.estimated_s, 1), "full_set_estimated_s": round(plan.full_estimated_s, 1),
        "signatures": [sig(s) for s in plan.signatures],
        "rounds": [{"functions": list(r.functions), "launch_count": r.launch_count, "expected_launches": r.launches,
                    "wanted": [sig(s) for s in r.wanted], "argv": list(r.argv)} for r in plan.rounds],
        "uncovered": [sig(s) for s in plan.uncovered], "notes": list(plan.notes),
    }
