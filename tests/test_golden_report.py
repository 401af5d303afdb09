"""The HTML report's structure on recordings of several shapes (issue 41, item 7), against the
golden text in tests/golden/report/ (NSDIAG_REGEN_GOLDEN=1 rewrites it): its sections, its
headings (a kernel card's by rank, not by the kernel's name), each figure's traces (type and
name) and the timeline's lanes. Not the full page: numbers and wording inside the sections are
other tests' to check. Each page stays one self-contained file.

Recordings: third_party/bert_serve (a BERT server replaying CUDA graphs, its GPU mostly idle:
ncu and nsys), reference (ncu's CSV only: no timeline), multi_gpu/verify2/ddp_straggler (two
ranks, one late: the ranks section, lanes per rank).
"""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.render import render
from tests import golden_files
from tests.conftest import DATA
from tests.test_render import EXTERNAL, outside_plotly

RECORDINGS = {
    "bert_serve": DATA / "third_party" / "bert_serve",
    "reference": DATA / "reference" / "raw.csv.gz",
    "ddp_straggler": DATA / "multi_gpu" / "verify2" / "ddp_straggler",
}
_HEADING = re.compile(r"<(h[1-4])[^>]*>(.*?)</\1>", re.S)
_CARD = re.compile(r"^#(\d+) .*")
_PLOT = re.compile(r'Plotly\.newPlot\("([^"]+)",')


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _figure(page: str, at: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The data and layout of the Plotly.newPlot call whose arguments start at `at`."""
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(page, at)
    layout_at = page.index("},", page.index("Object.assign(", end)) + 2
    layout, _ = decoder.raw_decode(page, layout_at)
    return data, layout


def structure(page: str) -> str:
    """The page's outline as lines of text."""
    lines = ["sections: " + " ".join(re.findall(r'<section id="([^"]+)"', page))]
    for level, inner in _HEADING.findall(page):
        text = _text(inner)
        if level == "h3" and _CARD.match(text):
            text = _CARD.sub(r"#\1 (a kernel's card)", text)
        lines.append(f"{level} {text}")
    for match in _PLOT.finditer(page):
        data, layout = _figure(page, match.end())
        lines.append(f"figure {match.group(1)}")
        lines += [
            f"  trace {t.get('type')} {t.get('name') or ''}".rstrip()
            + (" (hover)" if t.get("marker", {}).get("opacity") == 0 else "")
            for t in data
        ]
        lanes = layout.get("yaxis2", {}).get("categoryarray")
        if match.group(1) == "chart-timeline" and lanes:
            lines += [f"  lane {lane}" for lane in reversed(lanes)]  # top first
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", list(RECORDINGS))
def test_report_structure_is_its_golden_text(name: str) -> None:
    session = nsdiag.load(RECORDINGS[name])
    page = render(diagnose(session), session, "html")
    # self-contained: nothing fetched (tests/test_report_browser.py checks it in a browser)
    assert not re.search(r"<script[^>]*\bsrc\s*=|<link\b", page, re.IGNORECASE)
    assert not EXTERNAL.search(outside_plotly(page))
    golden_files.check(f"report/{name}.txt", structure(page))
