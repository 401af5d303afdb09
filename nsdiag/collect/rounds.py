"""Phase 2's ncu runs: which launches a run with a name filter and a per-launch-configuration
count reaches (ncu's filter replayed on the launch sequence), what a run costs, and the fewest
runs and launches that reach the chosen signatures.

ncu filters launches by kernel name and, with `--filter-mode per-launch-config --launch-skip S
--launch-count N`, skips the first S launches of every launch configuration of each matching name
and profiles the next N (the skip and count apply per configuration: Nsight Compute's own usage
examples). With mangled names (nsys gives them) every template instance has its own name and one
run reaches every chosen signature; with bare function names template variants share a name and
can shadow each other, and more runs or higher counts reach them. Where the launches mark an
analysed region (`in_region`: a profiler range, steady-state iterations), a run reaches a
signature at the earliest launch of its configuration (name, grid, block), warm-up included:
ncu replays the launch by itself, caches flushed, so where in the run it came does not change
its metrics, and a profiled launch costs more the later in the run it comes (the decode loop on
the H200: 0.7 s a launch in its first request, 5 s at the 27,275th launch and up to 15 s later,
tools/probes/probe_profiled_launch_cost.py). A signature whose configuration's launches fall in
duration groups (`variants` > 1: one shape, different work) must still be reached inside the
region. Pure: DataFrame in, frozen records out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from nsdiag.collect import launch_codes
from nsdiag.collect.cost import SECONDS_PER_INTERCEPTED
from nsdiag.collect.cost import SECONDS_PER_LAUNCH as SECONDS_PER_LAUNCH  # measured: cost.py
from nsdiag.collect.early_stop import reach_of
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
    reach: float = 1.0  # share of the program's run before its last planned launch (early_stop)
    # ncu --launch-skip-before-match: launches of any kernel ncu ignores before it starts
    # matching (and counting per configuration); the region's first launch, so that one run with
    # --launch-count 1 reaches every signature the region's first iteration launches
    skip_before_match: int = 0
    # launches ncu intercepts in the run: every launch up to its last planned one (all of them
    # with --run-to-end), each costing SECONDS_PER_INTERCEPTED whether profiled or not
    intercepted: int = 0


# What leaving a chosen signature unprofiled costs, in runs of the program per share of GPU time:
# 10% of the region's kernel time is worth one more ncu run of the program. Before, a signature
# left out cost as much as profiling every launch of it under the full set, so the planner took
# a second run (a whole program start under ncu, 14-28 s on the H200) for 2% of GPU time.
UNPROFILED_RUNS_PER_SHARE = 10.0
# A kernel is declined for its other shapes' launches only up to this share of GPU time: however
# cheap a program run is (a short script's), one that matters more is profiled.
DECLINE_MAX_SHARE = 0.03


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
    seconds_per_intercepted: float = SECONDS_PER_INTERCEPTED
    key_has_name: bool = LAUNCH_CONFIG_KEY_HAS_NAME
    end_early: bool = True  # a run ends after its last planned launch (early_stop.py)
    # --launch-skip-before-match candidates: only where ncu counts the launches phase 1 lists
    # (from the program's start, one process)
    before_match: bool = True
    # what leaving a chosen signature unprofiled costs, in runs of the program per share of GPU
    # time (see UNPROFILED_RUNS_PER_SHARE); a large value makes coverage win, the old policy
    unprofiled_runs_per_share: float = UNPROFILED_RUNS_PER_SHARE
    # a signature of one duration group is reached at any launch of its configuration, warm-up
    # included (the module's docstring); False: only at its launches in the region
    earliest_of_config: bool = True


# The planner weighs thousands of candidate runs over the same launches and the same few name
# sets: the launches' codes are made once per frame, and the filtered, ranked launches once per
# (names, key, after). The frame itself is kept with its codes, so that its id is not reused.
_CODES: dict[int, tuple[pd.DataFrame, launch_codes.Codes]] = {}
_SEEN_CACHE: dict[tuple[int, frozenset[str], bool, int], launch_codes.Seen] = {}
_RANKS_CACHE: dict[tuple[int, Signature, bool], np.ndarray] = {}


def clear_cache() -> None:
    _CODES.clear()
    _SEEN_CACHE.clear()
    _RANKS_CACHE.clear()


def codes(launches: pd.DataFrame) -> launch_codes.Codes:
    """The launches' codes (launch_codes.py), made once per frame."""
    hit = _CODES.get(id(launches))
    if hit is not None and hit[0] is launches:
        return hit[1]
    if len(_CODES) > 8:
        clear_cache()
    made = launch_codes.encode(launches)
    _CODES[id(launches)] = (launches, made)
    return made


