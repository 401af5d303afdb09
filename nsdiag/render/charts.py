"""Plotly figures built from a Diagnosis (and a Session's timeline): pure functions, no I/O.

Every string that comes from the profiled program (kernel names, NVTX names) goes through
`fmt.plotly_text`, because plotly renders hover and tick text as HTML.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from nsdiag.analysis.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.model.catalogue import STALL_REASONS
from nsdiag.model.names import short_name
from nsdiag.render import fmt

BOUND_COLORS = {
    "memory": "#3b7dd8",
    "compute": "#d9534f",
    "latency": "#f0a020",
    "launch": "#8e6bbf",
    "unknown": "#9a9a9a",
}
BOUND_ORDER = ("memory", "compute", "latency", "launch", "unknown")
ROOF_COLORS = {"fp64": "#6b4f2a", "fp32": "#2a6b3c", "fp16": "#2a5a6b", "tensor": "#6b2a5e"}
KIND_COLORS = {
    "kernel": "#3b7dd8",
    "memcpy": "#f08a24",
    "memset": "#4ca64c",
    "nvtx": "#b07cc6",
    "other": "#9a9a9a",
}

# (label, metric, memory or compute, the verdict's limiter slug for this unit)
UNITS: tuple[tuple[str, str, str, str], ...] = (
    ("DRAM", "dram_throughput_pct", "memory", "dram"),
    ("L2", "l2_throughput_pct", "memory", "l2"),
    ("L1/TEX", "l1_throughput_pct", "memory", "l1"),
    ("Shared", "shared_throughput_pct", "memory", "shared"),
    ("FMA pipe", "pipe_fma_pct", "compute", "fma"),
    ("ALU pipe", "pipe_alu_pct", "compute", "alu"),
    ("FP64 pipe", "pipe_fp64_pct", "compute", "fp64"),
    ("FP16 pipe", "pipe_fp16_pct", "compute", "fp16"),
    ("Tensor pipe", "pipe_tensor_pct", "compute", "tensor"),
    ("XU (SFU) pipe", "pipe_xu_pct", "compute", "xu"),
    ("LSU pipe", "pipe_lsu_pct", "compute", "lsu"),
)


def _layout(height: int, **kwargs: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        template="none",
        height=height,
        autosize=True,
        margin=dict(l=10, r=10, t=30, b=40),
        font=dict(
            family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12, color="#222"
        ),
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="#fff",
        hoverlabel=dict(align="left"),
    )
    base.update(kwargs)
    return base


def _axis(**kwargs: Any) -> dict[str, Any]:
    return dict(
        gridcolor="#e6e6e6", zerolinecolor="#cfcfcf", linecolor="#999", automargin=True, **kwargs
    )


def _reference_peaks(diagnosis: Diagnosis) -> dict[str, float]:
    """The device peaks, from the longest kernel that reports them (they share one device)."""
    for kernel in diagnosis.kernels:
        peaks = {k: fmt.number(v) for k, v in (kernel.roofline.get("peaks") or {}).items()}
        if peaks.get("dram_bytes_per_s"):
            return {k: v for k, v in peaks.items() if v}
    return {}


def _measured_ceiling(diagnosis: Diagnosis) -> float | None:
    for kernel in diagnosis.kernels:
        value = fmt.number(kernel.roofline.get("measured_dram_ceiling_bytes_per_s"))
        if value:
            return value
    return None


def roofline(
    diagnosis: Diagnosis, names: dict[str, str], max_points: int = 1000
) -> go.Figure | None:
    """Log-log roofline: DRAM and compute roofs, each kernel a point sized by its time share."""
    peaks = _reference_peaks(diagnosis)
    bandwidth = peaks.get("dram_bytes_per_s")
    points = [
        k
        for k in diagnosis.kernels[:max_points]
        if (fmt.number(k.roofline.get("arithmetic_intensity")) or 0) > 0
        and (fmt.number(k.roofline.get("achieved_flops_per_s")) or 0) > 0
    ]
    if not bandwidth or not points:
        return None
    intensities = [float(k.roofline["arithmetic_intensity"]) for k in points]
    compute = {
        p: peaks[f"{p}_flops"]
        for p in ("fp64", "fp32", "fp16", "tensor")
        if peaks.get(f"{p}_flops")
    }
    top = max(
        compute.values(), default=max(float(k.roofline["achieved_flops_per_s"]) for k in points)
    )
    x_min = min(min(intensities) / 3, 1e-2)
    x_max = max(max(intensities) * 3, top / bandwidth * 30, 1e2)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[x_min, top / bandwidth],
            y=[bandwidth * x_min, top],
            mode="lines",
            name=f"DRAM {fmt.rate(bandwidth, 'B/s')}",
            line=dict(color="#444", width=2),
            hoverinfo="name",
        )
    )
    ceiling = _measured_ceiling(diagnosis)
    if ceiling:
        fig.add_trace(
            go.Scatter(
                x=[x_min, top / ceiling],
                y=[ceiling * x_min, top],
                mode="lines",
                name=f"DRAM measured {fmt.rate(ceiling, 'B/s')}",
                line=dict(color="#444", width=1, dash="dash"),
                hoverinfo="name",
            )
        )
    for precision, peak in compute.items():
        fig.add_trace(
            go.Scatter(
                x=[peak / bandwidth, x_max],
                y=[peak, peak],
                mode="lines",
                name=f"{precision.upper()} peak {fmt.rate(peak, 'FLOP/s')}",
                line=dict(color=ROOF_COLORS[precision], width=2),
                hoverinfo="name",
            )
        )
    biggest = max(k.time_share or 0 for k in points) or 1.0
    for bound in BOUND_ORDER:
        group = [k for k in points if (k.bound if k.bound in BOUND_COLORS else "unknown") == bound]
        if not group:
            continue
        fig.add_trace(
            go.Scatter(
                x=[k.roofline["arithmetic_intensity"] for k in group],
                y=[k.roofline["achieved_flops_per_s"] for k in group],
                mode="markers",
                name=f"{bound}-bound",
                marker=dict(
                    size=[8 + 34 * math.sqrt(max(k.time_share or 0, 0) / biggest) for k in group],
                    color=BOUND_COLORS[bound],
                    opacity=0.75,
                    line=dict(color="#222", width=1),
                ),
                hovertext=[_roofline_hover(k, names) for k in group],
                hoverinfo="text",
            )
        )
    return fig.update_layout(
        **_layout(
            460,
            xaxis=_axis(type="log", dtick=1, title="arithmetic intensity (FLOP per DRAM byte)"),
            yaxis=_axis(type="log", dtick=1, title="achieved FLOP/s"),
            legend=dict(orientation="v", x=1.02, y=1),
            margin=dict(l=10, r=10, t=20, b=40),
        )
    )


def _roofline_hover(kernel: KernelDiagnosis, names: dict[str, str]) -> str:
    r = kernel.roofline
    return "<br>".join(
        [
            f"<b>{fmt.plotly_text(names.get(kernel.name, kernel.name))}</b>",
            f"{kernel.bound}-bound, limiter {fmt.plotly_text(kernel.limiter or fmt.MISSING)}",
            f"intensity {fmt.num(r.get('arithmetic_intensity'))} FLOP/B",
            f"achieved {fmt.rate(r.get('achieved_flops_per_s'), 'FLOP/s')} ({fmt.plotly_text(r.get('precision', ''))})",
            f"{fmt.pct(r.get('pct_of_roof'))} of roof, {fmt.share(kernel.time_share)} of GPU time",
        ]
    )


def throughput_bars(kernel: KernelDiagnosis) -> go.Figure | None:
    """Each memory unit and pipe against its peak (100%); the verdict's limiter is outlined."""
    rows = [
        (label, fmt.number(kernel.metrics.get(metric)), group, slug)
        for label, metric, group, slug in UNITS
        if fmt.number(kernel.metrics.get(metric)) is not None
    ]
    if not rows:
        return None
    colors = [
        BOUND_COLORS["memory"] if group == "memory" else BOUND_COLORS["compute"]
        for _, _, group, _ in rows
    ]
    widths = [3 if slug == kernel.limiter else 0 for *_, slug in rows]
    labels = [
        f"<b>{label} ◀</b>" if slug == kernel.limiter else label for label, _, _, slug in rows
    ]
    fig = go.Figure(
        go.Bar(
            x=[v for _, v, _, _ in rows],
            y=labels,
            orientation="h",
            marker=dict(color=colors, line=dict(color="#111", width=widths)),
            text=[f"{v:.0f}%" for _, v, _, _ in rows],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.1f}% of peak<extra></extra>",
        )
    )
    return fig.update_layout(
        **_layout(
            60 + 22 * len(rows),
            title=dict(text="throughput, % of each unit's peak", font=dict(size=13), x=0),
            xaxis=_axis(range=[0, 110], tickvals=[0, 25, 50, 75, 100], ticksuffix="%"),
            yaxis=_axis(autorange="reversed"),
            bargap=0.25,
            showlegend=False,
        )
    )


