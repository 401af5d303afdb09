"""Where a profile's time went (status.json's `breakdown`): wall seconds per phase and per ncu
run, launches each ncu run intercepted and profiled, replay passes per profiled launch as ncu
reported them, second ncu runs, exports. Built from the status's steps, so a folder written
before the breakdown existed still gets one (without phases, intercepted launches or passes).
Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nsdiag.collect.cost import SECONDS_PER_PASS
from nsdiag.model.status import ProfileStatus

NCU_RUNS = ("1-durations", "2-")  # step names of ncu runs of the program (not its exports)
EXPORTS = ("export-", "1-timeline-export", "1-durations-export")
# phase 1's nsys runs: the second when the PyTorch ranges broke the program (phase1.py)
TIMELINE_WITHOUT_PYTORCH = "1-timeline-without-pytorch"
TIMELINE_STEPS = ("1-timeline", TIMELINE_WITHOUT_PYTORCH)


def passes_summary(passes: Sequence[int]) -> dict[str, int] | None:
    """One step's replay passes (one entry per profiled launch), as a status step records them."""
    if not passes:
        return None
    return {"min": min(passes), "max": max(passes), "total": sum(passes)}


def _is_ncu_run(name: str) -> bool:
    return name.startswith(NCU_RUNS) and "export" not in name


def _ncu_run(step: Mapping[str, Any]) -> dict[str, Any]:
    wall = float(step.get("wall_s") or 0.0)
    profiled = int(step.get("profiled") or 0)
    run: dict[str, Any] = {
        "step": step.get("name"),
        "ok": step.get("ok"),
        "wall_s": round(wall, 2),
        "launches_profiled": profiled,
    }
    if step.get("intercepted") is not None:
        run["launches_intercepted"] = step["intercepted"]
    if step.get("ended_early"):
        run["ended_early"] = True  # nsdiag ended the program before its end
        if step.get("ended_by"):  # planned, stalled or limit (collect/watch.py)
            run["ended_by"] = step["ended_by"]
    if step.get("attached_after_s") is not None:
        run["attached_after_s"] = step["attached_after_s"]  # its program started in phase 1
    passes = step.get("passes")
    if isinstance(passes, Mapping) and profiled:
        run["passes_per_launch"] = {
            "min": passes["min"],
            "max": passes["max"],
            "mean": round(passes["total"] / profiled, 1),
        }
        run["passes_total"] = passes["total"]
        per_pass = SECONDS_PER_PASS.get(str(step.get("collection")))
        if per_pass is not None:  # the cost model's share of the wall; the rest is the program
            replay = passes["total"] * per_pass
            run["replay_s_est"] = round(replay, 1)
            run["program_s_est"] = round(max(wall - replay, 0.0), 1)
    return run


def summarise(steps: Sequence[Mapping[str, Any]], phases: Mapping[str, float]) -> dict[str, Any]:
    """The breakdown of a run from its steps (in order) and its phases' wall seconds."""
    names = [str(s.get("name", "")) for s in steps]
    runs = [_ncu_run(s) for s, n in zip(steps, names, strict=True) if _is_ncu_run(n)]
    phase2 = [r for r in runs if str(r["step"]).startswith("2-")]
    # the last: phase 1 runs again without --pytorch when the PyTorch ranges broke the program
    timeline = next(
        (s for s, n in reversed(list(zip(steps, names, strict=True))) if n in TIMELINE_STEPS),
        None,
    )
    intercepted = [r["launches_intercepted"] for r in runs if "launches_intercepted" in r]
    exports = [
        float(s.get("wall_s") or 0.0)
        for s, n in zip(steps, names, strict=True)
        if n.startswith(EXPORTS)
    ]
    return {
        "phases_s": {k: round(v, 2) for k, v in phases.items()},
        "timeline_s": (
            round(float(timeline.get("wall_s") or 0.0), 2) if timeline is not None else None
        ),
        "ncu_runs": runs,
        "launches_intercepted": sum(intercepted) if intercepted else None,
        "launches_profiled": sum(r["launches_profiled"] for r in phase2),
        "second_ncu_runs": max(len(phase2) - 1, 0),
        "export_steps_s": round(sum(exports), 2),  # each export's own time; they overlap
    }


def of_status(status: ProfileStatus) -> dict[str, Any]:
    """The breakdown a status.json holds, or one rebuilt from its steps (older folders)."""
    if status.breakdown is not None:
        return dict(status.breakdown)
    return summarise(status.steps, {})