def _seen(
    launches: pd.DataFrame, names: set[str], key_has_name: bool, after: int = 0
) -> launch_codes.Seen:
    """The launches ncu's name filter lets through (from launch `after` on: ncu's
    --launch-skip-before-match), each with its rank in its launch configuration (0 = the
    configuration's first)."""
    key = (id(launches), frozenset(names), key_has_name, after)
    hit = _SEEN_CACHE.get(key)
    if hit is None:
        if len(_SEEN_CACHE) > 4096:
            _SEEN_CACHE.clear()
            _RANKS_CACHE.clear()
        hit = _SEEN_CACHE[key] = launch_codes.ranked(codes(launches), names, key_has_name, after)
    return hit


def _ranks(
    launches: pd.DataFrame,
    names: set[str],
    sigs: Sequence[Signature],
    key_has_name: bool,
    after: int = 0,
    earliest_of_config: bool = False,
) -> tuple[dict[Signature, np.ndarray], launch_codes.Seen]:
    """For each signature of `names`: the ranks (ascending), in their launch-configuration groups,
    of the launches that stand for it (its first's rank is how many ncu must skip to reach it),
    counting only launches of `names` (ncu's name filter applies first) from launch `after` on.
    Its launches in the region stand for it; with `earliest_of_config` (ncu's key has the name),
    every launch of its configuration does for a signature of one duration group whose
    configuration launches no other kernel (template variants can share a bare name)."""
    seen = _seen(launches, names, key_has_name, after)
    coded = codes(launches)
    any_of_config = earliest_of_config and key_has_name
    per_key = np.bincount(coded.key[seen.positions]) if any_of_config else None
    ranks = {}
    for s in sigs:
        if s.filter_name in names:
            key = (id(seen.rank_at), s, any_of_config)
            hit = _RANKS_CACHE.get(key)
            if hit is None:
                k = int(coded.key[s.positions[0] if s.positions else s.first])
                if per_key is not None and s.variants == 1 and coded.one_kernel[k]:
                    hit = np.arange(int(per_key[k]) if k < len(per_key) else 0, dtype=np.int64)
                else:
                    at = seen.rank_at[np.asarray(s.positions or (s.first,), dtype=np.int64)]
                    hit = np.sort(at[at >= 0])
                _RANKS_CACHE[key] = hit
            ranks[s] = hit
    return ranks, seen


def _reached(ranks: np.ndarray, skip: int, count: int) -> bool:
    """Whether a launch of these ranks (ascending) falls in skip .. skip + count - 1."""
    i = int(np.searchsorted(ranks, skip))
    return i < len(ranks) and int(ranks[i]) < skip + count


