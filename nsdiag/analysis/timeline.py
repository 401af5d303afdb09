"""Timeline (Nsight Systems) program analyses: copies, overlap, syncs, idle gaps, launch overhead.

Each analysis reports per device and NVTX range, with the time a fix would save. How the time
is split between them so impacts never double count is described in timeline_base.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsdiag.analysis.diagnosis import Evidence, Finding, KernelDiagnosis
from nsdiag.analysis.rulespec import RuleSpec, default_rules
from nsdiag.analysis.timeline_base import (
    TimelineView,
    gap_parts,
    group_union,
    label,
    make_finding,
    pinned_model,
    union_ns,
    view,
)
from nsdiag.model.session import Session


def _params(rule: RuleSpec, key: str, default: float) -> float:
    return float(rule.params.get(key, default))


def _peer_params(cause: str) -> dict[str, float]:
    """Another program rule's thresholds (the overlap analysis reuses the pinned-copy model)."""
    return next(
        (dict(r.params) for r in default_rules() if r.scope == "program" and r.cause == cause), {}
    )


def _gbps(nbytes: float, ns: float) -> float | None:
    return nbytes / ns if ns > 0 else None  # bytes per ns == GB/s


# ---------------------------------------------------------------- pageable-memcpy


def _pageable_saving(copies: pd.DataFrame) -> float:
    """Copy time beyond the pinned estimate, at most the wall time the pageable copies took."""
    pageable = copies[copies["pageable"]]
    extra = float((pageable["duration"] - pageable["pinned_ns"]).sum())
    return min(extra, union_ns(pageable["start_ns"].to_numpy(), pageable["end_ns"].to_numpy()))


def pageable_memcpy(
    rule: RuleSpec,
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    total_ns: float,
) -> list[Finding]:
    v = view(session)
    copies = pinned_model(v, rule.params)
    pageable = copies[copies["pageable"]]
    findings = []
    for (device, name), group in pageable.groupby(["device", "range"], sort=False):
        saved = _pageable_saving(group)
        if saved / v.total_span_ns < _params(rule, "min_impact", 0.01):
            continue
        per_direction = {}
        for direction, part in group.groupby("direction"):
            bw = float(part["pinned_bw"].iloc[0])
            per_direction[direction] = {
                "copies": len(part),
                "bytes": float(part["bytes"].sum()),
                "time_ns": float(part["duration"].sum()),
                "achieved_gb_per_s": _gbps(part["bytes"].sum(), part["duration"].sum()),
                "pinned_gb_per_s": bw / 1e9 if bw > 0 else None,
            }
        nbytes, time_ns = float(group["bytes"].sum()), float(group["duration"].sum())
        pinned = [d["pinned_gb_per_s"] for d in per_direction.values() if d["pinned_gb_per_s"]]
        basis = (
            f"pinned copies in this timeline reach {max(pinned):.1f} GB/s"
            if pinned
            else f"no pinned copy to compare with: assumed {_params(rule, 'assumed_pinned_speedup', 2.0):g}x faster pinned"
        )
        message = (
            f"{label(name)}: {len(group)} host-device copies from pageable memory move {nbytes / 1e6:.0f} MB in "
            f"{time_ns / 1e6:.2f} ms ({_gbps(nbytes, time_ns):.1f} GB/s); {basis}. Pinned buffers would save "
            f"about {saved / 1e6:.2f} ms."
        )
        evidence = (
            Evidence("pageable_copies", float(len(group))),
            Evidence("pageable_bytes", nbytes),
            Evidence("pageable_copy_time_ns", time_ns),
            Evidence("pageable_gb_per_s", _gbps(nbytes, time_ns)),
            Evidence("pinned_gb_per_s", max(pinned) if pinned else None),
            Evidence("impact", saved / v.total_span_ns, ">=", _params(rule, "min_impact", 0.01)),
        )
        findings.append(
            make_finding(
                rule,
                v,
                session,
                device,
                name,
                saved,
                message,
                evidence,
                {
                    "directions": per_direction,
                    "streams": sorted(map(int, group["stream"].unique())),
                },
            )
        )
    return findings


# ---------------------------------------------------------------- no-copy-compute-overlap


