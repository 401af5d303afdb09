"""Open rendered reports in headless Chromium (Playwright driving Debian's /usr/bin/chromium).

Checks what only a browser can: no console errors, no network requests besides the file itself,
plotly drew every chart, header clicks sort the kernel table, the filter box filters, and a kernel
named `<img src=x onerror=alert(1)>` stays text. Skipped when playwright or chromium is missing
(install: `apt-get install chromium` and `pip install playwright`; never `playwright install`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.render import render
from tests.conftest import DATA
from tests.test_render import (
    HOSTILE,
    fixture_case,
    hostile_session,
    synthetic_timeline,
    with_timeline,
)

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the playwright package is not installed "
    "(pip install playwright; the browser is the system chromium)",
)
if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
    pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Reports from every fixture, one with a timeline, and one with hostile names everywhere."""
    out = tmp_path_factory.mktemp("reports")
    paths: dict[str, Path] = {}
    for name in ("reference", "calib", "torch_cases"):
        diagnosis, session = fixture_case(name)
        paths[name] = out / f"{name}.html"
        paths[name].write_text(render(diagnosis, session, "html"), encoding="utf-8")
    for name in ("pipeline", "tiny_burst", "sync_heavy"):  # the real nsys recordings
        session = nsdiag.load(DATA / "nsys" / f"{name}.sqlite.gz")
        paths[name] = out / f"{name}.html"
        paths[name].write_text(render(diagnose(session), session, "html"), encoding="utf-8")
    diagnosis, session = fixture_case("reference")
    timeline, nvtx = synthetic_timeline()
    session = with_timeline(session, timeline, nvtx)
    paths["timeline"] = out / "timeline.html"
    paths["timeline"].write_text(render(diagnosis, session, "html"), encoding="utf-8")
    timeline, nvtx = synthetic_timeline(
        names=(HOSTILE, "ok_kernel"), nvtx_name="<script>alert(2)</script>"
    )
    session = with_timeline(hostile_session(), timeline, nvtx)
    paths["hostile"] = out / "hostile.html"
    paths["hostile"].write_text(render(diagnose(session), session, "html"), encoding="utf-8")
    return paths


