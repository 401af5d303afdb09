"""The timeline's bars as data that the page re-merges at every zoom (templates/report/timeline.js).

Bars closer than a pixel are merged to keep a report small, but a merge made for the whole trace
hides the idle gaps inside it once the user zooms in. So the HTML report carries segments, not
bars: the analysed region's activities merged only closer than a fraction of a pixel of the
region's view (ZOOM times finer, as fine as the report's budget of segments allows), the rest
of the trace at the whole trace's pixel, as compact integer columns; the page merges them again
for the pixel of whatever range is on screen, so a bar splits when zooming shows its gaps.

Payload (the figure's `layout.meta.nsdiagTimeline`): `unit` ns per integer step, `lanes` and
`names` (plotly-escaped), `wide` (WIDE_PIXELS), and per bar trace (its index in `fig.data`) one
row per lane: [lane index, start deltas, durations, counts, busy (0: one activity), name index].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nsdiag.render import fmt

ZOOM = 8  # the region's segments are exact to 1/ZOOM of a pixel of the region's view at most
SEGMENTS = 2500  # segments a report carries at most (ZOOM halves until they fit), less
# where the report would pass its size limit (render/html.py)
STEPS_PER_PIXEL = 8  # integer time steps per pixel of the finest view


def _payload_rows(
    seg: pd.DataFrame, lanes: dict[str, int], names: dict[str, int], t0: float, unit: float
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    if seg.empty:
        return rows
    for lane, frame in seg.sort_values("start_ns", kind="stable").groupby("lane", sort=False):
        start = np.floor((frame["start_ns"].to_numpy(float) - t0) / unit).astype("int64")
        end = np.ceil((frame["end_ns"].to_numpy(float) - t0) / unit).astype("int64")
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
        "bars": bars,
    }


def split(
    frame: pd.DataFrame, region: tuple[float, float] | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(inside, outside) the region: by start time; all inside when there is no region."""
    if region is None:
        return frame, frame.iloc[0:0]
    inside = (frame["start_ns"] >= region[0]) & (frame["start_ns"] < region[1])
    return frame[inside], frame[~inside]