def overlap_summary(
    session: Session, pinned_params: dict[str, float] | None = None
) -> pd.DataFrame:
    """Per device and NVTX range: busy time of each pipeline stage (H2D copies, D2H copies,
    kernels), their union, and the overlap achieved out of the overlap possible.

    possible = sum(stages) - max(stage): what perfect overlap would hide. achieved = sum - union.
    saved_ns: the union after the pageable fix, minus the slowest stage after that fix (an
    upper bound reached with enough chunks).
    """
    v = view(session)
    if pinned_params is None:
        pinned_params = _peer_params("pageable-memcpy")
    acts = v.acts[v.acts["stage"] != ""]
    if acts.empty:
        return pd.DataFrame()
    pair = (
        acts["device"].to_numpy() * (int(acts["range_code"].max()) + 1)
        + acts["range_code"].to_numpy()
    )
    group, _ = pd.factorize(pair)
    first = pd.Series(np.arange(len(acts))).groupby(group).first().to_numpy()
    groups = list(zip(acts["device"].to_numpy()[first], acts["range"].to_numpy()[first]))
    stage_code = pd.Categorical(acts["stage"], categories=["h2d", "d2h", "kernel"]).codes.astype(
        "int64"
    )
    starts, ends = acts["start_ns"].to_numpy(), acts["end_ns"].to_numpy()
    n = len(groups)
    per_stage = group_union(group * 3 + stage_code, starts, ends, n * 3).reshape(n, 3)
    total = group_union(group, starts, ends, n)
    copies = pinned_model(v, pinned_params)
    streams = acts["stream"].groupby([group, acts["stage"].to_numpy() == "kernel"]).unique()
    rows = []
    for i, (device, name) in enumerate(groups):
        h2d, d2h, kern = (float(x) for x in per_stage[i])
        mine = copies[(copies["device"] == device) & (copies["range"] == name)]
        pageable_saved = _pageable_saving(mine)
        scaled = {
            d: per_stage[i][k] * _ratio(mine[mine["direction"] == d])
            for k, d in enumerate(("h2d", "d2h"))
        }
        possible = h2d + d2h + kern - max(h2d, d2h, kern)
        achieved = max(h2d + d2h + kern - total[i], 0.0)
        rows.append(
            {
                "device": int(device),
                "range": name,
                "h2d_ns": h2d,
                "d2h_ns": d2h,
                "kernel_ns": kern,
                "union_ns": float(total[i]),
                "possible_ns": possible,
                "achieved_ns": achieved,
                "overlap_fraction": achieved / possible if possible > 0 else np.nan,
                "copy_streams": sorted(map(int, streams.get((i, False), []))),
                "kernel_streams": sorted(map(int, streams.get((i, True), []))),
                "pageable_saved_ns": pageable_saved,
                "saved_ns": max(
                    float(total[i]) - pageable_saved - max(scaled["h2d"], scaled["d2h"], kern), 0.0
                ),
            }
        )
    return pd.DataFrame(rows)


def _ratio(copies: pd.DataFrame) -> float:
    total = float(copies["duration"].sum())
    return float(copies["pinned_ns"].sum()) / total if total > 0 else 1.0


