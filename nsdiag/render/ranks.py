"""The table of ranks every renderer shows for a distributed run: per rank, its step split into
computation, communication, exposed communication, waiting for late ranks and idle time, the
late rank (the straggler) marked."""

from __future__ import annotations

from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.analysis.records.ranks import RankAnalysis
from nsdiag.render import fmt

HEADERS = (
    "rank",
    "device",
    "host",
    "step",
    "compute",
    "communication",
    "exposed",
    "waiting",
    "idle",
    "",
)
MAX_ROWS = 32  # larger runs: the late rank, the extremes and a count of the rest


def caption(diagnosis: Diagnosis) -> str:
    ranks = diagnosis.ranks
    if ranks is None:
        return ""
    per = "per iteration" if ranks.iterations > 1 else "over the analysed region"
    return (
        f"{len(ranks.steps)} ranks, times {per}: exposed = communication while the GPU "
        f"computes nothing, waiting = the part of it spent waiting for a late rank"
        f"{_lateness(ranks)}"
    )


_CAUSES = {
    "host-stall": "its host stalls",
    "extra-gpu-work": "its GPU computes more",
    "nvtx-range": "it spends longer in an NVTX range",
}


def _lateness(ranks: RankAnalysis) -> str:
    late = ranks.lateness
    if late is None:
        return ""
    arrives = f"arrives last at {late.last_at} of {late.collectives} collectives"
    if ranks.late_rank is None:
        return f"; no rank is late consistently (the latest {arrives})"
    if late.cause is None:
        return (
            f"; rank {ranks.late_rank} {arrives} (straggler), with nothing on it to explain "
            "it: its host runs the same work slower throughout"
        )
    return f"; rank {ranks.late_rank} {arrives} (straggler: {_CAUSES[late.cause]})"


def rows(diagnosis: Diagnosis) -> list[list[str]]:
    """One row of display strings per rank (HEADERS), at most MAX_ROWS: with more ranks, those
    that wait least and most, and the straggler."""
    ranks = diagnosis.ranks
    if ranks is None:
        return []
    steps = list(ranks.steps)
    if len(steps) > MAX_ROWS:
        by_wait = sorted(steps, key=lambda s: s.wait_ns)
        keep = {id(s) for s in by_wait[: MAX_ROWS // 2] + by_wait[-(MAX_ROWS // 2) :]}
        keep |= {id(s) for s in steps if s.late}
        steps = [s for s in steps if id(s) in keep]
    return [
        [
            str(s.rank.rank),
            str(s.rank.device),
            s.rank.host,
            fmt.time_ns(s.wall_ns),
            fmt.time_ns(s.compute_ns),
            fmt.time_ns(s.communication_ns),
            fmt.time_ns(s.exposed_ns),
            fmt.time_ns(s.wait_ns),
            fmt.time_ns(s.idle_ns),
            "straggler" if s.late else "",
        ]
        for s in steps
    ]


def left_out(diagnosis: Diagnosis) -> int:
    ranks = diagnosis.ranks
    return max(len(ranks.steps) - len(rows(diagnosis)), 0) if ranks is not None else 0
