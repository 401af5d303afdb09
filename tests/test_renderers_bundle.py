"""The plotly.js inlined into HTML reports is the vendored `finance` partial bundle
(templates/vendor/, nsdiag/render/plotly_js.py): every trace type a report's figures use is one
the bundle registers (a type it lacks would draw nothing, silently), the bundle is inlined exactly
once, its version is the Python plotly package's, and reports stay under 1.5 MB."""

from __future__ import annotations

import json
import re
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from nsdiag.analysis.diff import compare
from nsdiag.render import render
from nsdiag.render.diff.html import render_diff_html
from nsdiag.render.plotly_js import BUNDLE, TRACES, VERSION, plotly_js
from nsdiag.resources import templates_dir
from tests.conftest import diagnosed, side

MB = 1_000_000
# The reference report and the largest ones (tools/snapshot_outputs.py's recordings: infer_cnn's
# 60 signatures, the ranks' timelines of verify2/ddp_straggler), and the diff demo.
RECORDINGS = (
    "reference/raw.csv.gz",
    "programs/infer_cnn",
    "multi_gpu/verify/ddp_straggler",
    "multi_gpu/verify2/ddp_straggler",
)
DIFF = ("diff_demo/naive", "diff_demo/float4")
# Every report stays under 1.5 MB: the 1.3 MB bundle and at most ~200 kB of its own (each long
# name once, the timeline at the chart's pixel width, compact chart JSON: render/html.py).
LIMIT = 1.5 * MB
_NEW_PLOT = re.compile(r"Plotly\.newPlot\(\s*")


@cache
def report(name: str) -> str:
    if name == "diff":
        return render_diff_html(compare(side(DIFF[0]), side(DIFF[1])))
    session, found = diagnosed(name)
    return render(found, session, "html")


def figures(html: str) -> list[list[dict[str, Any]]]:
    """The traces of every `Plotly.newPlot("id", [traces], layout, config)` in the report."""
    body = html.replace(plotly_js(), "")
    decoder = json.JSONDecoder()
    found = []
    for match in _NEW_PLOT.finditer(body):
        div_id, end = decoder.raw_decode(body, match.end())
        assert isinstance(div_id, str)
        rest = body[end:].lstrip()
        assert rest.startswith(",")
        start = end + (len(body[end:]) - len(rest)) + 1
        while body[start].isspace():
            start += 1
        traces, _ = decoder.raw_decode(body, start)
        found.append(traces)
    return found


@pytest.mark.parametrize("name", [*RECORDINGS, "diff"])
def test_every_trace_type_is_in_the_bundle(name: str) -> None:
    html = report(name)
    charts = figures(html)
    assert charts and len(charts) == html.count('class="plotly-graph-div"')
    types = set()
    for traces in charts:
        for trace in traces:
            assert "type" in trace, trace.keys()
            types.add(trace["type"])
    assert types and types <= TRACES, f"trace types the bundle lacks: {sorted(types - TRACES)}"


@pytest.mark.parametrize("name", [*RECORDINGS, "diff"])
def test_the_bundle_is_inlined_once_and_the_report_is_small(name: str) -> None:
    html = report(name)
    assert html.count(plotly_js()) == 1
    assert html.count("* plotly.js") == 1  # no second copy (the full plotly.js) besides it
    size = len(html.encode("utf-8"))
    assert size < LIMIT, f"{name}: {size / MB:.3f} MB"


def test_the_bundle_is_the_python_plotly_version_and_small() -> None:
    from plotly.offline import get_plotlyjs_version

    source = plotly_js()
    assert source.startswith(f"/**\n* plotly.js (finance - minified) v{VERSION}\n")
    # the figures' JSON is the Python package's: its plotly.js must be the bundle's minor release
    # (pyproject.toml pins plotly to one minor release; moving it means re-vendoring the bundle)
    assert get_plotlyjs_version().split(".")[:2] == VERSION.split(".")[:2]
    assert len(source.encode("utf-8")) < 1.35 * MB
    assert "</script" not in source.lower()
    vendor = templates_dir() / "vendor"
    assert (vendor / "LICENSE.plotly.js").read_text().startswith("MIT License")
    assert VERSION in (vendor / "README.md").read_text()
    assert (templates_dir() / BUNDLE).is_file()


def test_the_bundle_registers_exactly_the_listed_traces(tmp_path: Path) -> None:
    """TRACES is what the bundle itself reports (Plotly.PlotSchema) in headless Chromium."""
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists() or shutil.which(chromium) is None:
        pytest.skip(f"{chromium} not found")
    page_file = tmp_path / "bundle.html"
    page_file.write_text(f"<!DOCTYPE html><script>{plotly_js()}</script>", encoding="utf-8")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.goto(page_file.as_uri())
            traces = page.evaluate("Object.keys(Plotly.PlotSchema.get().traces)")
            version = page.evaluate("Plotly.version")
        finally:
            browser.close()
    assert set(traces) == TRACES
    assert version == VERSION


def test_long_names_and_texts_are_written_once() -> None:
    """A kernel's full name (1.5 kB for a demangled batch-norm template, named in the table, its
    card, the changes and the chains) and a rule's fix are in the page once; every other mention
    points at that one (report.js copies it there)."""
    body = report("programs/infer_cnn").replace(plotly_js(), "")
    titles = re.findall(r'title="([^"]{80,})"', body)
    assert titles and len(titles) == len(set(titles))
    carried = re.findall(r'data-n="(\d+)"', body)
    assert len(carried) == len(set(carried))
    referred = set(re.findall(r'data-rt?="(\d+)"', body))
    assert referred and referred <= set(carried)
    fixes = re.findall(r'<p class="fix"><span class="label">Fix</span> ([^<]{80,})', body)
    assert len(fixes) == len(set(fixes))
