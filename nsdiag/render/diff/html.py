"""The comparison as one self-contained HTML file: templates/diff.html.j2, the report's CSS and
JS (sortable tables), plotly inlined once, no network requests (as render/html.py does)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from nsdiag.analysis.diff import Diff
from nsdiag.render.diff import charts as diff_charts
from nsdiag.render.diff import rows as diff_rows
from nsdiag.render.html import _asset, _chart, compact, environment
from nsdiag.render.plotly_js import inline
from nsdiag.render.registry import DiffOptions
from nsdiag.version import __version__

TEMPLATE = "diff.html.j2"


def _sides(diff: Diff) -> list[dict[str, str]]:
    return [
        {
            "label": side.label.upper(),
            "sources": ", ".join(side.sources),
            "device": str(side.diagnosis.device.get("name") or "unknown GPU"),
            "region": side.describe(),
            "spread": diff_rows.spread(side.region_time),
            "metrics": "yes" if side.diagnosis.kernels else "no (timeline only)",
        }
        for side in (diff.before, diff.after)
    ]


def _matches(diff: Diff) -> list[dict[str, Any]]:
    return [
        {
            "before": r.before if r.match.before else "",
            "after": r.after if r.match.after else "",
            "before_full": r.before_full,
            "after_full": r.after_full,
            "method": r.method,
            "how": r.how,
            "before_time": r.before_time,
            "before_v": r.match.before_ns,
            "after_time": r.after_time,
            "after_v": r.match.after_ns,
            "change": f"{r.change} ({r.change_pct})",
            "change_v": r.match.change_ns,
            "launches": r.launches,
            "per_launch": r.per_launch,
            "verdicts": r.verdicts,
        }
        for r in sorted(diff_rows.match_rows(diff), key=lambda r: -abs(r.match.change_ns))
    ]


def _findings(diff: Diff) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {"checked": [], "changed": [], "new": [], "other": []}
    for c in diff.findings:
        f = c.finding
        row = {
            "rule": f.rule,
            "cause": f.cause,
            "title": f.title,
            "where": diff_rows.where(c),
            "status": c.status,
            "expected": diff_rows.expected(diff, c),
            "measured": diff_rows.measured(diff, c),
            "ratio": diff_rows.ratio(c.ratio),
            "how": c.how,
            "counted": "yes" if c.counted else "",
            "before": diff_rows.time(diff, c.predicted_ns) if c.predicted_ns else "",
            "after": diff_rows.time(diff, c.after_saved_ns) if c.after_saved_ns else "",
        }
        if c.status == "resolved" or c.expected_ns:
            out["checked"].append(row)
        elif c.status in ("changed", "persists"):
            out["changed"].append(row)
        elif c.status == "new":
            out["new"].append(row)
        else:
            out["other"].append(row)
    return out


def context(diff: Diff) -> dict[str, Any]:
    roofline, arrows = diff_charts.roofline_moves(diff)
    timelines = [
        {"label": label, "chart": _chart(fig, f"chart-timeline-{label.lower()}")}
        for label, fig in diff_charts.aligned_timelines(diff)
    ]
    return {
        "title": "nsdiag diff",
        "version": __version__,
        "sides": _sides(diff),
        "note": diff.region.note,
        "warnings": list(diff.warnings),
        "headline": diff_rows.region_headline(diff),
        "runs": diff_rows.runs_line(diff),
        "check": diff_rows.check_line(diff),
        "gate": diff_rows.gate_line(diff.gate) if diff.gate is not None else None,
        "gate_failed": diff.gate is not None and not diff.gate.passed,
        "summary": diff_rows.summary(diff),
        "unit": diff_rows.unit(diff),
        "waterfall": _chart(diff_charts.waterfall(diff), "chart-waterfall"),
        "matches": _matches(diff),
        "findings": _findings(diff),
        "changes": diff_rows.change_rows(diff),
        "unestimated": diff_rows.unestimated_changes(diff),
        "roofline": _chart(roofline, "chart-roofline"),
        "arrows": arrows,
        "after_metrics": bool(diff.after.diagnosis.kernels),
        "timelines": timelines,
        "css": _asset("report.css"),
        "js": _asset("report.js"),
        "plotly_js": Markup(inline()),
    }


def render_diff_html(diff: Diff, options: DiffOptions | None = None) -> str:
    """Every match is listed (a sortable table): `options.top` does not cut it."""
    template = environment().get_template(TEMPLATE)
    return compact(lambda ctx: template.render(**ctx), context(diff))