def round_for(
    launches: pd.DataFrame,
    pending: Sequence[Signature],
    count: int,
    settings: PlanSettings,
    every: Sequence[Signature] = (),
    skip: int = 0,
    after: int = 0,
) -> Round:
    """One run profiling `pending` by their names, launches `skip` to `skip + count` per launch
    configuration (counted from launch `after` on); `profiled` also lists the signatures of
    `every` it reaches along the way."""
    names = {s.filter_name for s in pending}
    ranks, seen = _ranks(
        launches,
        names,
        [*pending, *every],
        settings.key_has_name,
        after,
        settings.earliest_of_config,
    )
    wanted = tuple(s for s in pending if _reached(ranks[s], skip, count))
    profiled = tuple(
        s
        for s in dict.fromkeys([*pending, *every])
        if s in ranks and _reached(ranks[s], skip, count)
    )
    # Each (name, shape) group yields at most `count` results after its first `skip` whichever
    # key ncu uses; shared memory, which the timeline lacks, can only split groups further (a
    # small underestimate).
    expected = int(np.clip(seen.sizes - skip, 0, count).sum())
    chosen = seen.positions[(seen.rank >= skip) & (seen.rank < skip + count)]
    coded = codes(launches)
    if settings.end_early:
        share = reach_of(coded.end, chosen, coded.last_end)
        intercepted = int(chosen.max()) + 1 if len(chosen) else len(launches)
    else:
        share, intercepted = 1.0, len(launches)
    return Round(
        tuple(sorted(names)),
        count,
        wanted,
        expected,
        (),
        profiled,
        skip,
        share,
        after,
        intercepted,
    )


def launch_positions(
    launches: pd.DataFrame, r: Round, key_has_name: bool = LAUNCH_CONFIG_KEY_HAS_NAME
) -> list[int]:
    """Positions (in launch order) of the launches ncu profiles in round `r`: per launch
    configuration of the round's names, launches `launch_skip` to `launch_skip + launch_count`."""
    seen = _seen(launches, set(r.names), key_has_name, r.skip_before_match)
    chosen = (seen.rank >= r.launch_skip) & (seen.rank < r.launch_skip + r.launch_count)
    return [int(i) for i in seen.positions[chosen]]


def _skips(
    launches: pd.DataFrame, pending: Sequence[Signature], settings: PlanSettings
) -> list[tuple[int, int]]:
    """The (launch skip, skip before match) pairs worth trying: no skip, and where the launches
    mark a region outside which some launches lie, the rank of each pending signature's first
    launch in the region, and (settings.before_match) no skip but the launches before the
    region's first ignored."""
    region = codes(launches)
    if not region.region_partial:
        return [(0, 0)]
    ranks, _ = _ranks(
        launches,
        {s.filter_name for s in pending},
        pending,
        settings.key_has_name,
        earliest_of_config=settings.earliest_of_config,
    )
    pairs = [(skip, 0) for skip in sorted({0, *(int(r[0]) for r in ranks.values() if len(r))})]
    if settings.before_match and region.first_inside > 0:
        pairs.append((0, region.first_inside))
    return pairs


def round_s(r: Round, settings: PlanSettings) -> float:
    """A run's estimated seconds: the program's own run time up to its last planned launch (to
    the end with --run-to-end), ncu's interception of every launch until then, and each
    profiled launch's replay."""
    return (
        settings.program_s * r.reach
        + r.intercepted * settings.seconds_per_intercepted
        + r.launches * settings.seconds_per_launch
    )


def _unprofiled_s(left: Sequence[Signature], settings: PlanSettings) -> float:
    """What leaving `left` unprofiled costs: their share of GPU time in program runs."""
    return sum(s.share for s in left) * settings.unprofiled_runs_per_share * settings.program_s


def _follow_s(launches: pd.DataFrame, left: Sequence[Signature], settings: PlanSettings) -> float:
    """What profiling `left` costs in one more run, at its cheapest launch count (one run ahead
    only)."""
    if not left:
        return 0.0
    costs = []
    for skip, after in _skips(launches, left, settings):
        for count in range(1, settings.max_launch_count + 1):
            r = round_for(launches, left, count, settings, skip=skip, after=after)
            left_out = [s for s in left if s not in r.wanted]
            costs.append(round_s(r, settings) + _unprofiled_s(left_out, settings))
    return min(costs)