def no_copy_compute_overlap(
    rule: RuleSpec,
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    total_ns: float,
) -> list[Finding]:
    v = view(session)
    summary = overlap_summary(session)
    if summary.empty:
        return []
    measured = [
        {
            "range": r["range"] or None,
            "device": r["device"],
            "overlap_fraction": r["overlap_fraction"],
        }
        for r in summary.to_dict("records")
        if r["kernel_ns"] > 0 and r["h2d_ns"] + r["d2h_ns"] > 0
    ]
    max_fraction = _params(rule, "max_overlap_fraction", 0.3)
    findings = []
    for r in summary.to_dict("records"):
        has_both = r["kernel_ns"] > 0 and r["h2d_ns"] + r["d2h_ns"] > 0
        if not has_both or not r["overlap_fraction"] < max_fraction:
            continue
        if r["saved_ns"] / v.total_span_ns < _params(rule, "min_impact", 0.01):
            continue
        others = [
            f"{label(m['range'] or '')} {m['overlap_fraction'] * 100:.0f}%"
            for m in measured
            if (m["range"] or "") != r["range"]
            and m["device"] == r["device"]
            and m["overlap_fraction"] >= max_fraction
        ]
        streams = sorted(set(r["copy_streams"]) | set(r["kernel_streams"]))
        where = (
            f"all on stream {streams[0]}"
            if len(streams) == 1
            else f"on streams {', '.join(map(str, streams))}"
        )
        message = (
            f"{label(r['range'])}: copies ({(r['h2d_ns'] + r['d2h_ns']) / 1e6:.2f} ms: H2D {r['h2d_ns'] / 1e6:.2f}, "
            f"D2H {r['d2h_ns'] / 1e6:.2f}) and kernels ({r['kernel_ns'] / 1e6:.3f} ms) run one after another "
            f"({where}): {r['overlap_fraction'] * 100:.0f}% of the possible overlap is achieved. Chunked copies "
            f"on separate streams would save about {r['saved_ns'] / 1e6:.2f} ms."
            + (
                f" Overlap measured elsewhere in this timeline: {', '.join(others)}."
                if others
                else ""
            )
        )
        evidence = (
            Evidence("overlap_fraction", r["overlap_fraction"], "<", max_fraction),
            Evidence("copy_time_ns", r["h2d_ns"] + r["d2h_ns"]),
            Evidence("kernel_time_ns", r["kernel_ns"]),
            Evidence("possible_overlap_ns", r["possible_ns"]),
            Evidence(
                "impact", r["saved_ns"] / v.total_span_ns, ">=", _params(rule, "min_impact", 0.01)
            ),
        )
        details = {
            k: r[k]
            for k in (
                "h2d_ns",
                "d2h_ns",
                "kernel_ns",
                "union_ns",
                "possible_ns",
                "achieved_ns",
                "overlap_fraction",
                "copy_streams",
                "kernel_streams",
                "pageable_saved_ns",
            )
        }
        details["overlap_by_range"] = measured
        findings.append(
            make_finding(
                rule, v, session, r["device"], r["range"], r["saved_ns"], message, evidence, details
            )
        )
    return findings


# ---------------------------------------------------------------- sync-heavy


def sync_heavy(
    rule: RuleSpec,
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    total_ns: float,
) -> list[Finding]:
    v = view(session)
    if not len(v.syncs):
        return []
    api = session.api_calls
    calls = api[api["is_sync"].astype(bool)]
    named = (
        calls["nvtx_range"]
        if "nvtx_range" in calls
        else pd.Series(np.nan, index=calls.index, dtype=object)
    )
    call_range = named.astype("object").where(named.notna(), "")
    findings = []
    for (device, name), group in v.syncs.groupby(["device", "range"], sort=False):
        mine = calls[call_range == name]
        count, work = len(mine), float(group["work_ns"].median())
        saved, blocked = float(group["claim_ns"].sum()), float(mine["duration_ns"].sum())
        idle = float(v.gaps.loc[group["gap"].unique(), "length"].sum())
        if count < _params(rule, "min_syncs", 20) or work > _params(rule, "max_work_ns", 100_000):
            continue
        if saved / v.total_span_ns < _params(rule, "min_impact", 0.01):
            continue
        names = ", ".join(f"{n} x{c}" for n, c in mine["name"].value_counts().head(3).items())
        message = (
            f"{label(name)}: {count} blocking synchronisations ({names}), each after only "
            f"{work / 1e3:.1f} us of GPU work (median). The host was blocked {blocked / 1e6:.2f} ms and the "
            f"GPU sat idle {idle / 1e6:.2f} ms after them waiting for new work; dropping the syncs would save "
            f"about {saved / 1e6:.2f} ms."
        )
        evidence = (
            Evidence("sync_calls", float(count), ">=", _params(rule, "min_syncs", 20)),
            Evidence(
                "median_gpu_work_between_syncs_ns",
                work,
                "<=",
                _params(rule, "max_work_ns", 100_000),
            ),
            Evidence("host_blocked_ns", blocked),
            Evidence("gpu_idle_after_syncs_ns", idle),
            Evidence("impact", saved / v.total_span_ns, ">=", _params(rule, "min_impact", 0.01)),
        )
        details = {
            "sync_calls": count,
            "draining_syncs": len(group),
            "host_blocked_ns": blocked,
            "gpu_idle_after_syncs_ns": idle,
            "median_work_ns": work,
        }
        findings.append(
            make_finding(rule, v, session, device, name, saved, message, evidence, details)
        )
    return findings


# ---------------------------------------------------------------- gpu-idle-gaps


