"""The plotly.js inlined once into every HTML report: the vendored `finance` partial bundle
(templates/vendor/plotly-finance.min.js, 1.3 MB; see templates/vendor/README.md), not the
full 4.8 MB plotly.js of the Python package. No network: the file ships in the wheel.

Also how a figure reaches it (`figure_html`): compact JSON (floats to 6 significant digits,
no escapes a script does not need) and the style every chart shares (charts.SHARED_LAYOUT and
charts.AXIS_STYLE, as a plotly template) and the plot config written once per page
(`page_setup`, after the bundle), not once per chart.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

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
CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "topojsonURL": "",
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
}
SIGNIFICANT = 6  # digits a float keeps in a chart's JSON: 1/10^5 of a value, below a pixel
# The page's one global: the shared templates (light, dark, and the one in use) and config;
# report.js swaps the one in use when the system's colour scheme changes.
GLOBAL = "nsdiagPlot"


@functools.lru_cache(maxsize=1)
def plotly_js() -> str:
    """The bundle's text, verbatim (vendored code, not program data)."""
    return (templates_dir() / BUNDLE).read_text(encoding="utf-8")


def _shared() -> tuple[dict[str, Any], dict[str, Any]]:
    from nsdiag.render.charts import AXIS_STYLE, SHARED_LAYOUT

    return SHARED_LAYOUT, AXIS_STYLE


# JavaScript: the page has a dark style and the system asks for dark.
DARK_WANTED = (
    "(/dark/.test((document.querySelector('meta[name=color-scheme]')||{}).content)"
    "&&!!window.matchMedia&&matchMedia('(prefers-color-scheme: dark)').matches)"
)
# What dark mode changes in the shared template (the page's own colours: report.css).
DARK_LAYOUT: dict[str, Any] = {"font": {"color": "#d8dde3"}, "plot_bgcolor": "#1c2127"}
DARK_AXIS: dict[str, Any] = {
    "gridcolor": "#343b44",
    "zerolinecolor": "#4a525c",
    "linecolor": "#6b7480",
}


def _template(dark: bool) -> dict[str, Any]:
    layout, axis = _shared()
    if dark:
        layout = {**layout, **DARK_LAYOUT, "font": {**layout["font"], **DARK_LAYOUT["font"]}}
        axis = {**axis, **DARK_AXIS}
    return {"layout": {**layout, "xaxis": axis, "yaxis": axis}}


@functools.lru_cache(maxsize=1)
def page_setup() -> str:
    """The script that follows the bundle: the template and config every chart names. The
    template is dark where the system asks for it and the page has a dark style (its
    `<meta name="color-scheme">` says "dark"); report.js swaps it when the system does."""
    return (
        f"window.{GLOBAL}={{light:{_dumps(_template(False))},dark:{_dumps(_template(True))},"
        f"config:{_dumps(CONFIG)}}};"
        f"{GLOBAL}.template={DARK_WANTED}?{GLOBAL}.dark:{GLOBAL}.light;"
    )


def inline() -> str:
    """What the report's head script holds: the bundle, then `page_setup`."""
    return f"{plotly_js()}\n{page_setup()}"


def _rounded(value: Any) -> Any:
    """Floats to SIGNIFICANT digits (whole ones as ints); lists and dicts walked."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        short = float(f"{value:.{SIGNIFICANT}g}")
        return int(short) if short.is_integer() and abs(short) < 1e15 else short
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _dumps(value: Any) -> str:
    """Compact JSON safe inside <script>: `</` and `<!` escaped (nothing can close the script or
    open a comment), U+2028/9 escaped; other characters as UTF-8, not \\u escapes."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("</", "<\\/")
        .replace("<!", "\\u003c!")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _without_shared(layout: dict[str, Any]) -> dict[str, Any]:
    """The layout less what the page's template already says (equal values only)."""
    shared, axis = _shared()
    out = {k: v for k, v in layout.items() if k != "template" and shared.get(k, object()) != v}
    for key, value in out.items():
        if (key.startswith(("xaxis", "yaxis"))) and isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if axis.get(k, object()) != v}
    return out


def figure_html(fig: Any, div_id: str) -> str:
    """A figure as a sized div and one script, `Plotly.newPlot(id, data, layout, config)`, its
    layout on the page's shared template (what plotly's own to_html writes, smaller)."""
    from plotly.io.json import to_json_plotly

    spec = fig.to_dict()
    data = _rounded(json.loads(to_json_plotly(spec.get("data", []))))
    layout = _rounded(json.loads(to_json_plotly(spec.get("layout", {}))))
    height = layout.get("height") or 400
    return (
        f'<div style="height:{height}px;width:100%">'
        f'<div id="{div_id}" class="plotly-graph-div" style="height:100%;width:100%"></div>'
        f"<script>Plotly.newPlot({_dumps(div_id)},{_dumps(data)},"
        f"Object.assign({{template:{GLOBAL}.template}},{_dumps(_without_shared(layout))}),"
        f"{GLOBAL}.config)</script></div>"
    )
