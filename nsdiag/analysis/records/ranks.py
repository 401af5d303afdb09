"""Ranks of a distributed run: each rank's step split into computation, communication, exposed
communication, wait and idle time, and why the late rank is late (program/ranks.py and
program/lateness.py compute them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: model/ranks.py reads tables with pandas
    from nsdiag.model.meta import Rank

EXPLAINED = 0.5  # a cause that accounts for half the lateness or more explains it


@dataclass(frozen=True)
class Lateness:
    """What the late rank does more than the median other rank, ns per iteration."""

    rank: int  # the rank that delays the others most
    delay_ns: float  # how late it reaches the collectives (after the next-latest rank)
    last_at: int  # collectives it reached last
    collectives: int  # collectives in the region
    share: float  # its part of the delays every rank caused (1: only it ever arrives last)
    stall_ns: float  # more host-stall time (gaps >= STALL_NS with no CUDA call)
    largest_stall_ns: float  # its longest host stall in the region
    others_stall_ns: float  # the median other rank's host-stall time
    extra_compute_ns: float  # more GPU computation
    extra_idle_ns: float  # more GPU idle time
    ranges: tuple[tuple[str, float], ...] = ()  # NVTX ranges it spends longer in, longest first

    def _largest(self) -> tuple[str, float]:
        parts = {
            "host-stall": self.stall_ns,
            "extra-gpu-work": self.extra_compute_ns,
            "nvtx-range": self.ranges[0][1] if self.ranges else 0.0,
        }
        return max(parts.items(), key=lambda kv: kv[1])

    @property
    def explained(self) -> float:
        """The largest cause's share of the delay."""
        return self._largest()[1] / self.delay_ns if self.delay_ns > 0 else 0.0

    @property
    def cause(self) -> str | None:
        """host-stall, extra-gpu-work or nvtx-range: the largest one, when it explains at least
        half of the delay; None when nothing does (the host is slower throughout)."""
        return self._largest()[0] if self.explained >= EXPLAINED else None

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "delay_ns": self.delay_ns,
            "last_at": self.last_at,
            "collectives": self.collectives,
            "share": self.share,
            "stall_ns": self.stall_ns,
            "largest_stall_ns": self.largest_stall_ns,
            "others_stall_ns": self.others_stall_ns,
            "extra_compute_ns": self.extra_compute_ns,
            "extra_idle_ns": self.extra_idle_ns,
            "ranges": [{"name": n, "extra_ns": v} for n, v in self.ranges],
            "cause": self.cause,
        }


@dataclass(frozen=True)
class RankStep:
    """One rank's iteration, ns per iteration."""

    rank: Rank
    wall_ns: float  # the iteration's wall time (ranks move in step: the same on every rank)
    compute_ns: float
    communication_ns: float
    exposed_ns: float
    wait_ns: float
    idle_ns: float
    delay_caused_ns: float  # how late it reached collectives after every other rank
    late: bool = False  # the straggler

    @property
    def exposed_transfer_ns(self) -> float:
        return max(self.exposed_ns - self.wait_ns, 0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.rank.to_json(),
            "step_ns": self.wall_ns,
            "compute_ns": self.compute_ns,
            "communication_ns": self.communication_ns,
            "exposed_communication_ns": self.exposed_ns,
            "wait_ns": self.wait_ns,
            "idle_ns": self.idle_ns,
            "delay_caused_ns": self.delay_caused_ns,
            "late": self.late,
        }


@dataclass(frozen=True)
class RankAnalysis:
    steps: tuple[RankStep, ...]  # by rank
    iterations: int  # what the per-iteration figures divide by (1: the whole region)
    collectives: int  # matched collectives in the region (each counted once)
    late_rank: int | None  # the straggler: the rank causing CONSISTENT_SHARE of the delays
    lateness: Lateness | None = None  # what the rank that delays most does more than the others

    def step(self, rank: int) -> RankStep | None:
        return next((s for s in self.steps if s.rank.rank == rank), None)

    def others(self, rank: int) -> list[RankStep]:
        return [s for s in self.steps if s.rank.rank != rank]

    def to_json(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations,
            "collectives": self.collectives,
            "late_rank": self.late_rank,
            **({"lateness": self.lateness.to_json()} if self.lateness is not None else {}),
            "ranks": [s.to_json() for s in self.steps],
        }
