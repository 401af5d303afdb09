"""The timeline's zoomable segments (render/timeline_zoom.py) and the analysed region on the chart
(render/timeline_region.py), without a browser: every activity is in exactly one segment, the
region's are kept finer than a pixel of the region's view, the payload keeps to its budget, and
a report that would pass its size limit gives up zoom detail first.

Recording: tests/data/nsys/tiny_burst.sqlite.gz (H200: 2,046 kernels of 0.8 µs, 13 µs apart, in
the NVTX range that is the analysed region).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.render import html, render, timeline_chart, timeline_zoom
from tests.conftest import DATA


@pytest.fixture(scope="module")
def burst() -> tuple[Any, Any]:
    session = nsdiag.load(DATA / "nsys" / "tiny_burst.sqlite.gz")
    return session, diagnose(session)


def _decoded(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Every segment of the payload: lane, start and end (ns from the chart's origin), count."""
    out = []
    for rows in meta["bars"].values():
        for lane, deltas, durations, counts, _busy, _names in rows:
            starts = np.cumsum(deltas) * meta["unit"]
            for start, duration, count in zip(starts, durations, counts, strict=True):
                out.append(
                    {
                        "lane": meta["lanes"][lane],
                        "start": start,
                        "end": start + duration * meta["unit"],
                        "count": count,
                    }
                )
    return out


def test_every_activity_is_in_one_segment_and_the_region_is_finer(burst: tuple) -> None:
    session, diagnosis = burst
    region = diagnosis.region
    fig = timeline_chart.timeline(
        session.timeline, session.nvtx_ranges, region=region.windows, zoomable=2500
    )
    meta = fig.layout.meta["nsdiagTimeline"]
    segments = _decoded(meta)
    assert sum(s["count"] for s in segments) == len(session.timeline) + len(session.nvtx_ranges)
    assert len(segments) <= 2500
    t0 = min(session.timeline["start_ns"].min(), session.nvtx_ranges["start_ns"].min())
    inside = [
        s
        for s in segments
        if s["lane"] == "stream 7 · kernels" and region.start_ns <= s["start"] + t0 < region.end_ns
    ]
    # A pixel of the region's view is 25 µs: launches 13 µs apart are kept apart.
    assert len(inside) > 1500
    assert max(s["end"] - s["start"] for s in inside) < (region.end_ns - region.start_ns) / 1200
    # Without zoom, the whole trace's pixel (70 µs) merges them into bars of a few pixels each,
    # thin: launches 0.8 µs in every 13 µs fill 6% of them.
    old = timeline_chart.timeline(session.timeline, session.nvtx_ranges)
    kernels = next(t for t in old.data if t.name == "kernel")
    assert len(kernels.x) < 200
    assert np.median(kernels.width) < 0.1 * timeline_zoom.FULL
    # The analysed region: shaded, and the chart opens on it.
    shape = fig.layout.shapes[0]
    assert (shape.x0, shape.x1) == pytest.approx(
        ((region.start_ns - t0) / 1e6, (region.end_ns - t0) / 1e6)
    )
    assert tuple(fig.layout.xaxis2.range) == pytest.approx((shape.x0, shape.x1))


def test_a_report_over_its_size_limit_keeps_fewer_segments(
    burst: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, diagnosis = burst
    full = render(diagnosis, session, "html")
    monkeypatch.setattr(html, "SIZE_LIMIT", len(full.encode()) - 10_000)
    smaller = render(diagnosis, session, "html")
    assert len(smaller.encode()) <= html.SIZE_LIMIT
    assert smaller.count('data-n="0"') == 1  # written once again from the first mention
