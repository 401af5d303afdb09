"""Plotly figures of a Diff: where the time went (waterfall), each kernel's move on the roofline
(arrows), and the two timelines on one time scale. Pure functions, no I/O; program-supplied
names go through `fmt.plotly_text`."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from nsdiag.analysis.diff import Diff, Side
from nsdiag.analysis.diff.side import KernelTimes
from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.model.names import short_name
from nsdiag.render import charts, fmt, timeline_chart
from nsdiag.render.charts import axis, layout
from nsdiag.render.diff.rows import signed

WATERFALL_STEPS = 12  # kernel matches shown as their own step; the rest become one
TIMELINE_ITERATIONS = 3  # iterations of each side drawn in the aligned timelines


def _label(diff: Diff, match_id: int) -> str:
    m = diff.match(match_id)
    k = (m.before or m.after)[0]
    more = len(m.before) + len(m.after) - 1 if m.method not in ("gone", "new") else 0
    name = short_name(k.name)
    name = name if len(name) <= 38 else name[:37] + "…"
    grouped = m.method in ("fused", "regrouped", "role") and more
    return fmt.plotly_text(name + (f" (+{more})" if grouped else ""))


def _unique(labels: list[str]) -> list[str]:
    """Each label once: plotly draws the steps of one category name as one bar (two GEMMs
    sharing a short name became one step the height of both), so repeats get `#2`, `#3`."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


def waterfall(diff: Diff) -> go.Figure | None:
    """BEFORE's mean region time, each large kernel change, the other kernels together, what is
    not kernel time (idle, copies, overlap between streams), AFTER's mean region time."""
    before, after = diff.region.before.mean, diff.region.after.mean
    if not (before > 0 and after > 0):
        return None
    ranked = sorted(diff.matches, key=lambda m: -abs(m.change_ns))
    shown, rest = ranked[:WATERFALL_STEPS], ranked[WATERFALL_STEPS:]
    labels = ["BEFORE", *_unique([_label(diff, m.id) for m in shown])]
    values = [before] + [m.change_ns for m in shown]
    hover = ["BEFORE: mean region time"] + [
        f"{fmt.plotly_text(m.how())}: {fmt.time_ns(m.before_ns)} -> {fmt.time_ns(m.after_ns)}"
        for m in shown
    ]
    if rest:
        labels.append(f"{len(rest)} other kernel matches")
        values.append(sum(m.change_ns for m in rest))
        hover.append("the other kernels together")
    kernels = sum(m.change_ns for m in diff.matches)
    labels.append("not kernel time")
    values.append((after - before) - kernels)
    hover.append(
        "idle time, copies and overlap between streams: the region's change minus the kernels'"
    )
    labels.append("AFTER")
    values.append(after)
    hover.append("AFTER: mean region time")
    fig = go.Figure(
        go.Waterfall(
            x=labels,
            y=[v / 1e6 for v in values],
            measure=["absolute"] + ["relative"] * (len(values) - 2) + ["total"],
            text=[
                fmt.time_ns(abs(v)) if i in (0, len(values) - 1) else signed(v)
                for i, v in enumerate(values)
            ],
            hovertext=hover,
            hoverinfo="text+y",
            increasing={"marker": {"color": "#d9534f"}},
            decreasing={"marker": {"color": "#4ca64c"}},
            totals={"marker": {"color": "#3b7dd8"}},
            connector={"line": {"color": "#999", "width": 1}},
        )
    )
    unit = " per iteration" if diff.region.unit == "iteration" else ""
    return fig.update_layout(
        **layout(
            420,
            yaxis=axis(title=f"ms{unit}"),
            xaxis=axis(tickangle=-30),
            showlegend=False,
            margin={"l": 10, "r": 10, "t": 20, "b": 120},
        )
    )


