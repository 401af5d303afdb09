"""The timeline shows idle time at its opening zoom (issue 41, item 6): a merged bar spans a few
pixels and is as thick as the share of it its activities fill, so the busy share the lanes draw
is the busy share measured, on real recordings of a mostly idle GPU (bert_serve: about 6% busy in
its region) and of busy ones; the page's merge (templates/report/timeline.js) draws what the
figure's opening traces hold; the legend stands above the busy panel, clear of it.

Checked on the figure data (plotly traces and layout), not on pixels. The page's script runs
under node where node is installed (a fake Plotly records what it draws).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.model.intervals import union_ns
from nsdiag.render import render, timeline_chart, timeline_zoom
from nsdiag.resources import templates_dir
from tests.conftest import DATA

# Recordings and the busy share of their kernel lane in the analysed region (measured below;
# the numbers say what shape each one is).
RECORDINGS = {
    "third_party/bert_serve": "mostly idle (a server between requests)",
    "third_party/train_logging": "about half busy",
    "third_party/vit_fp32": "almost always busy",
}
KERNELS = "stream 7 · kernels"


@pytest.fixture(scope="module", params=list(RECORDINGS))
def case(request: pytest.FixtureRequest) -> tuple[str, Any, Any]:
    session = nsdiag.load(DATA / request.param)
    return request.param, session, diagnose(session)


def _figure(session: Any, diagnosis: Any, **kwargs: Any) -> Any:
    nvtx = session.nvtx_ranges if len(session.nvtx_ranges) else None
    return timeline_chart.timeline(session.timeline, nvtx, **kwargs)


def _origin(session: Any) -> float:
    starts = [session.timeline["start_ns"].min()]
    if len(session.nvtx_ranges):
        starts.append(session.nvtx_ranges["start_ns"].min())
    return float(min(starts))


def drawn_share(trace: Any, lane: str, view: tuple[float, float]) -> float:
    """The share of the view (ms) a lane's bars cover, each weighted by its thickness (a bar as
    thick as the lane's full bar counts all its length)."""
    covered = 0.0
    for base, length, y, width in zip(trace.base, trace.x, trace.y, trace.width, strict=True):
        if y == lane:
            overlap = min(base + length, view[1]) - max(base, view[0])
            covered += max(overlap, 0.0) * width / timeline_zoom.FULL
    return covered / (view[1] - view[0])


def measured_share(session: Any, view_ns: tuple[float, float]) -> float:
    """The share of the view the stream's kernels ran (the union of their times, clipped)."""
    t = session.timeline
    kernels = t[(t["kind"] == "kernel") & (t["stream"].astype(str) == "7")]
    starts = np.clip(kernels["start_ns"].to_numpy(float), *view_ns)
    ends = np.clip(kernels["end_ns"].to_numpy(float), *view_ns)
    return union_ns(starts, ends) / (view_ns[1] - view_ns[0])


def test_the_opening_view_draws_the_busy_share_measured(case: tuple[str, Any, Any]) -> None:
    name, session, diagnosis = case
    fig = _figure(session, diagnosis, region=diagnosis.region.windows, zoomable=2500)
    view = tuple(fig.layout.xaxis2.range)  # the chart opens on the analysed region
    t0 = _origin(session)
    measured = measured_share(session, (t0 + view[0] * 1e6, t0 + view[1] * 1e6))
    kernels = next(t for t in fig.data if t.name == "kernel")
    drawn = drawn_share(kernels, KERNELS, view)
    assert drawn == pytest.approx(measured, abs=0.02), f"{name}: {RECORDINGS[name]}"
    if name == "third_party/bert_serve":
        assert measured < 0.1 and drawn < 0.1  # not a solid lane beside "GPU busy 6%"


def test_without_zoom_the_whole_trace_draws_the_busy_share_measured(
    case: tuple[str, Any, Any],
) -> None:
    """The bars drawn in Python (diff's timelines): the whole trace at its own pixel."""
    name, session, diagnosis = case
    fig = _figure(session, diagnosis)
    t0 = _origin(session)
    end = max(session.timeline["end_ns"].max(), session.nvtx_ranges["end_ns"].max())
    view = (0.0, (float(end) - t0) / 1e6)
    kernels = next(t for t in fig.data if t.name == "kernel")
    measured = measured_share(session, (t0, float(end)))
    assert drawn_share(kernels, KERNELS, view) == pytest.approx(measured, abs=0.02), name


