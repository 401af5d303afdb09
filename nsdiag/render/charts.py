"""Plotly figures built from a Diagnosis: pure functions, no I/O (the timeline chart is in
timeline_chart.py).

Every string that comes from the profiled program (kernel names, NVTX names) goes through
`fmt.plotly_text`, because plotly renders hover and tick text as HTML.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.model.catalogue import STALL_REASONS
from nsdiag.model.gpu_units import UNITS
from nsdiag.model.values import number
from nsdiag.render import fmt

BOUND_COLORS = {
    "memory": "#3b7dd8",
    "compute": "#d9534f",
    "latency": "#f0a020",
    "launch": "#8e6bbf",
    "unknown": "#9a9a9a",
}
BOUND_ORDER = ("memory", "compute", "latency", "launch", "unknown")
# Mid tones: each reads on the light page and on the dark one (report.css's dark mode).
ROOF_COLORS = {"fp64": "#9a6a32", "fp32": "#3a9050", "fp16": "#3a86a0", "tensor": "#a04a90"}
SLOPE_COLOR = "#80868f"
# Tensor-core roofs, one per precision (dashed, to tell them from the CUDA-core roofs).
TENSOR_ROOF_COLORS = {
    "fp16": "#8e3b8a",
    "bf16": "#b0457a",
    "tf32": "#7a4bb0",
    "fp8": "#c0392b",
    "int8": "#a0522d",
    "fp4": "#d35400",
    "fp64": "#8a5a40",
}
CUDA_CORE_ROOFS = ("fp64", "fp32", "fp16")
KIND_COLORS = {
    "kernel": "#3b7dd8",
    "memcpy": "#f08a24",
    "memset": "#4ca64c",
    "nvtx": "#b07cc6",
    "other": "#9a9a9a",
}


# The look every chart shares: written once per page as a plotly template
# (plotly_js.page_setup), so each chart's JSON carries only what is its own.
SHARED_LAYOUT: dict[str, Any] = {
    "font": {
        "family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
        "size": 12,
        "color": "#222",
    },
    "paper_bgcolor": "rgba(0,0,0,0)",
    "plot_bgcolor": "#fff",
    "hoverlabel": {"align": "left"},
    "autosize": True,
    "margin": {"l": 10, "r": 10, "t": 30, "b": 40},
}
AXIS_STYLE: dict[str, Any] = {
    "gridcolor": "#e6e6e6",
    "zerolinecolor": "#cfcfcf",
    "linecolor": "#999",
    "automargin": True,
}


def layout(height: int, **kwargs: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": "none",
        "height": height,
        **SHARED_LAYOUT,
    }
    base.update(kwargs)
    return base


def axis(**kwargs: Any) -> dict[str, Any]:
    return {**AXIS_STYLE, **kwargs}


def _reference_peaks(diagnosis: Diagnosis) -> dict[str, float]:
    """The device's DRAM and CUDA-core peaks, from the longest kernel that reports them (they
    share one device); tensor roofs are per precision (`tensor_roofs`)."""
    for kernel in diagnosis.kernels:
        peaks = {k: number(v) for k, v in kernel.roofline.peaks.to_json().items()}
        if peaks.get("dram_bytes_per_s"):
            return {k: v for k, v in peaks.items() if v and k != "tensor_flops"}
    return {}


def tensor_roofs(kernels: list[KernelDiagnosis]) -> dict[str, float]:
    """One roof per tensor precision the kernels use: its dense peak at the highest SM clock
    measured among them. A kernel's own roof is at its own clock, never above this one, so every
    tensor kernel is drawn under the roof of its precision."""
    roofs: dict[str, float] = {}
    for kernel in kernels:
        r = kernel.roofline
        peak = number(r.tensor_peak_flops_per_s)
        if r.precision == "tensor" and r.tensor_precision and peak:
            roofs[r.tensor_precision] = max(peak, roofs.get(r.tensor_precision, 0.0))
    return roofs


def on_roofline(kernel: KernelDiagnosis) -> bool:
    """Whether the kernel can be drawn: positive intensity and FLOP rate."""
    r = kernel.roofline
    return (number(r.arithmetic_intensity) or 0) > 0 and point_flops(kernel) > 0


def point_flops(kernel: KernelDiagnosis) -> float:
    """The height of a kernel's point: its tensor work's rate when it sits under a tensor roof
    (the work that roof bounds, a time-weighted rate over the signature's launches), else all
    its FLOPs per second."""
    r = kernel.roofline
    tensor = number(r.achieved_tensor_flops_per_s)
    if r.precision == "tensor" and r.tensor_precision and tensor:
        return tensor
    return number(r.achieved_flops_per_s) or 0.0


def roofline(
    diagnosis: Diagnosis, names: dict[str, str], max_points: int = 1000
) -> go.Figure | None:
    """Log-log roofline: the DRAM slope, the CUDA-core roofs and a dense tensor roof per
    precision the kernels use; each kernel a point sized by its time share, under the roof of
    the precision it uses."""
    peaks = _reference_peaks(diagnosis)
    bandwidth = peaks.get("dram_bytes_per_s")
    points = [k for k in diagnosis.kernels[:max_points] if on_roofline(k)]
    if not bandwidth or not points:
        return None
    intensities = [k.roofline.arithmetic_intensity for k in points]
    compute = {p: peaks[f"{p}_flops"] for p in CUDA_CORE_ROOFS if peaks.get(f"{p}_flops")}
    tensor = tensor_roofs(points)
    top = max(
        [*compute.values(), *tensor.values()],
        default=max(point_flops(k) for k in points),
    )
    x_min = min(min(intensities) / 3, 1e-2)
    x_max = max(max(intensities) * 3, top / bandwidth * 30, 1e2)
    fig = go.Figure()
    _add_roofs(fig, diagnosis, bandwidth, compute, (x_min, x_max, top))
    _add_tensor_roofs(fig, bandwidth, tensor, x_max)
    _add_points(fig, points, names)
    return fig.update_layout(
        **layout(
            460,
            xaxis=axis(type="log", dtick=1, title="arithmetic intensity (FLOP per DRAM byte)"),
            yaxis=axis(type="log", dtick=1, title="achieved FLOP/s"),
            legend={"orientation": "v", "x": 1.02, "y": 1},
            margin={"l": 10, "r": 10, "t": 20, "b": 40},
        )
    )


def _add_roofs(
    fig: go.Figure,
    diagnosis: Diagnosis,
    bandwidth: float,
    compute: dict[str, float],
    extent: tuple[float, float, float],
) -> None:
    """The DRAM slope (theoretical, and measured where the session has a copy kernel at the
    roof) and a flat roof per precision."""
    x_min, x_max, top = extent
    slopes: list[tuple[str, float, int, str | None]] = [
        (f"DRAM {fmt.rate(bandwidth, 'B/s')}", bandwidth, 2, None)
    ]
    ceiling = diagnosis.measured_dram_ceiling
    measured = number(ceiling.bytes_per_s) if ceiling is not None else None
    if measured:
        slopes.append((f"DRAM measured {fmt.rate(measured, 'B/s')}", measured, 1, "dash"))
    for name, slope, width, dash in slopes:
        fig.add_trace(
            go.Scatter(
                x=[x_min, top / slope],
                y=[slope * x_min, top],
                mode="lines",
                name=name,
                line=dict(color=SLOPE_COLOR, width=width, **({"dash": dash} if dash else {})),
                hoverinfo="name",
            )
        )
    for precision, peak in compute.items():
        name = f"{precision.upper()} peak {fmt.rate(peak, 'FLOP/s')}"
        fig.add_trace(_flat_roof(peak, bandwidth, x_max, name, ROOF_COLORS[precision]))


def _add_tensor_roofs(
    fig: go.Figure, bandwidth: float, roofs: dict[str, float], x_max: float
) -> None:
    """A dashed flat roof per tensor precision, from its ridge point on the DRAM slope."""
    for precision in sorted(roofs, key=lambda p: roofs[p]):
        peak = roofs[precision]
        name = f"{precision.upper()} tensor peak {fmt.rate(peak, 'FLOP/s')} (dense)"
        color = TENSOR_ROOF_COLORS.get(precision, ROOF_COLORS["tensor"])
        about = (
            f"dense {precision} tensor-core peak at the highest SM clock measured among these "
            "kernels; each kernel's own roof is at its own clock"
        )
        fig.add_trace(_flat_roof(peak, bandwidth, x_max, name, color, about))


def _flat_roof(
    peak: float, bandwidth: float, x_max: float, name: str, color: str, about: str = ""
) -> go.Scatter:
    """A compute roof from its ridge point on the DRAM slope to the right edge; dashed (and
    explained on hover) when `about` is given."""
    return go.Scatter(
        x=[peak / bandwidth, x_max],
        y=[peak, peak],
        mode="lines",
        name=name,
        line={"color": color, "width": 2, **({"dash": "dash"} if about else {})},
        hovertext=about or None,
        hoverinfo="name+text" if about else "name",
    )


def _add_points(fig: go.Figure, points: list[KernelDiagnosis], names: dict[str, str]) -> None:
    """One trace per verdict, each kernel a point sized by its share of GPU time."""
    biggest = max(k.time_share or 0 for k in points) or 1.0
    for bound in BOUND_ORDER:
        group = [k for k in points if (k.bound if k.bound in BOUND_COLORS else "unknown") == bound]
        if not group:
            continue
        fig.add_trace(
            go.Scatter(
                x=[k.roofline.arithmetic_intensity for k in group],
                y=[point_flops(k) for k in group],
                mode="markers",
                name=f"{bound}-bound",
                marker={
                    "size": [
                        8 + 34 * math.sqrt(max(k.time_share or 0, 0) / biggest) for k in group
                    ],
                    "color": BOUND_COLORS[bound],
                    "opacity": 0.75,
                    "line": {"color": "#222", "width": 1},
                },
                hovertext=[_roofline_hover(k, names) for k in group],
                hoverinfo="text",
                customdata=[k.id for k in group],  # report.js: a click opens the kernel's card
            )
        )


def _roofline_hover(kernel: KernelDiagnosis, names: dict[str, str]) -> str:
    r = kernel.roofline
    name = fmt.plotly_text(names.get(kernel.name, kernel.name))
    achieved = fmt.rate(point_flops(kernel), "FLOP/s")
    return "<br>".join(
        [
            f"<b>{name}</b>",
            f"{kernel.bound}-bound, limiter {fmt.plotly_text(kernel.limiter or fmt.MISSING)}",
            f"intensity {fmt.num(r.arithmetic_intensity)} FLOP/B",
            f"achieved {achieved} ({fmt.plotly_text(r.roof)})",
            f"{fmt.pct(r.pct_of_roof)} of roof, {fmt.share(kernel.time_share)} of GPU time",
            *(fmt.plotly_text(part) for part in r.note.split("; ") if part),
        ]
    )


def throughput_bars(kernel: KernelDiagnosis) -> go.Figure | None:
    """Each memory unit and pipe against its peak (100%); the verdict's limiter is outlined."""
    rows = [
        (u.label, number(kernel.metrics.get(u.metric)), u.kind, u.slug)
        for u in UNITS
        if number(kernel.metrics.get(u.metric)) is not None
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
            marker={"color": colors, "line": {"color": "#111", "width": widths}},
            text=[f"{v:.0f}%" for _, v, _, _ in rows],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.1f}% of peak<extra></extra>",
        )
    )
    return fig.update_layout(
        **layout(
            60 + 22 * len(rows),
            title={"text": "throughput, % of each unit's peak", "font": {"size": 13}, "x": 0},
            xaxis=axis(range=[0, 110], tickvals=[0, 25, 50, 75, 100], ticksuffix="%"),
            yaxis=axis(autorange="reversed"),
            bargap=0.25,
            showlegend=False,
        )
    )


