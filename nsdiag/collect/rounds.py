"""Phase 2's ncu runs: which launches a run with a name filter and a per-launch-configuration
count reaches (ncu's filter replayed on the launch sequence), what a run costs, and the fewest
runs and launches that reach the chosen signatures.

ncu filters launches by kernel name and, with `--filter-mode per-launch-config --launch-skip S
--launch-count N`, skips the first S launches of every launch configuration of each matching name
and profiles the next N (the skip and count apply per configuration: Nsight Compute's own usage
examples). With mangled names (nsys gives them) every template instance has its own name and one
run reaches every chosen signature; with bare function names template variants share a name and
can shadow each other, and more runs or higher counts reach them. Where the launches mark an
analysed region (`in_region`: a profiler range, steady-state iterations), a run must reach one
of a signature's launches inside it: the skip steps over the warm-up launches of the same
configuration. Pure: DataFrame in, frozen records out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from nsdiag.collect.cost import SECONDS_PER_LAUNCH as SECONDS_PER_LAUNCH  # measured: cost.py
from nsdiag.model.launches import Signature

# Verified on the H200 with ncu 2025.3.1 (tools/probes/probe_ncu_filters.sh): per-launch-config
# counts launches per (kernel name in the chosen name base, launch configuration), and launches
# made before cudaProfilerStart are not counted under --profile-from-start off.
LAUNCH_CONFIG_KEY_HAS_NAME = True


@dataclass(frozen=True)
class Round:
    """One ncu run: kernels of these names, launches `launch_skip` to `launch_skip +
    launch_count` of each shape."""

    names: tuple[str, ...]
    launch_count: int
    wanted: tuple[Signature, ...]
    launches: int  # launches this run is expected to profile (wanted and others)
    argv: tuple[str, ...] = ()
    profiled: tuple[Signature, ...] = ()  # every signature it reaches: wanted and other shapes
    launch_skip: int = 0


@dataclass(frozen=True)
class PlanSettings:
    """What the plan aims at and may spend: coverage and the cap on signatures (choosing), launch
    counts and runs per plan (rounds), and the cost model's inputs."""

    coverage: float = 0.9
    max_kernels: int = 100
    kernel_regex: str | None = None
    max_launch_count: int = 4
    max_rounds: int = 3
    program_s: float = 10.0  # one run of the program outside ncu (phase 1 measures it)
    seconds_per_launch: float = SECONDS_PER_LAUNCH["rules"]
    key_has_name: bool = LAUNCH_CONFIG_KEY_HAS_NAME


def _seen(launches: pd.DataFrame, names: set[str], key_has_name: bool) -> pd.DataFrame:
    """The launches ncu's name filter lets through, each with its rank in its launch
    configuration (0 = the configuration's first)."""
    seen = launches[launches["filter_name"].isin(names)].copy()
    keys = ["filter_name", "grid", "block"] if key_has_name else ["grid", "block"]
    seen["_rank"] = seen.groupby(keys, sort=False).cumcount()
    return seen


def _ranks(
    launches: pd.DataFrame, names: set[str], sigs: Sequence[Signature], key_has_name: bool
) -> tuple[dict[Signature, tuple[int, ...]], pd.DataFrame]:
    """For each signature of `names`: the ranks, in their launch-configuration groups, of its
    launches in the region (its first launch's rank is how many ncu must skip to reach it),
    counting only launches of `names` (ncu's name filter applies first)."""
    seen = _seen(launches, names, key_has_name)
    rank_at = dict(zip(seen.index, seen["_rank"], strict=True))
    return {
        s: tuple(int(rank_at[p]) for p in (s.positions or (s.first,)) if p in rank_at)
        for s in sigs
        if s.filter_name in names
    }, seen


def _reached(ranks: Sequence[int], skip: int, count: int) -> bool:
    return any(skip <= r < skip + count for r in ranks)


