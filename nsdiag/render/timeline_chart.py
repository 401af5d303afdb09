"""The timeline chart: GPU busy % over time, activity lanes per stream and NVTX range lanes.

With several ranks (a `rank` column, model/ranks.py) every lane belongs to a rank ("rank 1 ·
stream 7 · kernels", "rank 1 · NVTX"), communication kernels (NCCL) are drawn in a colour of
their own, and at most MAX_RANK_LANES ranks are drawn (the ones asked for first: the straggler).

A pure function from the Session's timeline tables to a plotly figure. Kernel and NVTX names
come from the profiled program, so they go through `fmt.plotly_text` (plotly renders hover and
tick text as HTML).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from nsdiag.model.intervals import covered_fraction
from nsdiag.model.names import short_name
from nsdiag.model.ranks import is_communication, rank_of
from nsdiag.model.values import missing
from nsdiag.render import fmt, timeline_region, timeline_zoom
from nsdiag.render.charts import KIND_COLORS, axis, layout


def _segments(frame: pd.DataFrame, cap: int, min_gap: float = 0.0) -> pd.DataFrame:
    """Merge a lane's activities into at most `cap` segments: those less than `min_gap` apart
    and within BIN_PIXELS gaps of each other always (closer than a pixel of the chart at full
    width: one bar to the eye already, drawn as thick as the share of it they fill), more when
    the lane still holds more than `cap`; exact when there are few and far apart."""
    frame = frame.sort_values("start_ns", kind="stable")
    starts, ends = frame["start_ns"].to_numpy(float), frame["end_ns"].to_numpy(float)
    span = float(ends.max() - starts.min()) if len(frame) else 0.0
    gap = min_gap
    groups = _narrow_groups(starts, ends, gap) if gap > 0 else np.arange(len(frame))
    while groups.max(initial=0) + 1 > cap:
        if gap >= span:  # one bin holds them all (or they all start and end at one instant)
            groups = np.zeros(len(frame), dtype="int64")
            break
        gap = span / cap if gap < span / cap else gap * 2
        groups = _narrow_groups(starts, ends, gap)
    if len(frame) == 0:
        return _NO_SEGMENTS.drop(columns="lane")
    # Group ids rise by runs (every grouping above is a cumulative sum): reduce each run.
    first = np.flatnonzero(np.concatenate([[True], groups[1:] != groups[:-1]]))
    busy = ends - starts
    longest = np.lexsort((-busy, groups))[first]  # the longest activity of each run (first of ties)
    return pd.DataFrame(
        {
            "start_ns": np.minimum.reduceat(starts, first),
            "end_ns": np.maximum.reduceat(ends, first),
            "count": np.diff(np.append(first, len(frame))),
            "busy_ns": np.add.reduceat(busy, first),
            "name": frame["name"].to_numpy()[longest],
        }
    )


def _narrow_groups(starts: np.ndarray, ends: np.ndarray, gap: float) -> np.ndarray:
    """Group ids (intervals sorted by start): a group breaks after a gap wider than `gap`, at
    every BIN_PIXELS gaps from the first start (a merged bar's thickness is then the busy share
    of a few pixels, not of a whole burst) and around an activity longer than WIDE_PIXELS gaps
    (a bar wide enough to hover, or to label, keeps its own)."""
    if len(starts) == 0:
        return np.zeros(0, dtype="int64")
    reach = np.maximum.accumulate(ends)
    wide = (ends - starts) > WIDE_PIXELS * gap
    box = np.floor((starts - starts[0]) / (timeline_zoom.BIN_PIXELS * gap))
    breaks = (starts[1:] > reach[:-1] + gap) | wide[1:] | wide[:-1] | (box[1:] != box[:-1])
    return np.concatenate([[0], np.cumsum(breaks)]).astype("int64")


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
    fraction = covered_fraction(
        acts["start_ns"].to_numpy(float), acts["end_ns"].to_numpy(float), np.array([t0, t1])
    )
    return t1 - t0, float(fraction[0]) * (t1 - t0)


MAX_RANK_LANES = 8
# The chart's plot area at most (the report's main column, 1400 px, less its padding, margins
# and lane labels): activities of one lane closer than one of its pixels at full width are
# drawn as one bar, unless either is WIDE_PIXELS or longer.
PIXELS = 1200
WIDE_PIXELS = 24
COMMUNICATION_COLOR = "#d94f4f"
LEGEND = {"orientation": "h", "x": 0, "xanchor": "left", "y": 1, "yanchor": "bottom"}
LEGEND_ROOM = 40  # px above the plot: the legend's row (about 20 px) and a gap
_NO_SEGMENTS = pd.DataFrame(
    {c: pd.Series(dtype=float) for c in ("start_ns", "end_ns", "count", "busy_ns")}
).assign(name=pd.Series(dtype=str), lane=pd.Series(dtype=str))


def _lane(row_kind: str, stream: Any) -> str:
    label = "kernels" if row_kind in ("kernel", "communication") else "copies"
    return f"stream {fmt.plotly_text(stream)} · {label}"


def _shown_ranks(frame: pd.DataFrame, first: tuple[int, ...]) -> list[int] | None:
    """The ranks to draw (None: one rank, no rank lanes): those asked for, then the lowest."""
    if "rank" not in frame:
        return None
    present = sorted(int(r) for r in set(rank_of(frame).tolist()) if r >= 0)
    if len(present) < 2:
        return None
    wanted = [r for r in first if r in present] + [r for r in present if r not in first]
    return wanted[:MAX_RANK_LANES]


def _by_rank(frame: pd.DataFrame, shown: list[int] | None) -> pd.DataFrame:
    """Rows of the drawn ranks, their lanes prefixed with the rank."""
    if shown is None or frame.empty:
        return frame
    ranks = rank_of(frame)
    frame = frame[np.isin(ranks, shown)].copy()
    frame["lane"] = [
        f"rank {r} · {lane}"
        for r, lane in zip(ranks[np.isin(ranks, shown)], frame["lane"], strict=True)
    ]
    return frame


def timeline(
    activities: pd.DataFrame,
    nvtx: pd.DataFrame | None = None,
    max_segments: int = 3000,
    bins: int = 400,
    first_ranks: tuple[int, ...] = (),
    region: Sequence[tuple[int, int]] = (),
    zoomable: int | None = None,
    opening: bool = True,
) -> go.Figure | None:
    """GPU busy % over time, activity lanes per stream (kernels, copies) and NVTX range lanes,
    per rank when there are several (`first_ranks` drawn first).

    Activities of one lane closer than a pixel of the chart at full width (PIXELS) are drawn as
    one bar, whose hover says how many it holds, and more are merged while there are more than
    `max_segments` bars, so a long trace stays a small file. `region`: the analysed windows,
    shaded, the chart opening on them (with buttons back to the whole trace). `zoomable`: the
    bars as at most this many segments that the page re-merges at each zoom (timeline_zoom.py;
    needs the report's timeline.js), the region's kept finer; `opening`: with the bars of the
    chart's opening view in its traces, as the page first draws them (without: the page alone
    draws them, a report near its size limit saves their bytes).
    """
    if activities is None or activities.empty:
        return None
    shown = _shown_ranks(activities, first_ranks)
    acts = _by_rank(_activity_lanes(activities), shown)
    if acts.empty:
        return None
    ranges = _by_rank(_range_lanes(nvtx), shown)
    t0 = float(min(acts["start_ns"].min(), ranges["start_ns"].min() if len(ranges) else math.inf))
    t1 = float(max(acts["end_ns"].max(), ranges["end_ns"].max() if len(ranges) else -math.inf))
    lanes = sorted(
        [*acts["lane"].unique(), *(ranges["lane"].unique() if len(ranges) else [])],
        key=lambda lane: (_lane_key(lane)[0], "NVTX" in lane, _lane_key(lane)),
    )
    fig = _timeline_figure(len(lanes))
    span = timeline_region.clipped(region, t0, t1)
    _add_busy(fig, acts, np.linspace(t0, t1 if t1 > t0 else t0 + 1, bins + 1), span)
    if span is not None:
        _add_busy(fig, acts, np.linspace(span[0], span[1], bins + 1), None, offset=t0)
    per_lane = max(max_segments // max(len(lanes), 1), 20)
    pixel = (t1 - t0) / PIXELS
    kinds = [
        (str(kind), frame)
        for kind, frame in [
            *acts.groupby("kind", sort=False),
            *(ranges.groupby("kind") if len(ranges) else []),
        ]
    ]
    if zoomable:
        _add_zoomable_bars(fig, kinds, per_lane, (t0, t1), span, zoomable, opening)
    else:
        for kind, frame in kinds:
            _add_bars(fig, kind, _lane_segments(frame, per_lane, pixel), t0)
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes)), row=2, col=1)
    if span is not None:
        timeline_region.mark(fig, region, span, t0)
    return fig


def _lane_segments(frame: pd.DataFrame, cap: int | dict[str, int], pixel: float) -> pd.DataFrame:
    """Each lane's activities merged to at most `cap` segments (a lane's own, where a dict;
    closer than `pixel` always)."""
    parts = [
        _segments(f, cap[str(lane)] if isinstance(cap, dict) else cap, pixel).assign(lane=lane)
        for lane, f in frame.groupby("lane", sort=False)
    ]
    return pd.concat(parts, ignore_index=True) if parts else _NO_SEGMENTS


def _add_zoomable_bars(
    fig: go.Figure,
    kinds: list[tuple[str, pd.DataFrame]],
    per_lane: int,
    trace: tuple[float, float],
    span: tuple[float, float] | None,
    budget: int,
    opening: bool,
) -> None:
    """Bar traces (`opening`: with the bars of the opening view, else empty) and their
    segments for the page to merge (timeline_zoom.py): outside the region at the whole trace's
    pixel, inside it ZOOM times finer than the region's pixel, less fine until `budget`
    segments hold them."""
    t0, t1 = trace
    pixel = (t1 - t0) / PIXELS
    detail = span or trace
    split = [(kind, *timeline_zoom.split(frame, span)) for kind, frame in kinds]
    # The detail budget shared out by each lane's share of the region's activities.
    sizes = pd.concat([inside["lane"] for _, inside, _ in split]).value_counts()
    cap = {str(lane): max(int(budget * n / max(sizes.sum(), 1)), 20) for lane, n in sizes.items()}
    rest = [_lane_segments(outside, per_lane, pixel) for _, _, outside in split]
    zoom = timeline_zoom.ZOOM
    while True:
        fine = (detail[1] - detail[0]) / PIXELS / zoom
        segments = [
            (kind, pd.concat([out, _lane_segments(inside, cap, fine)]))
            for (kind, inside, _), out in zip(split, rest, strict=True)
        ]
        if zoom <= 1 or sum(len(s) for _, s in segments) <= budget:
            break
        zoom //= 2
    # Each kind's bar trace, then its hover trace (_add_hover_bars).
    traces = [(len(fig.data) + 2 * i, seg) for i, (_, seg) in enumerate(segments)]
    meta = timeline_zoom.payload(traces, t0, fine, WIDE_PIXELS)
    view = ((detail[0] - t0) / 1e6, (detail[1] - t0) / 1e6)
    for (kind, _), (index, _) in zip(segments, traces, strict=True):
        shown = timeline_zoom.bars(meta, index, view, PIXELS) if opening else []
        _add_opening_bars(fig, kind, meta, shown)
        _add_hover_bars(fig, kind, [], [], [], [])  # the page fills it
    fig.update_layout(meta={"nsdiagTimeline": meta})


def _add_opening_bars(
    fig: go.Figure, kind: str, meta: dict[str, Any], bars: list[timeline_zoom.Bar]
) -> None:
    """A bar trace holding the bars of the chart's opening view, as the page first merges them
    (timeline.js draws them again for its width, with their labels, and fills their hover
    trace)."""
    unit = meta["unit"]
    fig.add_trace(
        go.Bar(
            base=[b.start * unit / 1e6 for b in bars],
            x=[(b.reach - b.start) * unit / 1e6 for b in bars],
            y=[meta["lanes"][b.lane] for b in bars],
            width=[round(b.width(), 3) for b in bars],
            **_bar_style(kind),
        ),
        row=2,
        col=1,
    )


def _activity_lanes(activities: pd.DataFrame) -> pd.DataFrame:
    """GPU activities with a kind (kernel, memcpy, memset, other), a short name and a lane."""
    acts = activities.dropna(subset=["start_ns", "end_ns"]).copy()
    acts["kind"] = (
        acts["kind"].astype(str).where(acts["kind"].isin(["kernel", "memcpy", "memset"]), "other")
    )
    if "name" in acts:
        talk = is_communication(acts["name"].fillna("")) & (acts["kind"] == "kernel").to_numpy()
        acts.loc[talk, "kind"] = "communication"
    acts["name"] = _short(acts["name"]) if "name" in acts else ""
    streams = acts["stream"] if "stream" in acts else pd.Series("?", index=acts.index)
    acts["lane"] = [_lane(k, s) for k, s in zip(acts["kind"], streams, strict=True)]
    return acts


def _range_lanes(nvtx: pd.DataFrame | None) -> pd.DataFrame:
    """NVTX ranges, one lane per nesting depth."""
    if nvtx is None or nvtx.empty:
        return pd.DataFrame()
    ranges = nvtx.dropna(subset=["start_ns", "end_ns"]).copy()
    depth = ranges["depth"] if "depth" in ranges else pd.Series(0, index=ranges.index)
    ranges["lane"] = [
        "NVTX" if missing(d) or int(d) == 0 else f"NVTX depth {int(d)}" for d in depth
    ]
    ranges["kind"] = "nvtx"
    ranges["name"] = ranges["name"].fillna("").astype(str)
    return ranges


def _add_busy(
    fig: go.Figure,
    acts: pd.DataFrame,
    edges: np.ndarray,
    hole: tuple[float, float] | None,
    offset: float | None = None,
) -> None:
    """The top panel: the share of each time bin in which the GPU ran anything. `hole`: a span
    drawn by a finer busy line of its own (the region's), left blank here; `offset`: this line
    is that finer one (its bins start at edges[0], the chart at `offset`)."""
    busy: list[float | None] = np.round(
        covered_fraction(acts["start_ns"].to_numpy(float), acts["end_ns"].to_numpy(float), edges)
        * 100,
        1,
    ).tolist()
    if hole is not None:
        inside = (edges[:-1] >= hole[0]) & (edges[1:] <= hole[1])
        busy = [None if blank else b for b, blank in zip(busy, inside, strict=True)]
    origin = edges[0] if offset is None else offset
    fig.add_trace(
        go.Scatter(
            x0=float(edges[0] - origin) / 1e6,
            dx=float(edges[1] - edges[0]) / 1e6,  # evenly spaced bins: no x array
            y=busy,
            mode="lines",
            line_shape="hv",
            fill="tozeroy",
            name="GPU busy",
            showlegend=offset is None,
            legendgroup="busy",
            line={"color": "#3b7dd8", "width": 1},
            hovertemplate="%{x:.3f} ms: %{y:.0f}% busy<extra></extra>",
        ),
        row=1,
        col=1,
    )


def _bar_style(kind: str) -> dict[str, Any]:
    """What every bar trace of a kind shares: bars stand on the lane's floor (`offset`), each as
    thick as its `width` (timeline_zoom.thickness); their hover trace answers for them."""
    return {
        "orientation": "h",
        "name": kind,
        "legendgroup": kind,
        "offset": -timeline_zoom.FULL / 2,
        "marker": {"color": KIND_COLORS.get(kind, COMMUNICATION_COLOR)},
        "hoverinfo": "skip",
        "textposition": "inside",
        "insidetextanchor": "middle",
        "textfont": {"color": "#fff"},
    }


def _add_hover_bars(
    fig: go.Figure,
    kind: str,
    base: Sequence[float],
    length: Sequence[float],
    lanes: Sequence[str],
    hover: Sequence[str],
) -> None:
    """The bars again, each the lane's full thickness and transparent, with the hover text:
    plotly answers a hover only inside a bar, and a bar of a mostly idle stretch is a pixel or
    two thin (its legend entry hides both)."""
    fig.add_trace(
        go.Bar(
            base=base,
            x=length,
            y=lanes,
            orientation="h",
            name=kind,
            legendgroup=kind,
            showlegend=False,
            width=timeline_zoom.FULL,
            offset=-timeline_zoom.FULL / 2,
            marker={"color": KIND_COLORS.get(kind, COMMUNICATION_COLOR), "opacity": 0},
            hovertext=hover,
            hoverinfo="text",
        ),
        row=2,
        col=1,
    )


def _add_bars(fig: go.Figure, kind: str, seg: pd.DataFrame, t0: float) -> None:
    """One bar trace for a kind of activity: a bar per segment (start_ns, end_ns, lane, name,
    count, busy_ns), as thick as the share of it its activities fill."""
    extent = (seg["end_ns"] - seg["start_ns"]).clip(lower=0)
    base, length = ((seg["start_ns"] - t0) / 1e6).tolist(), (extent / 1e6).tolist()
    fig.add_trace(
        go.Bar(
            base=base,
            x=length,
            y=seg["lane"].tolist(),
            width=[
                round(timeline_zoom.thickness(int(c), float(e), float(b)), 3)
                for c, e, b in zip(seg["count"], extent, seg["busy_ns"], strict=True)
            ],
            text=[fmt.plotly_text(n) for n in seg["name"]] if kind == "nvtx" else None,
            **_bar_style(kind),
        ),
        row=2,
        col=1,
    )
    hover = [_segment_hover(r, t0) for r in seg.itertuples()]
    _add_hover_bars(fig, kind, base, length, seg["lane"].tolist(), hover)


def _lane_key(lane: str) -> tuple[float, float, bool, str]:
    """Ranks, then streams in numeric order, kernels before copies within a stream."""
    parts = lane.split(" · ")
    rank = math.inf
    if parts[0].startswith("rank "):
        rank = float(parts.pop(0).removeprefix("rank "))
    stream = parts[0].removeprefix("stream ")
    copies = parts[-1] == "copies"
    try:
        return (rank, float(stream), copies, lane)
    except ValueError:
        return (rank, math.inf, copies, lane)


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
        **layout(
            180 + 34 * n_lanes,
            barmode="overlay",
            bargap=0.2,
            # Above the busy panel, standing on its top edge (yanchor bottom at y 1): never over
            # it, and on the left, clear of the region's buttons on the right.
            legend=LEGEND,
            margin={"l": 10, "r": 10, "t": LEGEND_ROOM, "b": 40},
        )
    )
    fig.update_xaxes(**axis(), row=1, col=1)
    fig.update_xaxes(**axis(title="time (ms)"), row=2, col=1)
    fig.update_yaxes(**axis(title="busy %", range=[0, 105]), row=1, col=1)
    fig.update_yaxes(**axis(), row=2, col=1)
    return fig


def _segment_hover(row: Any, t0: float) -> str:
    name = fmt.plotly_text(row.name)
    when = f"at {(row.start_ns - t0) / 1e6:.3f} ms, {fmt.time_ns(row.end_ns - row.start_ns)}"
    if row.count == 1:
        return f"<b>{name}</b><br>{when}"
    extent = row.end_ns - row.start_ns
    share = f" ({fmt.share(min(row.busy_ns / extent, 1.0), 0)} of it)" if extent > 0 else ""
    return (
        f"<b>{row.count} activities</b> merged (longest: {name})"
        f"<br>{when}, busy {fmt.time_ns(row.busy_ns)}{share}"
    )