def plan_rounds(
    launches: pd.DataFrame, chosen: Sequence[Signature], settings: PlanSettings
) -> tuple[list[Round], list[Signature], list[Signature]]:
    """Cover `chosen` with as few profiled launches and program runs as the cost model finds:
    the cheapest of the greedy plans allowed 1, 2, ... `max_rounds` runs (a greedy plan allowed
    three can take three runs where one would have done: the Llama step on the H200 was planned
    as two runs of 29 and 40 launches, 88 s of ncu, where one run of 43 reaches all but 3.9% of
    its kernel time). The rounds, the signatures left unprofiled, and those of them declined
    for what their kernels' other shapes would cost (`_declined`)."""
    best: tuple[float, list[Round], list[Signature], list[Signature]] | None = None
    # reaching a signature at its configuration's earliest launch is a choice more, not always
    # a better greedy plan (a CNN's step: 27.1 s against 24.9 s inside the region): both are
    # planned and the cheaper kept
    policies = (True, False) if settings.earliest_of_config else (False,)
    for earliest in policies:
        tried = replace(settings, earliest_of_config=earliest)
        for most in range(1, settings.max_rounds + 1):
            rounds, left, declined = _greedy_rounds(launches, chosen, tried, most)
            total = sum(round_s(r, settings) for r in rounds) + _unprofiled_s(left, settings)
            if best is None or total < best[0] - 1e-9:
                best = (total, rounds, left, declined)
    assert best is not None
    return best[1], best[2], best[3]


def _greedy_rounds(
    launches: pd.DataFrame, chosen: Sequence[Signature], settings: PlanSettings, most: int
) -> tuple[list[Round], list[Signature], list[Signature]]:
    """At most `most` runs, each the cheapest of every launch skip and count, looking one run
    ahead for what it leaves; then without the kernels not worth their launches (`_declined`)."""
    pending, rounds, declined = list(chosen), list[Round](), list[Signature]()
    while pending and len(rounds) < most:
        best: tuple[float, Round] | None = None
        tries = [
            (skip, after, count)
            for skip, after in _skips(launches, pending, settings)
            for count in range(1, settings.max_launch_count + 1)
        ]
        for skip, after, count in tries:
            r = round_for(launches, pending, count, settings, skip=skip, after=after)
            if not r.wanted:
                continue
            left = [s for s in pending if s not in r.wanted]
            cost = round_s(r, settings) + (
                _follow_s(launches, left, settings)
                if len(rounds) + 1 < most
                else _unprofiled_s(left, settings)
            )
            if best is None or cost < best[0] - 1e-9:
                best = (cost, r)
        if best is None:
            break
        chosen_round = best[1]
        while names := _declined(launches, chosen_round, settings):
            declined += [s for s in pending if s.filter_name in names]
            pending = [s for s in pending if s.filter_name not in names]
            if not pending:
                break
            chosen_round = round_for(
                launches,
                pending,
                chosen_round.launch_count,
                settings,
                skip=chosen_round.launch_skip,
                after=chosen_round.skip_before_match,
            )
        if not pending or not chosen_round.wanted:
            break
        rounds.append(chosen_round)
        pending = [s for s in pending if s not in chosen_round.wanted]
    return rounds, [*pending, *declined], declined


def _declined(launches: pd.DataFrame, r: Round, settings: PlanSettings) -> set[str]:
    """Kernels (names) whose launches in round `r` cost more than leaving their wanted
    signatures unprofiled: ncu profiles every launch configuration of a name it matches, so a
    copy kernel chosen for one shape brings its other shapes along (ViT-B/16 bf16 on the H200:
    `direct_copy_kernel` 10 launches for 2.4% of GPU time, `bfloat16_copy_kernel` 9 for 1.9%, of
    the run's 53). Only names that bring other shapes along are weighed: a name profiled once
    per wanted signature keeps the choice by coverage."""
    positions = launch_positions(launches, r, settings.key_has_name)
    per_name = launches.loc[positions, "filter_name"].astype(str).value_counts()
    wanted: dict[str, list[Signature]] = {}
    for sig in r.wanted:
        wanted.setdefault(sig.filter_name, []).append(sig)
    return {
        name
        for name, sigs in wanted.items()
        if (n := int(per_name.get(name, 0))) > len(sigs)
        and sum(s.share for s in sigs) <= DECLINE_MAX_SHARE
        and n * settings.seconds_per_launch > _unprofiled_s(sigs, settings)
    }