def stall_bars(kernel: KernelDiagnosis, top: int = 10) -> go.Figure | None:
    """Warp stall reasons, as a share of stall cycles (cycles per issued instruction on hover)."""
    rows = []
    for reason in STALL_REASONS:
        share = fmt.number(kernel.metrics.get(f"stall_share_{reason}"))
        if share is not None and share > 0:
            rows.append((reason, share, fmt.number(kernel.metrics.get(f"stall_{reason}"))))
    rows = sorted(rows, key=lambda r: -r[1])[:top]
    if not rows:
        return None
    colors = ["#c0392b" if reason == kernel.limiter else "#7f8c9a" for reason, _, _ in rows]
    fig = go.Figure(
        go.Bar(
            x=[s * 100 for _, s, _ in rows],
            y=[r.replace("_", " ") for r, _, _ in rows],
            orientation="h",
            marker=dict(color=colors),
            text=[f"{s * 100:.0f}%" for _, s, _ in rows],
            textposition="outside",
            cliponaxis=False,
            customdata=[fmt.num(c) for _, _, c in rows],
            hovertemplate="%{y}: %{x:.1f}% of stall cycles, %{customdata} cycles per instruction<extra></extra>",
        )
    )
    return fig.update_layout(
        **_layout(
            60 + 22 * len(rows),
            title=dict(text="warp stall reasons, % of stall cycles", font=dict(size=13), x=0),
            xaxis=_axis(range=[0, max(s for _, s, _ in rows) * 118], ticksuffix="%"),
            yaxis=_axis(autorange="reversed"),
            bargap=0.25,
            showlegend=False,
        )
    )