def round_for(
    launches: pd.DataFrame,
    pending: Sequence[Signature],
    count: int,
    settings: PlanSettings,
    every: Sequence[Signature] = (),
    skip: int = 0,
) -> Round:
    """One run profiling `pending` by their names, launches `skip` to `skip + count` per launch
    configuration; `profiled` also lists the signatures of `every` it reaches along the way."""
    names = {s.filter_name for s in pending}
    ranks, seen = _ranks(launches, names, [*pending, *every], settings.key_has_name)
    wanted = tuple(s for s in pending if _reached(ranks[s], skip, count))
    profiled = tuple(
        s
        for s in dict.fromkeys([*pending, *every])
        if s in ranks and _reached(ranks[s], skip, count)
    )
    # Each (name, shape) group yields at most `count` results after its first `skip` whichever
    # key ncu uses; shared memory, which the timeline lacks, can only split groups further (a
    # small underestimate).
    sizes = seen.groupby(["filter_name", "grid", "block"], sort=False).size()
    expected = int((sizes - skip).clip(lower=0, upper=count).sum())
    return Round(tuple(sorted(names)), count, wanted, expected, (), profiled, skip)


def launch_positions(
    launches: pd.DataFrame, r: Round, key_has_name: bool = LAUNCH_CONFIG_KEY_HAS_NAME
) -> list[int]:
    """Positions (in launch order) of the launches ncu profiles in round `r`: per launch
    configuration of the round's names, launches `launch_skip` to `launch_skip + launch_count`."""
    seen = _seen(launches, set(r.names), key_has_name)
    chosen = (seen["_rank"] >= r.launch_skip) & (seen["_rank"] < r.launch_skip + r.launch_count)
    return sorted(int(i) for i in seen.index[chosen])


def _skips(
    launches: pd.DataFrame, pending: Sequence[Signature], settings: PlanSettings
) -> list[int]:
    """The launch skips worth trying: 0, and where the launches mark a region outside which
    some launches lie, the rank of each pending signature's first launch in the region."""
    if "in_region" not in launches or launches["in_region"].astype(bool).all():
        return [0]
    ranks, _ = _ranks(launches, {s.filter_name for s in pending}, pending, settings.key_has_name)
    return sorted({0, *(min(r) for r in ranks.values() if r)})


def round_s(r: Round, settings: PlanSettings) -> float:
    """A run's estimated seconds: the program's own run time plus each profiled launch."""
    return settings.program_s + r.launches * settings.seconds_per_launch


def _unprofiled_s(left: Sequence[Signature]) -> float:
    """A signature left unprofiled costs as much as profiling all its launches: coverage wins."""
    return sum(s.launches for s in left) * SECONDS_PER_LAUNCH["full"]


def _follow_s(launches: pd.DataFrame, left: Sequence[Signature], settings: PlanSettings) -> float:
    """What profiling `left` costs in one more run, at its cheapest launch count (one run ahead
    only)."""
    if not left:
        return 0.0
    costs = []
    for skip in _skips(launches, left, settings):
        for count in range(1, settings.max_launch_count + 1):
            r = round_for(launches, left, count, settings, skip=skip)
            left_out = [s for s in left if s not in r.wanted]
            costs.append(round_s(r, settings) + _unprofiled_s(left_out))
    return min(costs)


def plan_rounds(
    launches: pd.DataFrame, chosen: Sequence[Signature], settings: PlanSettings
) -> tuple[list[Round], list[Signature]]:
    """Cover `chosen` with as few profiled launches and program runs as the cost model finds:
    for each run try every launch skip and count, looking one run ahead for what it leaves."""
    pending, rounds = list(chosen), list[Round]()
    while pending and len(rounds) < settings.max_rounds:
        best: tuple[float, Round] | None = None
        tries = [
            (skip, count)
            for skip in _skips(launches, pending, settings)
            for count in range(1, settings.max_launch_count + 1)
        ]
        for skip, count in tries:
            r = round_for(launches, pending, count, settings, skip=skip)
            if not r.wanted:
                continue
            left = [s for s in pending if s not in r.wanted]
            cost = round_s(r, settings) + (
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