def roofline_moves(diff: Diff) -> tuple[go.Figure | None, int]:
    """The roofline of the side with kernel metrics (BEFORE's where both have them), AFTER's
    kernels as hollow points, and an arrow from each matched kernel's BEFORE point to its AFTER
    point. Returns the figure and how many arrows it has."""
    base = diff.before.diagnosis if diff.before.diagnosis.kernels else diff.after.diagnosis
    names = fmt.display_names(base)
    fig = charts.roofline(base, names)
    if fig is None:
        return None, 0
    if base is diff.before.diagnosis and diff.after.diagnosis.kernels:
        _add_after_points(fig, diff.after)
    arrows = 0
    for m in diff.matches:
        b = _profiled(m.before)
        a = _profiled(m.after)
        if b is None or a is None or not (charts.on_roofline(b) and charts.on_roofline(a)):
            continue
        fig.add_annotation(
            x=math.log10(a.roofline.arithmetic_intensity),
            y=math.log10(charts.point_flops(a)),
            ax=math.log10(b.roofline.arithmetic_intensity),
            ay=math.log10(charts.point_flops(b)),
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=2,
            arrowwidth=1.5,
            arrowcolor="#333",
            hovertext=fmt.plotly_text(f"{short_name(b.name)} -> {short_name(a.name)}"),
        )
        arrows += 1
    return fig, arrows


def _profiled(kernels: tuple[KernelTimes, ...]) -> KernelDiagnosis | None:
    return next((k.diagnosis for k in kernels if k.diagnosis is not None), None)


def _add_after_points(fig: go.Figure, after: Side) -> None:
    points = [k for k in after.diagnosis.kernels if charts.on_roofline(k)]
    if not points:
        return
    fig.add_trace(
        go.Scatter(
            x=[k.roofline.arithmetic_intensity for k in points],
            y=[charts.point_flops(k) for k in points],
            mode="markers",
            name="AFTER",
            marker={"size": 10, "color": "rgba(0,0,0,0)", "line": {"color": "#222", "width": 2}},
            hovertext=[
                f"AFTER: {fmt.plotly_text(short_name(k.name))}<br>{k.bound}-bound, "
                f"{fmt.pct(k.roofline.pct_of_roof)} of roof"
                for k in points
            ],
            hoverinfo="text",
        )
    )


def aligned_timelines(diff: Diff, max_segments: int = 1500) -> list[tuple[str, go.Figure]]:
    """Each side's first iterations (its region where it has none) from 0 ms, on one scale."""
    figures: list[tuple[str, go.Figure, float]] = []
    for side in (diff.before, diff.after):
        activities = _first_iterations(side)
        if activities is None:
            continue
        nvtx = side.nvtx if len(side.nvtx) else None
        if nvtx is not None and len(activities):
            nvtx = nvtx[nvtx["start_ns"] < activities["end_ns"].max()]
        fig = timeline_chart.timeline(activities, nvtx, max_segments=max_segments)
        if fig is not None:
            figures.append((side.label.upper(), fig, _span_ms(activities, nvtx)))
    if not figures:
        return []
    longest = max(span for _, _, span in figures)
    out = []
    for label, fig, _ in figures:
        fig.update_xaxes(range=[0, longest])
        out.append((label, fig))
    return out


def _first_iterations(side: Side) -> pd.DataFrame | None:
    timeline = side.timeline
    if timeline is None or not len(timeline):
        return None
    region = side.diagnosis.region
    if region is not None and region.iterations:
        last = region.iterations[min(TIMELINE_ITERATIONS, len(region.iterations)) - 1]
        timeline = timeline[timeline["start_ns"] < last.end_ns]
    return timeline


def _span_ms(activities: pd.DataFrame, nvtx: pd.DataFrame | None) -> float:
    starts = [float(activities["start_ns"].min())]
    ends = [float(activities["end_ns"].max())]
    if nvtx is not None and len(nvtx):
        starts.append(float(nvtx["start_ns"].min()))
        ends.append(float(nvtx["end_ns"].max()))
    return (max(ends) - min(starts)) / 1e6
