"""`nsdiag profile --verbose`: where the time went, from the session's status.json (its
`breakdown`, or one rebuilt from the steps of an older folder)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PHASES = {
    "phase1": "phase 1 (timeline)",
    "plan": "planning phase 2",
    "phase2": "phase 2 (ncu)",
    "export": "exports",
    "tables": "tables",
}


# why nsdiag ended a run (collect/watch.py)
ENDED = {
    "planned": "ended once its plan was met",
    "stalled": "ended when its planned launches stopped coming",
    "limit": "ended at phase 2's limit",
}


def _run_line(run: Mapping[str, Any]) -> str:
    parts = [
        f"{run.get('wall_s', 0):.1f} s",
        f"{run.get('launches_profiled', 0)} launches profiled",
    ]
    if run.get("launches_intercepted") is not None:
        parts[-1] += f" of {run['launches_intercepted']} intercepted"
    passes = run.get("passes_per_launch")
    if isinstance(passes, Mapping):
        same = passes.get("min") == passes.get("max")
        parts.append(
            f"{passes.get('min')} passes each"
            if same
            else f"{passes.get('min')}-{passes.get('max')} passes (mean {passes.get('mean')})"
        )
    if run.get("replay_s_est") is not None:
        parts.append(
            f"about {run['replay_s_est']:.0f} s replaying, {run.get('program_s_est', 0):.0f} s "
            "the program under ncu"
        )
    if run.get("attached_after_s") is not None:
        parts.append(
            f"attached to the program started beside phase 1 {run['attached_after_s']:.0f} s before"
        )
    ended = ENDED.get(str(run.get("ended_by")))
    if ended:
        parts.append(ended)
    ok = "" if run.get("ok", True) else " (failed or stopped)"
    return f"  ncu run {run.get('step')}{ok}: " + ", ".join(parts)


def lines(breakdown: Mapping[str, Any], estimate: Mapping[str, Any] | None = None) -> list[str]:
    """The breakdown as text, one item a line; `estimate`: phase 2's before it ran (the
    status's)."""
    out = ["where the time went:"]
    for key, seconds in (breakdown.get("phases_s") or {}).items():
        out.append(f"  {PHASES.get(key, key)}: {seconds:.1f} s")
    if breakdown.get("timeline_s") is not None:
        out.append(f"  the program under nsys: {breakdown['timeline_s']:.1f} s")
    out += [_run_line(r) for r in breakdown.get("ncu_runs") or []]
    out.append(
        f"  launches profiled in phase 2: {breakdown.get('launches_profiled', 0)}; "
        f"second ncu runs: {breakdown.get('second_ncu_runs', 0)}; "
        f"export commands: {breakdown.get('export_steps_s', 0):.1f} s (side by side)"
    )
    if estimate is not None and estimate.get("total_s") is not None:
        out.append(f"  estimated before phase 2: {estimate['total_s']:.0f} s")
    return out
