"""The analysed region on the timeline chart: its windows shaded, the chart opening on them, and
buttons between them and the whole trace (plotly updatemenus: part of the bundle's core)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

REGION_COLOR = "rgba(59, 125, 216, 0.13)"  # the analysed region's shade, light and dark
MAX_SHADED = 50  # windows shaded one by one; more: their hull


def clipped(region: Sequence[tuple[int, int]], t0: float, t1: float) -> tuple[float, float] | None:
    """The region's span inside the drawn trace (None: no region, or all of the trace)."""
    if not region:
        return None
    start, end = max(float(region[0][0]), t0), min(float(region[-1][1]), t1)
    if end <= start or (start <= t0 and end >= t1):
        return None
    return start, end


def mark(
    fig: go.Figure, windows: Sequence[tuple[int, int]], span: tuple[float, float], t0: float
) -> None:
    """Shade the analysed windows (their hull when there are many), open the chart on them and
    offer buttons between them and the whole trace."""
    shown = windows if len(windows) <= MAX_SHADED else [(span[0], span[1])]
    for start, end in shown:
        a, b = max(float(start), span[0]), min(float(end), span[1])
        fig.add_shape(
            type="rect",
            xref="x2",
            yref="paper",
            x0=(a - t0) / 1e6,
            x1=(b - t0) / 1e6,
            y0=0,
            y1=1,
            fillcolor=REGION_COLOR,
            line={"width": 0},
            layer="below",
            name="analysed region",
        )
    view = [(span[0] - t0) / 1e6, (span[1] - t0) / 1e6]
    fig.update_xaxes(range=view)
    fig.update_layout(
        margin_t=72,  # room for the buttons below plotly's modebar
        height=(fig.layout.height or 400) + 32,
        updatemenus=[
            {
                "type": "buttons",
                "direction": "left",
                "showactive": False,
                "x": 1,
                "xanchor": "right",
                "y": 1.02,
                "yanchor": "bottom",
                "pad": {"r": 0, "t": 0},
                "bgcolor": "rgba(128, 128, 128, 0.12)",  # reads on light and dark pages
                "bordercolor": "rgba(128, 128, 128, 0.5)",
                "buttons": [
                    {
                        "label": "analysed region",
                        "method": "relayout",
                        "args": [{"xaxis.range": view, "xaxis2.range": view}],
                    },
                    {
                        "label": "whole trace",
                        "method": "relayout",
                        "args": [{"xaxis.autorange": True, "xaxis2.autorange": True}],
                    },
                ],
            }
        ],
    )
