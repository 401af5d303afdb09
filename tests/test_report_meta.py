"""The report's facts list says times in units ("timeline span 7.69 s"), not raw nanoseconds."""

from __future__ import annotations

import re
from pathlib import Path

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.render import render

DATA = Path(__file__).parent / "data"


def test_timeline_span_is_a_time_not_a_nanosecond_count() -> None:
    session = nsdiag.load([DATA / "nsys/sync_heavy.sqlite.gz"])
    html = render(diagnose(session), session, "html")
    assert "span_ns" not in html and "timeline span ns" not in html
    span = re.search(r"timeline span</dt>\s*<dd>([^<]*)</dd>", html)
    assert span is not None, "the facts list has no timeline span"
    assert re.fullmatch(r"[\d.]+ (s|ms|µs|us|ns)", span.group(1).strip()), span.group(1)