def verdict_shares(diagnosis: Diagnosis) -> go.Figure | None:
    """The share of GPU time by verdict (memory, compute, latency, launch)."""
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for k in diagnosis.kernels:
        bound = k.bound if k.bound in BOUND_COLORS else "unknown"
        totals[bound] = totals.get(bound, 0.0) + (fmt.number(k.time_share) or 0.0)
        counts[bound] = counts.get(bound, 0) + 1
    bounds = [b for b in BOUND_ORDER if b in totals]
    if not bounds:
        return None
    fig = go.Figure(
        go.Bar(
            x=[totals[b] * 100 for b in bounds],
            y=[f"{b}-bound" for b in bounds],
            orientation="h",
            marker=dict(color=[BOUND_COLORS[b] for b in bounds]),
            text=[
                f"{totals[b] * 100:.1f}% ({counts[b]} kernel{'s' if counts[b] != 1 else ''})"
                for b in bounds
            ],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.1f}% of GPU time<extra></extra>",
        )
    )
    return fig.update_layout(
        **_layout(
            60 + 30 * len(bounds),
            xaxis=_axis(range=[0, 125], ticksuffix="%", tickvals=[0, 25, 50, 75, 100]),
            yaxis=_axis(autorange="reversed"),
            showlegend=False,
            margin=dict(l=10, r=10, t=10, b=30),
        )
    )


def _merge(starts: np.ndarray, ends: np.ndarray, gap: float) -> np.ndarray:
    """Group ids for intervals sorted by start: a new group starts after a gap wider than `gap`."""
    if len(starts) == 0:
        return np.zeros(0, dtype=int)
    reach = np.maximum.accumulate(ends)
    breaks = starts[1:] > reach[:-1] + gap
    return np.concatenate([[0], np.cumsum(breaks)])


