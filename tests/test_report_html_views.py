"""The HTML report's views, in headless Chromium (as tests/test_report_browser.py drives it): the
timeline opens on the shaded analysed region and splits its bars again on zoom, a roofline point
leads to its kernel's card, the kernel table prints whole and fits a narrow window, and dark mode
follows the system, charts included. Each test writes a screenshot to its tmp_path and asserts on
the DOM and on the screenshot's pixels.

Recordings: tests/data/nsys/tiny_burst.sqlite.gz (H200, 2,046 kernels of 0.8 µs launched 13 µs
apart inside an NVTX range, the analysed region) and the calib ncu captures (34 signatures).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.render import render
from tests.conftest import DATA
from tests.test_render import fixture_case
from tests.test_report_browser import sync_api  # noqa: F401  (skips without playwright)

WIDE = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """The tiny_burst report and its region in chart units (ms from the chart's first time)."""
    session = nsdiag.load(DATA / "nsys" / "tiny_burst.sqlite.gz")
    diagnosis = diagnose(session)
    assert diagnosis.region is not None and not diagnosis.region.is_whole
    t0 = min(session.timeline["start_ns"].min(), session.nvtx_ranges["start_ns"].min())
    t1 = max(session.timeline["end_ns"].max(), session.nvtx_ranges["end_ns"].max())
    path = tmp_path_factory.mktemp("views") / "tiny_burst.html"
    path.write_text(render(diagnosis, session, "html"), encoding="utf-8")
    region = {
        "start": float(diagnosis.region.start_ns - t0) / 1e6,
        "end": float(diagnosis.region.end_ns - t0) / 1e6,
        "trace": float(t1 - t0) / 1e6,
    }
    return path, region


@pytest.fixture(scope="module")
def calib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    diagnosis, session = fixture_case("calib")
    path = tmp_path_factory.mktemp("views") / "calib.html"
    path.write_text(render(diagnosis, session, "html"), encoding="utf-8")
    return path


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    """Open a report (viewport, colour scheme); the page fails the test on a console error."""
    pages: list[tuple[Any, list[str]]] = []

    def opener(path: Path, viewport: dict[str, int] = WIDE, scheme: str = "light") -> Any:
        page = browser.new_page(viewport=viewport, color_scheme=scheme)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.resolve().as_uri(), wait_until="load")
        page.wait_for_timeout(300)
        pages.append((page, errors))
        return page

    yield opener
    for page, errors in pages:
        page.close()
        assert errors == []


def pixels(browser: Any, png: bytes, points: list[tuple[float, float]]) -> list[list[int]]:
    """The RGB of each (x, y) of a PNG, decoded by the browser's own canvas (on a blank page)."""
    page = browser.new_page()
    try:
        return page.evaluate(
            """async ([png, points]) => {
            const img = new Image();
            img.src = "data:image/png;base64," + png;
            await img.decode();
            const canvas = document.createElement("canvas");
            canvas.width = img.width; canvas.height = img.height;
            const g = canvas.getContext("2d");
            g.drawImage(img, 0, 0);
            return points.map(([x, y]) =>
                Array.from(g.getImageData(Math.round(x), Math.round(y), 1, 1).data.slice(0, 3)));
            }""",
            [base64.b64encode(png).decode(), points],
        )
    finally:
        page.close()


def _timeline_state(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """() => {
        const gd = document.getElementById("chart-timeline");
        // the drawn bars, and their hover trace: the same bars, full thickness, with the text
        const drawn = gd.data.find(t => t.name === "kernel" && t.hoverinfo === "skip");
        const kernels = gd.data.find(t => t.name === "kernel" && t.hoverinfo === "text");
        return {
            range: gd._fullLayout.xaxis2.range.map(Number),
            shapes: (gd.layout.shapes || []).map(s => [s.type, s.x0, s.x1, s.yref]),
            kernel_bars: kernels.x.length,
            kernel_hovers: Array.from(kernels.hovertext || []),
            kernel_bases: Array.from(kernels.base || []).map(Number),
            kernel_widths: Array.from(drawn.width || []).map(Number),
            drawn_bases: Array.from(drawn.base || []).map(Number),
            buttons: Array.from(gd.querySelectorAll(".updatemenu-button")).map(
                b => b.textContent),
        };
        }"""
    )


def _plot_area(page: Any, div: str, axis: str = "xaxis2", yaxis: str = "yaxis2") -> dict:
    """A plot area's box in page pixels, and the pixel of a data x on it."""
    return page.evaluate(
        f"""() => {{
        const gd = document.getElementById("{div}");
        const box = gd.getBoundingClientRect();
        const x = gd._fullLayout.{axis}, y = gd._fullLayout.{yaxis};
        return {{left: box.left + x._offset, top: box.top + y._offset,
                 width: x._length, height: y._length, range: x.range.map(Number)}};
        }}"""
    )


