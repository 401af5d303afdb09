"""The roofline chart with tensor-core roofs, opened in headless Chromium (skipped, like
tests/test_report_browser.py, without playwright or /usr/bin/chromium): the report of the LM
head's twelve GEMMs opens cleanly and plotly draws the fp16 and bf16 tensor roofs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.render import render
from tests.conftest import DATA
from tests.test_report_browser import Page


def test_tensor_roofs_draw_in_the_browser(browser: Any, tmp_path: Path) -> None:
    session = nsdiag.load(DATA / "programs/gemm_shapes.raw.csv.gz")
    report = tmp_path / "gemms.html"
    report.write_text(render(diagnose(session), session, "html"), encoding="utf-8")
    page = Page(browser, report)
    try:
        assert page.errors == [] and page.requests == [page.url]
        names = page.page.evaluate(
            "Array.from(document.getElementById('chart-roofline').data, t => t.name)"
        )
        tensor = [n for n in names if "tensor peak" in n]
        assert sorted(n.split()[0] for n in tensor) == ["BF16", "FP16"]
        assert {"compute-bound", "latency-bound"} <= set(names)  # nvjet and cutlass_75 points
        assert page.page.locator("#chart-roofline svg.main-svg").count() > 0
    finally:
        page.page.close()