def test_no_bar_is_drawn_busier_than_its_activities(case: tuple[str, Any, Any]) -> None:
    """A bar's drawn area is its busy time, or the thinnest bar's where it is less."""
    _, session, diagnosis = case
    fig = _figure(session, diagnosis, region=diagnosis.region.windows, zoomable=2500)
    meta = fig.layout.meta["nsdiagTimeline"]
    view = tuple(fig.layout.xaxis2.range)
    for index in map(int, meta["bars"]):
        for bar in timeline_zoom.bars(meta, index, view, timeline_chart.PIXELS):
            extent = bar.reach - bar.start
            area = extent * bar.width() / timeline_zoom.FULL
            assert area <= bar.busy + timeline_zoom.LEAST * extent + 1e-9
            assert bar.width() <= timeline_zoom.FULL
            # In the view, a kernel lane's merged bar spans a few pixels at most (one longer
            # activity excepted; a sparse lane's segments, merged to the report's budget, can
            # span more, thin).
            unit = meta["unit"]
            pixel = (view[1] - view[0]) * 1e6 / unit / timeline_chart.PIXELS
            inside = view[0] * 1e6 <= bar.start * unit < view[1] * 1e6
            if bar.count > 1 and inside and meta["lanes"][bar.lane] == KERNELS:
                assert extent <= (timeline_zoom.BIN_PIXELS + 1) * pixel + bar.longest


_FAKE_PAGE = """
const fs = require("fs");
const [script, figure, width] = process.argv.slice(2);
const fig = JSON.parse(fs.readFileSync(figure, "utf8"));
const gd = { data: fig.data, layout: fig.layout, on() {}, setAttribute() {},
  _fullLayout: { xaxis2: { range: fig.layout.xaxis2.range, _length: Number(width) } } };
let drawn = null;
global.window = { Plotly: { restyle(g, update, traces) { drawn = { update, traces }; } } };
global.document = { querySelectorAll() { return [gd]; } };
eval(fs.readFileSync(script, "utf8"));
process.stdout.write(JSON.stringify(drawn));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_page_draws_what_the_figure_opens_with(tmp_path: Path) -> None:
    """timeline.js, run on the figure at the width the Python side assumed, draws the bars the
    figure's traces hold (its merge and timeline_zoom.bars are one algorithm)."""
    session = nsdiag.load(DATA / "third_party/bert_serve")
    diagnosis = diagnose(session)
    fig = _figure(session, diagnosis, region=diagnosis.region.windows, zoomable=2500)
    (tmp_path / "figure.json").write_text(fig.to_json(), encoding="utf-8")
    (tmp_path / "page.js").write_text(_FAKE_PAGE, encoding="utf-8")
    script = templates_dir() / "report" / "timeline.js"
    out = subprocess.run(
        ["node", str(tmp_path / "page.js"), str(script), str(tmp_path / "figure.json"), "1200"],
        capture_output=True,
        text=True,
        check=True,
    )
    drawn = json.loads(out.stdout)
    bars = [i for i, t in enumerate(fig.data) if t.type == "bar"]
    assert drawn["traces"] == bars  # each kind's bars, then its hover trace
    update = drawn["update"]
    for k, index in enumerate(drawn["traces"]):
        trace = fig.data[index]
        hover = trace.hoverinfo == "text"
        shown = fig.data[index - 1] if hover else trace  # the hover trace: the bars again
        assert update["y"][k] == list(shown.y)
        assert update["base"][k] == pytest.approx(list(shown.base))
        assert update["x"][k] == pytest.approx(list(shown.x))
        if hover:
            assert trace.marker.opacity == 0 and trace.showlegend is False
            assert update["width"][k] == timeline_zoom.FULL == trace.width
            assert len(update["hovertext"][k]) == len(shown.y)
            if trace.name == "kernel":
                assert any("% of it)" in h for h in update["hovertext"][k])
        else:
            assert trace.hoverinfo == "skip"
            assert update["width"][k] == list(trace.width)


def test_the_legend_stands_above_the_busy_panel() -> None:
    """Its bottom on the plot's top edge (paper y 1: the busy panel's top), in the top margin
    that holds it, on the left; the region's buttons on the right."""
    session = nsdiag.load(DATA / "third_party/bert_serve")
    diagnosis = diagnose(session)
    for fig in (
        _figure(session, diagnosis),
        _figure(session, diagnosis, region=diagnosis.region.windows, zoomable=2500),
    ):
        legend = fig.layout.legend
        assert legend.orientation == "h" and legend.yanchor == "bottom"
        assert legend.y >= fig.layout.yaxis.domain[1] == 1  # the busy panel reaches the top
        assert legend.x == 0 and legend.xanchor == "left"
        assert fig.layout.margin.t >= timeline_chart.LEGEND_ROOM >= 36
        for menu in fig.layout.updatemenus:
            assert menu.x == 1 and menu.xanchor == "right" and menu.yanchor == "bottom"
            assert fig.layout.margin.t >= 72  # the buttons' row and plotly's modebar


def test_the_report_opens_on_thin_bars_and_says_so() -> None:
    session = nsdiag.load(DATA / "third_party/bert_serve")
    page = render(diagnose(session), session, "html")
    assert "as tall as the share of it they keep the lane busy" in page
    assert '"least":' in page and '"bin":' in page  # the page's merge has what it needs