class Page:
    """A page opened on a report, recording console errors, requests and dialogs."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", self._dialog)
        self.url = path.resolve().as_uri()
        self.page.goto(self.url, wait_until="load")
        self.page.wait_for_timeout(300)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def column(self, index: int) -> list[str]:
        return self.page.eval_on_selector_all(
            "#kernel-table tbody tr",
            f"rows => rows.map(r => r.cells[{index}].getAttribute('data-v') ?? "
            f"r.cells[{index}].textContent.trim())",
        )


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    pages: list[Page] = []

    def opener(path: Path) -> Page:
        pages.append(Page(browser, path))
        return pages[-1]

    yield opener
    for p in pages:
        p.page.close()


@pytest.mark.parametrize(
    "name",
    [
        "reference",
        "calib",
        "torch_cases",
        "pipeline",
        "tiny_burst",
        "sync_heavy",
        "timeline",
        "hostile",
    ],
)
def test_report_opens_cleanly_and_charts_draw(
    open_page: Any, reports: dict[str, Path], name: str
) -> None:
    page = open_page(reports[name])
    assert page.errors == []
    assert page.requests == [page.url]  # the file itself, nothing else
    plots = page.page.eval_on_selector_all(
        ".plotly-graph-div",
        "divs => divs.map(d => [d.id, d.classList.contains('js-plotly-plot'),"
        " d.querySelectorAll('svg.main-svg').length, d.getBoundingClientRect().height])",
    )
    # Timeline-only sessions (nsys, no ncu metrics) have the timeline chart alone.
    assert len(plots) >= (1 if name in ("pipeline", "tiny_burst", "sync_heavy") else 3)
    assert any(d == "chart-timeline" for d, *_ in plots) or name not in (
        "pipeline",
        "tiny_burst",
        "sync_heavy",
    )
    for div_id, drawn, svgs, height in plots:
        assert drawn and svgs > 0 and height > 50, div_id
    if name == "timeline":
        assert any(p[0] == "chart-timeline" for p in plots)
        assert page.page.locator("#chart-timeline g.trace.bars").count() >= 2


def test_each_later_mention_gets_the_full_name(open_page: Any, reports: dict[str, Path]) -> None:
    """A full name or long text is in the page once (data-n); report.js copies it onto every
    later mention: a title (data-r) or the text itself (data-rt)."""
    page = open_page(reports["calib"])
    missing = page.page.evaluate(
        """() => {
        const once = {};
        document.querySelectorAll("[data-n]").forEach(e => {
            once[e.dataset.n] = e.getAttribute("title") || e.textContent; });
        const bad = [];
        document.querySelectorAll("[data-r]").forEach(e => {
            if (!e.title || e.title !== once[e.dataset.r]) bad.push(e.outerHTML); });
        document.querySelectorAll("[data-rt]").forEach(e => {
            if (!e.textContent || e.textContent !== once[e.dataset.rt]) bad.push(e.outerHTML); });
        return [bad, document.querySelectorAll("[data-r], [data-rt]").length];
        }"""
    )
    bad, mentions = missing
    assert mentions > 0 and bad == []
    assert page.errors == []


def test_clicking_a_header_sorts_the_table(open_page: Any, reports: dict[str, Path]) -> None:
    page = open_page(reports["calib"])
    header = page.page.locator("#kernel-table thead th", has_text="launches")
    header.click()
    launches = [float(v) for v in page.column(2)]
    assert launches == sorted(launches, reverse=True) and launches != sorted(launches)
    header.click()
    assert [float(v) for v in page.column(2)] == sorted(launches)
    page.page.locator("#kernel-table thead th", has_text="kernel").click()
    names = [n.lower() for n in page.column(1)]
    assert names == sorted(names)
    page.page.locator("#kernel-table thead th", has_text="total").click()
    totals = [float(v) for v in page.column(3)]
    assert totals == sorted(totals, reverse=True)
    assert page.errors == []


def test_filter_box_filters_rows(open_page: Any, reports: dict[str, Path]) -> None:
    page = open_page(reports["calib"])
    total = page.page.locator("#kernel-table tbody tr").count()
    page.page.fill("#kernel-filter", "bank_conflicts")
    visible = page.page.locator("#kernel-table tbody tr:visible").count()
    assert 0 < visible < total
    assert page.page.locator("#kernel-count").inner_text() == f"{visible} of {total} rows"
    page.page.fill("#kernel-filter", "")
    assert page.page.locator("#kernel-table tbody tr:visible").count() == total


def test_hostile_kernel_name_stays_text(open_page: Any, reports: dict[str, Path]) -> None:
    page = open_page(reports["hostile"])
    page.page.wait_for_timeout(500)  # time for an onerror to fire
    assert page.dialogs == []
    assert page.page.locator("img").count() == 0
    assert page.page.evaluate(
        "document.querySelectorAll('script').length"
    ) == 2 + page.page.evaluate(
        "document.querySelectorAll('.plotly-graph-div').length"
    )  # plotly.js, ours, one per chart
    cells = page.page.locator("#kernel-table td.name", has_text=HOSTILE)
    assert cells.count() == 1
    assert cells.first.inner_text() == HOSTILE and cells.first.get_attribute("title") == HOSTILE
    assert page.page.locator("#cards h3", has_text=HOSTILE).count() == 1
    hover_names = page.page.evaluate(
        "document.getElementById('chart-roofline').data.flatMap(t => t.hovertext || []).join(' ')"
    )
    assert "&lt;img" in hover_names
    assert page.errors == [] and page.requests == [page.url]


def test_screenshot_of_the_reference_report(
    open_page: Any, reports: dict[str, Path], tmp_path: Path
) -> None:
    """The top of the reference report (summary, kernel table, roofline) as a PNG.

    NSDIAG_REPORT_SCREENSHOT=docs/report-reference-kernels.png refreshes the committed screenshot.
    """
    page = open_page(reports["reference"])
    bottom = page.page.evaluate(
        "document.getElementById('cards').getBoundingClientRect().top + window.scrollY"
    )
    target = Path(os.environ.get("NSDIAG_REPORT_SCREENSHOT") or tmp_path / "report.png")
    page.page.screenshot(
        path=str(target), full_page=True, clip={"x": 0, "y": 0, "width": 1400, "height": bottom}
    )
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 50_000