def _host_activity(api: pd.DataFrame, start: int, end: int, pid: int) -> tuple[list[dict], float]:
    """CUDA API calls of the process during [start, end): top names by time, and the share covered."""
    if not len(api):
        return [], 0.0
    window = api[(api["start_ns"] < end) & (api["end_ns"] > start) & (api["process_id"] == pid)]
    if not len(window):
        return [], 0.0
    lo, hi = (
        np.maximum(window["start_ns"].to_numpy(), start),
        np.minimum(window["end_ns"].to_numpy(), end),
    )
    by_name = (
        pd.Series(hi - lo, index=window["name"].to_numpy())
        .groupby(level=0)
        .sum()
        .sort_values(ascending=False)
    )
    top = [{"name": str(n), "time_ns": float(t)} for n, t in by_name.head(3).items()]
    return top, union_ns(lo, hi) / (end - start)


def gpu_idle_gaps(
    rule: RuleSpec,
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    total_ns: float,
) -> list[Finding]:
    v = view(session)
    min_gap = _params(rule, "min_gap_ns", 100_000)
    gaps = v.gaps[v.gaps["length"] >= min_gap]
    if gaps.empty:
        return []
    parts = gap_parts(session.nvtx_ranges, gaps).join(gaps, on="gap")
    parts["idle"] = parts["length"] * parts["fraction"]
    parts["claim"] = (parts["length"] - parts["sync_claim_ns"]) * parts["fraction"]
    api = session.api_calls.sort_values("start_ns") if len(session.api_calls) else session.api_calls
    findings = []
    for (device, name), group in parts.groupby(["device", "range"], sort=False):
        saved, idle = float(group["claim"].sum()), float(group["idle"].sum())
        if saved / v.total_span_ns < _params(rule, "min_impact", 0.05):
            continue
        largest = []
        for g in group.nlargest(3, "idle").to_dict("records"):
            top, covered = _host_activity(
                api, int(g["start_ns"]), int(g["end_ns"]), int(g["process_id"])
            )
            largest.append(
                {
                    "start_ns": int(g["start_ns"]),
                    "length_ns": float(g["length"]),
                    "in_range_ns": float(g["idle"]),
                    "host_api": top,
                    "host_api_coverage": covered,
                }
            )
        message = (
            f"{label(name)}: the GPU (device {device}) sat idle {idle / 1e6:.2f} ms in {len(group)} gaps of at "
            f"least {min_gap / 1e3:.0f} us (largest {largest[0]['length_ns'] / 1e6:.2f} ms). {_describe_host(largest)}"
        )
        evidence = (
            Evidence("idle_gaps", float(len(group))),
            Evidence("idle_ns", idle),
            Evidence("largest_gap_ns", largest[0]["length_ns"], ">=", min_gap),
            Evidence("impact", saved / v.total_span_ns, ">=", _params(rule, "min_impact", 0.05)),
        )
        details = {
            "gaps": len(group),
            "idle_ns": idle,
            "attributed_to_syncs_ns": float((group["sync_claim_ns"] * group["fraction"]).sum()),
            "largest": largest,
        }
        findings.append(
            make_finding(rule, v, session, device, name, saved, message, evidence, details)
        )
    return findings


def _describe_host(largest: list[dict]) -> str:
    first = largest[0]
    if first["host_api"]:
        calls = ", ".join(f"{c['name']} ({c['time_ns'] / 1e6:.2f} ms)" for c in first["host_api"])
        return (
            f"During the largest gap the host was in {calls}: {first['host_api_coverage'] * 100:.0f}% of it "
            f"inside CUDA calls."
        )
    return "During the largest gap the host made no CUDA call: it was busy elsewhere (CPU work, I/O, Python)."


# ---------------------------------------------------------------- launch-overhead