def _segments(frame: pd.DataFrame, cap: int) -> pd.DataFrame:
    """Merge a lane's activities into at most `cap` segments (exact when there are few)."""
    frame = frame.sort_values("start_ns", kind="stable")
    starts, ends = frame["start_ns"].to_numpy(float), frame["end_ns"].to_numpy(float)
    span = float(ends.max() - starts.min()) if len(frame) else 0.0
    gap, groups = -1.0, np.arange(len(frame))
    while len(frame) > cap and groups.max(initial=0) + 1 > cap:
        gap = span / cap if gap <= 0 else gap * 2
        groups = _merge(starts, ends, gap)
    frame = frame.assign(_g=groups, _busy=ends - starts).reset_index(drop=True)
    grouped = frame.groupby("_g", sort=True)
    agg = grouped.agg(
        start_ns=("start_ns", "min"),
        end_ns=("end_ns", "max"),
        count=("start_ns", "size"),
        busy_ns=("_busy", "sum"),
    )
    agg["name"] = frame.loc[grouped["_busy"].idxmax().to_numpy(), "name"].to_numpy()
    return agg.reset_index(drop=True)


def _busy_fraction(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Fraction of each bin covered by the union of the intervals."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    groups = _merge(s, e, 0.0)
    u_start = pd.Series(s).groupby(groups).min().to_numpy()
    u_end = pd.Series(e).groupby(groups).max().to_numpy()
    lengths = u_end - u_start
    prefix = np.concatenate([[0.0], np.cumsum(lengths)])
    idx = np.searchsorted(u_start, edges, side="right") - 1
    covered = np.where(
        idx >= 0,
        prefix[np.clip(idx, 0, None)]
        + np.clip(edges - u_start[np.clip(idx, 0, None)], 0, lengths[np.clip(idx, 0, None)]),
        0.0,
    )
    widths = np.diff(edges)
    return np.divide(np.diff(covered), widths, out=np.zeros_like(widths), where=widths > 0)


def _short(names: pd.Series) -> pd.Series:
    """Readable kernel names (computed once per distinct name)."""
    names = names.fillna("").astype(str)
    return names.map({n: short_name(n) for n in names.unique()})


def busy_time(activities: pd.DataFrame) -> tuple[float, float]:
    """(span, busy) of a timeline in ns: first start to last end, and the union of activity time."""
    acts = activities.dropna(subset=["start_ns", "end_ns"])
    if acts.empty:
        return 0.0, 0.0
    t0, t1 = float(acts["start_ns"].min()), float(acts["end_ns"].max())
    if t1 <= t0:
        return 0.0, 0.0
    fraction = _busy_fraction(
        acts["start_ns"].to_numpy(float), acts["end_ns"].to_numpy(float), np.array([t0, t1])
    )
    return t1 - t0, float(fraction[0]) * (t1 - t0)


def _lane(row_kind: str, stream: Any) -> str:
    label = "kernels" if row_kind == "kernel" else "copies"
    return f"stream {fmt.plotly_text(stream)} · {label}"


def timeline(
    activities: pd.DataFrame,
    nvtx: pd.DataFrame | None = None,
    max_segments: int = 3000,
    bins: int = 400,
) -> go.Figure | None:
    """GPU busy % over time, activity lanes per stream (kernels, copies) and NVTX range lanes.

    Activities are merged into at most `max_segments` bars (nearby activities of one lane become
    one bar whose hover says how many it holds), so a long trace stays a small file.
    """
    if activities is None or activities.empty:
        return None
    acts = activities.dropna(subset=["start_ns", "end_ns"]).copy()
    if acts.empty:
        return None
    acts["kind"] = (
        acts["kind"].astype(str).where(acts["kind"].isin(["kernel", "memcpy", "memset"]), "other")
    )
    acts["name"] = _short(acts["name"]) if "name" in acts else ""
    streams = acts["stream"] if "stream" in acts else pd.Series("?", index=acts.index)
    acts["lane"] = [_lane(k, s) for k, s in zip(acts["kind"], streams, strict=True)]
    ranges = pd.DataFrame()
    if nvtx is not None and not nvtx.empty:
        ranges = nvtx.dropna(subset=["start_ns", "end_ns"]).copy()
        depth = ranges["depth"] if "depth" in ranges else pd.Series(0, index=ranges.index)
        ranges["lane"] = [
            "NVTX" if fmt.missing(d) or int(d) == 0 else f"NVTX depth {int(d)}" for d in depth
        ]
        ranges["kind"] = "nvtx"
        ranges["name"] = ranges["name"].fillna("").astype(str)
    t0 = float(min(acts["start_ns"].min(), ranges["start_ns"].min() if len(ranges) else math.inf))
    t1 = float(max(acts["end_ns"].max(), ranges["end_ns"].max() if len(ranges) else -math.inf))
    lanes = sorted(acts["lane"].unique(), key=_lane_key) + sorted(
        ranges["lane"].unique() if len(ranges) else []
    )
    per_lane = max(max_segments // max(len(lanes), 1), 20)
    fig = _timeline_figure(len(lanes))
    edges = np.linspace(t0, t1 if t1 > t0 else t0 + 1, bins + 1)
    busy = _busy_fraction(acts["start_ns"].to_numpy(float), acts["end_ns"].to_numpy(float), edges)
    fig.add_trace(
        go.Scatter(
            x=(edges[:-1] - t0) / 1e6,
            y=busy * 100,
            mode="lines",
            line_shape="hv",
            fill="tozeroy",
            name="GPU busy",
            line=dict(color="#3b7dd8", width=1),
            hovertemplate="%{x:.3f} ms: %{y:.0f}% busy<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for kind, frame in [
        *acts.groupby("kind", sort=False),
        *(ranges.groupby("kind") if len(ranges) else []),
    ]:
        parts = [
            _segments(f, per_lane).assign(lane=lane)
            for lane, f in frame.groupby("lane", sort=False)
        ]
        seg = pd.concat(parts, ignore_index=True)
        fig.add_trace(
            go.Bar(
                base=(seg["start_ns"] - t0) / 1e6,
                x=(seg["end_ns"] - seg["start_ns"]).clip(lower=0) / 1e6,
                y=seg["lane"],
                orientation="h",
                name=str(kind),
                marker=dict(color=KIND_COLORS.get(str(kind), "#999")),
                hovertext=[_segment_hover(r, t0) for r in seg.itertuples()],
                hoverinfo="text",
                text=[fmt.plotly_text(n) for n in seg["name"]] if kind == "nvtx" else None,
                textposition="inside",
                insidetextanchor="middle",
                textfont=dict(color="#fff"),
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes)), row=2, col=1)
    return fig


def _lane_key(lane: str) -> tuple[float, str]:
    """Streams in numeric order, kernels before copies within a stream."""
    stream = lane.split(" · ")[0].removeprefix("stream ")
    try:
        return (float(stream), lane)
    except ValueError:
        return (math.inf, lane)


def _timeline_figure(n_lanes: int) -> go.Figure:
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        row_heights=[0.25, 0.75] if n_lanes > 2 else [0.4, 0.6],
    )
    fig.update_layout(
        **_layout(
            180 + 34 * n_lanes,
            barmode="overlay",
            bargap=0.2,
            legend=dict(orientation="h", y=1.08, x=0),
            margin=dict(l=10, r=10, t=40, b=40),
        )
    )
    fig.update_xaxes(**_axis(), row=1, col=1)
    fig.update_xaxes(**_axis(title="time (ms)"), row=2, col=1)
    fig.update_yaxes(**_axis(title="busy %", range=[0, 105]), row=1, col=1)
    fig.update_yaxes(**_axis(), row=2, col=1)
    return fig


def _segment_hover(row: Any, t0: float) -> str:
    name = fmt.plotly_text(row.name)
    when = f"at {(row.start_ns - t0) / 1e6:.3f} ms, {fmt.time_ns(row.end_ns - row.start_ns)}"
    if row.count == 1:
        return f"<b>{name}</b><br>{when}"
    return (
        f"<b>{row.count} activities</b> merged to keep the report small (longest: {name})"
        f"<br>{when}, busy {fmt.time_ns(row.busy_ns)}"
    )