def stall_bars(kernel: KernelDiagnosis, top: int = 10) -> go.Figure | None:
    """Warp stall reasons, as a share of stall cycles (cycles per issued instruction on hover)."""
    rows = []
    for reason in STALL_REASONS:
        share = number(kernel.metrics.get(f"stall_share_{reason}"))
        if share is not None and share > 0:
            rows.append((reason, share, number(kernel.metrics.get(f"stall_{reason}"))))
    rows = sorted(rows, key=lambda r: -r[1])[:top]
    if not rows:
        return None
    colors = ["#c0392b" if reason == kernel.limiter else "#7f8c9a" for reason, _, _ in rows]
    fig = go.Figure(
        go.Bar(
            x=[s * 100 for _, s, _ in rows],
            y=[r.replace("_", " ") for r, _, _ in rows],
            orientation="h",
            marker={"color": colors},
            text=[f"{s * 100:.0f}%" for _, s, _ in rows],
            textposition="outside",
            cliponaxis=False,
            customdata=[fmt.num(c) for _, _, c in rows],
            hovertemplate=(
                "%{y}: %{x:.1f}% of stall cycles, %{customdata} cycles per instruction"
                "<extra></extra>"
            ),
        )
    )
    return fig.update_layout(
        **layout(
            60 + 22 * len(rows),
            title={"text": "warp stall reasons, % of stall cycles", "font": {"size": 13}, "x": 0},
            xaxis=axis(range=[0, max(s for _, s, _ in rows) * 118], ticksuffix="%"),
            yaxis=axis(autorange="reversed"),
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
        totals[bound] = totals.get(bound, 0.0) + (number(k.time_share) or 0.0)
        counts[bound] = counts.get(bound, 0) + 1
    bounds = [b for b in BOUND_ORDER if b in totals]
    if not bounds:
        return None
    fig = go.Figure(
        go.Bar(
            x=[totals[b] * 100 for b in bounds],
            y=[f"{b}-bound" for b in bounds],
            orientation="h",
            marker={"color": [BOUND_COLORS[b] for b in bounds]},
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
        **layout(
            60 + 30 * len(bounds),
            xaxis=axis(range=[0, 125], ticksuffix="%", tickvals=[0, 25, 50, 75, 100]),
            yaxis=axis(autorange="reversed"),
            showlegend=False,
            margin={"l": 10, "r": 10, "t": 10, "b": 30},
        )
    )