def launch_runs(v: TimelineView, params: dict[str, float]) -> pd.DataFrame:
    """Runs of tiny kernels separated by short idle gaps (no sync return inside) on one device,
    within one NVTX range. One row per run: kernels, busy and gap time, and the saving."""
    seg = v.segments
    tiny = ((seg["end_ns"] - seg["start_ns"]) <= params.get("tiny_kernel_ns", 10_000)) & (
        seg["n_kernels"] == seg["n"]
    )
    link = np.zeros(len(seg), dtype=bool)  # link[i]: segment i continues into segment i + 1
    gap_len = np.zeros(len(seg))
    g = v.gaps
    ok = (g["length"] < params.get("max_gap_ns", 100_000)) & (g["sync_count"] == 0)
    i = g["seg"].to_numpy()
    same_range = (
        seg["range"].to_numpy()[i] == seg["range"].to_numpy()[np.minimum(i + 1, len(seg) - 1)]
    )
    link[i] = (
        ok.to_numpy()
        & tiny.to_numpy()[i]
        & tiny.to_numpy()[np.minimum(i + 1, len(seg) - 1)]
        & same_range
    )
    gap_len[i] = g["length"].to_numpy()
    run = np.cumsum(np.concatenate([[True], ~link[:-1]])) - 1
    frame = pd.DataFrame(
        {
            "run": run,
            "device": seg["device"],
            "range": seg["range"],
            "tiny": tiny,
            "kernels": seg["n_kernels"],
            "busy": seg["end_ns"] - seg["start_ns"],
            "gap": np.where(link, gap_len, 0.0),
            "links": link.astype(int),
        }
    )
    runs = frame.groupby("run").agg(
        device=("device", "first"),
        range=("range", "first"),
        tiny=("tiny", "all"),
        kernels=("kernels", "sum"),
        busy_ns=("busy", "sum"),
        gap_ns=("gap", "sum"),
        links=("links", "sum"),
    )
    runs = runs[runs["tiny"] & (runs["kernels"] >= params.get("min_run_kernels", 50))]
    mean_gap = runs["gap_ns"] / runs["links"].clip(lower=1)
    mean_busy = runs["busy_ns"] / (runs["links"] + 1)
    runs = runs[mean_gap >= params.get("min_gap_to_duration", 0.5) * mean_busy].copy()
    runs["saved_ns"] = (
        runs["gap_ns"] - runs["links"] * params.get("graph_node_gap_ns", 1000)
    ).clip(lower=0)
    return runs


def launch_overhead(
    rule: RuleSpec,
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    total_ns: float,
) -> list[Finding]:
    v = view(session)
    runs = launch_runs(v, rule.params)
    if runs.empty:
        return []
    kernels_only = v.acts[v.acts["stage"] == "kernel"]
    kernel_rows = {
        (int(d), kernels_only["range"].iloc[rows[0]]): kernels_only.index[rows]
        for (d, _), rows in kernels_only.groupby(["device", "range_code"]).indices.items()
    }
    findings = []
    for (device, name), group in runs.groupby(["device", "range"], sort=False):
        saved = float(group["saved_ns"].sum())
        if saved / v.total_span_ns < _params(rule, "min_impact", 0.01):
            continue
        n, busy, gaps = (
            int(group["kernels"].sum()),
            float(group["busy_ns"].sum()),
            float(group["gap_ns"].sum()),
        )
        links = max(int(group["links"].sum()), 1)
        in_range = v.acts.iloc[kernel_rows.get((device, name), [])]
        launch_call = (in_range["api_end_ns"] - in_range["api_start_ns"])[
            in_range["api_start_ns"] > 0
        ]
        call = float(launch_call.median()) if len(launch_call) else None
        message = (
            f"{label(name)}: {n} tiny kernels in {len(group)} back-to-back run(s) keep the GPU busy only "
            f"{busy / 1e6:.2f} ms while it idles {gaps / 1e6:.2f} ms between them ({busy / n / 1e3:.1f} us per "
            f"kernel, {gaps / links / 1e3:.1f} us gaps"
            + (f"; each launch call takes {call / 1e3:.1f} us on the host" if call else "")
            + f"). Launch overhead dominates: a CUDA graph or fused kernel would save about {saved / 1e6:.2f} ms."
        )
        evidence = (
            Evidence("tiny_kernels", float(n), ">=", _params(rule, "min_run_kernels", 50)),
            Evidence("mean_kernel_ns", busy / n, "<=", _params(rule, "tiny_kernel_ns", 10_000)),
            Evidence("mean_gap_ns", gaps / links, "<", _params(rule, "max_gap_ns", 100_000)),
            Evidence("launch_call_ns", call),
            Evidence("impact", saved / v.total_span_ns, ">=", _params(rule, "min_impact", 0.01)),
        )
        details = {
            "runs": len(group),
            "kernels": n,
            "busy_ns": busy,
            "gap_ns": gaps,
            "streams": sorted(map(int, in_range["stream"].unique())),
        }
        findings.append(
            make_finding(rule, v, session, device, name, saved, message, evidence, details)
        )
    return findings
