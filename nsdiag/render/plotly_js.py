"""The plotly.js inlined once into every HTML report: the vendored `finance` partial bundle
(templates/vendor/plotly-finance.min.js, 1.3 MB; see templates/vendor/README.md), not the
full 4.8 MB plotly.js of the Python package. No network: the file ships in the wheel."""

from __future__ import annotations

import functools

from nsdiag.resources import templates_dir

BUNDLE = "vendor/plotly-finance.min.js"
VERSION = "4.1.1"
# The trace modules the bundle registers (plotly.js dist/README.md, `finance`). A figure with
# any other trace type draws nothing; tests/test_renderers_bundle.py checks every chart's types.
TRACES = frozenset(
    {
        "bar",
        "candlestick",
        "funnel",
        "funnelarea",
        "histogram",
        "indicator",
        "ohlc",
        "pie",
        "scatter",
        "waterfall",
    }
)


@functools.lru_cache(maxsize=1)
def plotly_js() -> str:
    """The bundle's text, verbatim (vendored code, not program data)."""
    return (templates_dir() / BUNDLE).read_text(encoding="utf-8")
