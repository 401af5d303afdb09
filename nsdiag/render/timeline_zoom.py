"""The timeline's bars as data that the page re-merges at every zoom (templates/report/timeline.js).

Bars closer than a pixel are merged to keep a report small, but a merge made for the whole trace
hides the idle gaps inside it once the user zooms in. So the HTML report carries segments, not
bars: the analysed region's activities merged only closer than a fraction of a pixel of the
region's view (ZOOM times finer, as fine as the report's budget of segments allows), the rest
of the trace at the whole trace's pixel, as compact integer columns; the page merges them again
for the pixel of whatever range is on screen, so a bar splits when zooming shows its gaps.

A merged bar is never drawn as if it were busy all along: it spans at most BIN_PIXELS pixels of
the view, and its thickness is the share of its time its activities fill (a lane of launches 6%
busy is a thin strip, not a solid bar), FULL for one activity, never below LEAST of FULL (a bin
with anything in it stays visible). `bars` is the page's merge in Python: it draws the figure's
opening view, so the figure data says what the page first shows.

Payload (the figure's `layout.meta.nsdiagTimeline`): `unit` ns per integer step, `lanes` and
`names` (plotly-escaped), `wide` (WIDE_PIXELS), `bin` (BIN_PIXELS), `full` and `least` (the
thickness), and per bar trace (its index in `fig.data`) one row per lane: [lane index, start
deltas, durations, counts, busy (0: one activity), name index].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.render import fmt

ZOOM = 8  # the region's segments are exact to 1/ZOOM of a pixel of the region's view at most
SEGMENTS = 2500  # segments a report carries at most (ZOOM halves until they fit), less
# where the report would pass its size limit (render/html.py)
STEPS_PER_PIXEL = 8  # integer time steps per pixel of the finest view
BIN_PIXELS = 3  # a merged bar spans at most this many pixels: a utilisation strip at 3 px
FULL = 0.8  # a bar's thickness in lane units when busy all along (1 - the chart's bargap)
LEAST = 0.05  # the thinnest bar, a share of FULL: about a pixel and a half


def _payload_rows(
    seg: pd.DataFrame, lanes: dict[str, int], names: dict[str, int], t0: float, unit: float
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    if seg.empty:
        return rows
    for lane, frame in seg.sort_values("start_ns", kind="stable").groupby("lane", sort=False):
        # Nearest steps, not outward: a bar's thickness is its busy share, which rounding both
        # ends outward would inflate by a step for every activity; a step at least (a segment
        # of no length would hover as "0 ns").
        start = np.round((frame["start_ns"].to_numpy(float) - t0) / unit).astype("int64")
        end = np.round((frame["end_ns"].to_numpy(float) - t0) / unit).astype("int64")
        end = np.maximum(end, start + 1)
        count = frame["count"].to_numpy("int64")
        busy = np.where(count > 1, np.round(frame["busy_ns"].to_numpy(float) / unit), 0)
        rows.append(
            [
                lanes.setdefault(str(lane), len(lanes)),
                np.diff(start, prepend=0).tolist(),
                (end - start).tolist(),
                count.tolist(),
                busy.astype("int64").tolist(),
                [names.setdefault(fmt.plotly_text(n), len(names)) for n in frame["name"]],
            ]
        )
    return rows


def payload(
    traces: Sequence[tuple[int, pd.DataFrame]], t0: float, fine_pixel: float, wide: int
) -> dict[str, Any]:
    """The compact segments of each bar trace (its index in the figure, its segments: start_ns,
    end_ns, count, busy_ns, name, lane), times in integer steps of `unit` ns from `t0`; `wide`:
    a segment this many pixels long keeps a bar of its own."""
    unit = max(1, math.floor(fine_pixel / STEPS_PER_PIXEL))
    lanes: dict[str, int] = {}
    names: dict[str, int] = {}
    bars = {str(i): _payload_rows(seg, lanes, names, t0, unit) for i, seg in traces}
    return {
        "unit": unit,
        "lanes": list(lanes),
        "names": list(names),
        "wide": wide,
        "bin": BIN_PIXELS,
        "full": FULL,
        "least": LEAST,
        "bars": bars,
    }


def thickness(count: int, extent: float, busy: float) -> float:
    """A bar's thickness in lane units: FULL times the share of its extent its activities fill
    (one activity: all of it), at least LEAST of FULL."""
    share = min(busy / extent, 1.0) if count > 1 and extent > 0 else 1.0
    return FULL * max(share, LEAST)


def bars(meta: dict[str, Any], trace: int, view: tuple[float, float], pixels: int) -> list[Bar]:
    """One bar trace's bars for a view (ms from the chart's origin) `pixels` wide: its segments
    merged as templates/report/timeline.js merges them (kept in step with its `merge`)."""
    unit = meta["unit"]
    gap = max((view[1] - view[0]) * 1e6 / unit / pixels, 0.0)
    size = meta["bin"] * gap
    out: list[Bar] = []
    for lane, deltas, durations, counts, busy, names in meta["bars"][str(trace)]:
        cur: Bar | None = None
        prev_wide = False
        at = 0
        for delta, duration, count, b, name in zip(
            deltas, durations, counts, busy, names, strict=True
        ):
            at += delta
            start, end, work = at, at + duration, b if count > 1 else duration
            is_wide = duration > meta["wide"] * gap
            box = math.floor(start / size) if size > 0 else None
            if (
                cur is not None
                and box is not None
                and box == cur.box
                and start <= cur.reach + gap
                and not is_wide
                and not prev_wide
            ):
                cur.reach = max(cur.reach, end)
                cur.count += count
                cur.busy += work
                if work > cur.longest:
                    cur.longest, cur.name = work, name
            else:
                if cur is not None:
                    out.append(cur)
                cur = Bar(lane, start, end, count, work, work, name, box)
            prev_wide = is_wide
        if cur is not None:
            out.append(cur)
    return out


@dataclass
class Bar:
    """A drawn bar, in the payload's integer steps: its lane and name (indices), start and
    reach, how many activities it holds and their busy time (the longest's too: its name)."""

    lane: int
    start: int
    reach: int
    count: int
    busy: int
    longest: int
    name: int
    box: int | None  # its bin of the view (BIN_PIXELS wide)

    def width(self) -> float:
        return thickness(self.count, self.reach - self.start, self.busy)


def split(
    frame: pd.DataFrame, region: tuple[float, float] | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(inside, outside) the region: by start time; all inside when there is no region."""
    if region is None:
        return frame, frame.iloc[0:0]
    inside = (frame["start_ns"] >= region[0]) & (frame["start_ns"] < region[1])
    return frame[inside], frame[~inside]