def test_timeline_opens_on_the_shaded_region_and_goes_back_to_the_whole_trace(
    browser: Any, open_page: Any, burst: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    path, region = burst
    page = open_page(path)
    state = _timeline_state(page)
    start, end = state["range"]
    assert start == pytest.approx(region["start"], abs=1e-3)
    assert end == pytest.approx(region["end"], abs=1e-3)
    assert any(
        kind == "rect" and x0 == pytest.approx(region["start"], abs=1e-3)
        for kind, x0, _x1, _yref in state["shapes"]
    )
    assert state["buttons"] == ["analysed region", "whole trace"]
    chart = page.locator("#chart-timeline")
    chart.scroll_into_view_if_needed()
    page.locator("#chart-timeline .updatemenu-button", has_text="whole trace").click()
    page.wait_for_timeout(300)
    whole = _timeline_state(page)["range"]
    assert whole[0] <= 0.01 and whole[1] >= region["trace"] * 0.99
    # On the screenshot: the plot area is tinted inside the region, white outside it.
    area = _plot_area(page, "chart-timeline")
    shot = tmp_path / "timeline-whole.png"
    page.screenshot(path=str(shot))
    scale = area["width"] / (area["range"][1] - area["range"][0])
    y = area["top"] + 2  # above the first lane's bars
    inside = area["left"] + ((region["start"] + region["end"]) / 2 - area["range"][0]) * scale
    outside = area["left"] + (region["start"] / 2 - area["range"][0]) * scale
    tinted, white = pixels(browser, shot.read_bytes(), [(inside, y), (outside, y)])
    assert white == [255, 255, 255]
    assert tinted != white and tinted[2] > tinted[0]  # a blue tint
    page.locator("#chart-timeline .updatemenu-button", has_text="analysed region").click()
    page.wait_for_timeout(300)
    assert _timeline_state(page)["range"] == pytest.approx(state["range"], abs=1e-3)


def test_zooming_in_splits_the_merged_bars(
    open_page: Any, burst: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    """At the region's width a bar holds kernels 13 µs apart (under a pixel); half a millisecond
    on screen shows each launch, idle gaps between them, and its own hover."""
    path, region = burst
    page = open_page(path)
    before = _timeline_state(page)
    assert any("activities</b> merged" in h for h in before["kernel_hovers"])
    assert before["drawn_bases"] == before["kernel_bases"]
    # launches 0.8 µs in every 13 µs: a merged bar is thin (about 6% of a lane's full bar)
    assert sorted(before["kernel_widths"])[len(before["kernel_widths"]) // 2] < 0.2
    window = [region["start"] + 1.0, region["start"] + 1.5]
    page.evaluate(f"() => Plotly.relayout('chart-timeline', {{'xaxis2.range': {window}}})")
    page.wait_for_timeout(300)
    after = _timeline_state(page)
    shown = [
        h
        for h, b in zip(after["kernel_hovers"], after["kernel_bases"], strict=True)
        if window[0] <= b <= window[1]
    ]
    assert len(shown) >= 25  # 0.5 ms / 13 µs: ~38 launches
    assert all("merged" not in h for h in shown)
    widths = [
        w
        for w, b in zip(after["kernel_widths"], after["drawn_bases"], strict=True)
        if window[0] <= b <= window[1]
    ]
    assert widths and all(w == 0.8 for w in widths)  # one launch a bar: busy all along
    page.locator("#chart-timeline").screenshot(path=str(tmp_path / "timeline-zoomed.png"))
    page.evaluate("() => Plotly.relayout('chart-timeline', {'xaxis2.autorange': true})")
    page.wait_for_timeout(300)
    assert _timeline_state(page)["kernel_bars"] < after["kernel_bars"]  # merged again


def _points(page: Any) -> list[dict[str, Any]]:
    """Each roofline point: its kernel id, where it is drawn (page pixels), its distance to the
    nearest other point, and whether the kernel has a card."""
    return page.evaluate(
        """() => {
        const gd = document.getElementById("chart-roofline");
        const box = gd.getBoundingClientRect();
        const x = gd._fullLayout.xaxis, y = gd._fullLayout.yaxis;
        const points = [];
        for (const t of gd.data.filter(t => t.mode === "markers")) {
            t.x.forEach((v, i) => points.push({
                id: t.customdata[i],
                x: box.left + x._offset + x.c2p(x.d2c(v)),
                y: box.top + y._offset + y.c2p(y.d2c(t.y[i])),
                card: !!document.getElementById("kernel-" + t.customdata[i])}));
        }
        points.forEach(p => { p.alone = Math.min(...points.filter(q => q !== p).map(
            q => Math.hypot(q.x - p.x, q.y - p.y))); });
        return points;
        }"""
    )


def _click(page: Any, at: dict[str, float]) -> None:
    page.mouse.move(at["x"], at["y"])
    page.wait_for_timeout(100)
    page.mouse.click(at["x"], at["y"])
    page.wait_for_timeout(300)


def test_a_click_on_a_roofline_point_opens_its_card(
    open_page: Any, calib: Path, tmp_path: Path
) -> None:
    """A point of a kernel with a card goes to the card (the URL names it); one without a card
    (calib has 34 signatures, 10 cards) finds its row in the kernel table."""
    page = open_page(calib)
    page.locator("#chart-roofline").scroll_into_view_if_needed()
    points = _points(page)
    carded = max((p for p in points if p["card"]), key=lambda p: p["alone"])
    other = max((p for p in points if not p["card"]), key=lambda p: p["alone"])
    assert carded["alone"] > 20 and other["alone"] > 20  # nothing else under the cursor
    _click(page, carded)
    card = f"kernel-{carded['id']}"
    assert page.evaluate("location.hash") == f"#{card}"
    top = page.evaluate(f"document.getElementById('{card}').getBoundingClientRect().top")
    header = page.evaluate("document.querySelector('header.top').getBoundingClientRect().bottom")
    assert header <= top < header + 100  # scrolled to the card, clear of the sticky header
    page.screenshot(path=str(tmp_path / "card.png"))
    page.locator("#chart-roofline").scroll_into_view_if_needed()
    _click(page, _points(page)[points.index(other)])
    row = page.locator("#kernel-table tbody tr.picked")
    assert row.count() == 1 and row.locator("td").first.get_attribute("data-v") == str(other["id"])
    assert row.is_visible() and page.evaluate("location.hash") == f"#{card}"


def test_printing_shows_the_whole_kernel_table(open_page: Any, calib: Path, tmp_path: Path) -> None:
    page = open_page(calib)
    page.emulate_media(media="print")
    wrap = page.evaluate(
        """() => {
        const wrap = document.querySelector(".table-wrap");
        const style = getComputedStyle(wrap);
        return {overflow: style.overflowY, height: wrap.clientHeight,
                table: document.getElementById("kernel-table").offsetHeight,
                rows: document.querySelectorAll("#kernel-table tbody tr").length,
                nav: getComputedStyle(document.querySelector("header.top nav")).display};
        }"""
    )
    assert wrap["rows"] == 34 and wrap["overflow"] == "visible"
    assert wrap["height"] >= wrap["table"]  # nothing clipped to a scroll box
    assert wrap["nav"] == "none"
    page.screenshot(path=str(tmp_path / "print.png"), full_page=True)
    assert page.pdf()[:4] == b"%PDF"


@pytest.mark.parametrize("width", [800, 1000])
def test_a_narrow_window_shows_every_column_without_scrolling(
    open_page: Any, calib: Path, tmp_path: Path, width: int
) -> None:
    page = open_page(calib, viewport={"width": width, "height": 900})
    fit = page.evaluate(
        """() => {
        const wrap = document.querySelector(".table-wrap");
        const page = document.documentElement;
        const right = wrap.getBoundingClientRect().right;
        const cells = Array.from(document.querySelectorAll("#kernel-table td"));
        return {page: page.scrollWidth - page.clientWidth,
                wrap: wrap.scrollWidth - wrap.clientWidth,
                outside: cells.filter(c => c.getBoundingClientRect().right > right + 1).length,
                name: document.querySelector("#kernel-table td.name")
                    .getBoundingClientRect().width};
        }"""
    )
    assert fit["page"] <= 0 and fit["wrap"] <= 0 and fit["outside"] == 0
    assert fit["name"] > 200  # a name is not squeezed into a column a few letters wide
    page.locator("#kernels").screenshot(path=str(tmp_path / f"table-{width}.png"))


def test_dark_mode_follows_the_system_charts_included(
    browser: Any, open_page: Any, calib: Path, tmp_path: Path
) -> None:
    colours = {}
    for scheme in ("dark", "light"):
        page = open_page(calib, scheme=scheme)
        page.locator("#chart-roofline").scroll_into_view_if_needed()
        area = _plot_area(page, "chart-roofline", "xaxis", "yaxis")
        shot = tmp_path / f"{scheme}.png"
        page.screenshot(path=str(shot))
        colours[scheme] = pixels(
            browser,
            shot.read_bytes(),
            [(5, 500), (area["left"] + area["width"] - 3, area["top"] + 3)],  # page, plot
        )
    for page_rgb, plot_rgb in [colours["dark"]]:
        assert max(page_rgb) < 60 and max(plot_rgb) < 60
    for page_rgb, plot_rgb in [colours["light"]]:
        assert min(page_rgb) > 200 and min(plot_rgb) > 200
    # The system switching while the page is open: the charts follow.
    page.emulate_media(color_scheme="dark")
    page.wait_for_timeout(300)
    charts = page.evaluate(
        "Array.from(document.querySelectorAll('.js-plotly-plot'), d => d._fullLayout.plot_bgcolor)"
    )
    assert len(charts) > 3 and set(charts) == {"#1c2127"}
