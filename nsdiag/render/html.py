"""The HTML report: one self-contained file (jinja2 with autoescape, plotly.js inlined once:
the vendored partial bundle of render/plotly_js.py).

This module turns a Diagnosis into display rows (formatted strings, short names, chart HTML) and
hands them to `templates/report.html.j2`; it decides nothing about the program's performance.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis, NcuRuleResult
from nsdiag.analysis.records.findings import Finding
from nsdiag.model.session import Session
from nsdiag.model.values import number
from nsdiag.render import RenderOptions, charts, fmt, ranks, timeline_chart, timeline_zoom
from nsdiag.render.plotly_js import figure_html, inline
from nsdiag.resources import templates_dir
from nsdiag.version import __version__

TEMPLATE = "report.html.j2"
_META_SKIP = {"sources", "kernel_launches"}


@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _asset(name: str) -> Markup:
    """A CSS or JS file from templates/report/, inlined verbatim (our own code, not program
    data)."""
    source, _, _ = environment().loader.get_source(environment(), f"report/{name}")  # type: ignore[union-attr]
    return Markup(source)


def _chart(fig: go.Figure | None, div_id: str) -> Markup | None:
    """A figure as a div + script (render/plotly_js.py: compact JSON in which names cannot close
    the script)."""
    if fig is None:
        return None
    return Markup(figure_html(fig, div_id))


class Once:
    """Each long text the page repeats is written in it once: a kernel's full name (a demangled
    template name runs to 1.5 kB, and one kernel is named in the table, its card, the changes
    and the chains), a tooltip, a rule's fix or an ncu message (shown for each kernel it fires
    on, and in the changes). Its first mention carries it (a title, or its text) with `data-n`,
    later ones only `data-r` (a title) or `data-rt` (text), and report.js copies it onto them
    when the page loads. Called by the template (`once`) in document order."""

    SHORT = 80  # a text shorter than this is written out each time

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def _id(self, full: str) -> tuple[int, bool]:
        first = full not in self._ids
        return self._ids.setdefault(full, len(self._ids)), first

    def title(self, full: str | None, short: str | None = None) -> Markup:
        """The attributes of a mention shown as `short`: nothing when it shows the full name."""
        if not full or full == short:
            return Markup("")
        n, first = self._id(full)
        if first:
            return Markup(' title="{}" data-n="{}"').format(full, n)
        return Markup(' data-r="{}"').format(n)

    def code(self, full: str) -> Markup:
        """The full name as a <code> box's text."""
        return self._text("code", full)

    def text(self, text: str | None) -> Markup:
        """A paragraph's text (in a span)."""
        if not text or len(text) < self.SHORT:
            return Markup("{}").format(text or "")
        return self._text("span", text)

    def _text(self, tag: str, text: str) -> Markup:
        n, first = self._id(text)
        if first:
            return Markup('<{0} data-n="{1}">{2}</{0}>').format(Markup(tag), n, text)
        return Markup('<{0} data-rt="{1}"></{0}>').format(Markup(tag), n)


def _anchor(kernel: KernelDiagnosis) -> str:
    return f"kernel-{kernel.id}"


def _evidence(finding: Finding) -> list[dict[str, str]]:
    return [
        {
            "metric": fmt.metric_label(e.metric),
            "name": e.metric,
            "value": fmt.metric_value(e.metric, e.value),
            "op": e.op,
            "threshold": fmt.metric_value(e.metric, e.threshold) if e.op else "",
        }
        for e in finding.evidence
    ]


def _finding(
    finding: Finding, diagnosis: Diagnosis, names: dict[str, str], of: str = "kernel"
) -> dict[str, Any]:
    """`of`: what the finding's recoverable share is of, where it has no NVTX range (a kernel
    card's finding: the kernel; a program finding: the device's time)."""
    return {
        "of": "range" if finding.range else of,
        "rule": finding.rule,
        "cause": finding.cause,
        "title": finding.title,
        "message": finding.message,
        "fix": finding.fix,
        "impact": fmt.share(finding.impact),
        "recoverable": fmt.share(finding.recoverable),
        "saving": fmt.saved_time(finding, diagnosis),
        "estimate": finding.estimate,
        "basis": finding.impact_basis,
        "evidence": _evidence(finding),
        "range": finding.range,
        "kernel": names.get(finding.kernel, finding.kernel) if finding.kernel else None,
        "kernel_full": finding.kernel,
        "chain": [{"short": names.get(n, n), "full": n} for n in finding.chain],
    }


def _sort_value(value: object) -> str:
    """A table cell's sort key (data-v): whole above 1000 (ns), else 6 significant digits; empty
    when missing (sorted last)."""
    found = number(value)
    if found is None:
        return ""
    return str(round(found)) if abs(found) >= 1000 else f"{found:.6g}"


def _kernel_row(k: KernelDiagnosis, names: dict[str, str], carded: bool) -> dict[str, Any]:
    mean = k.region_mean_ns
    top = k.findings[0] if k.findings else None
    roof = number(k.roofline.pct_of_roof)
    return {
        "id": k.id,
        "anchor": _anchor(k),
        "carded": carded,
        "short": names[k.name],
        "full": k.demangled or k.name,
        "launches": f"{k.launches:,}",
        "launches_v": k.launches,
        "total": fmt.time_ns(k.total_duration_ns),
        "total_v": _sort_value(k.total_duration_ns),
        "mean": fmt.time_ns(mean),
        "mean_v": _sort_value(mean),
        "share": fmt.share(k.time_share),
        "share_v": _sort_value(k.time_share),
        "bound": k.bound,
        "limiter": k.limiter or fmt.MISSING,
        "roof": fmt.pct(roof, 0),
        "roof_v": _sort_value(roof),
        "geometry": f"{k.grid} × {k.block}",
        "top_finding": f"{top.title} ({top.rule})" if top else "",
        "top_impact": fmt.share(top.impact) if top else "",
    }


def _occupancy(k: KernelDiagnosis) -> dict[str, Any]:
    m = k.metrics
    limits = {
        name: number(m.get(f"occupancy_limit_{key}"))
        for key, name in (
            ("registers", "registers"),
            ("shared_mem", "shared memory"),
            ("warps", "warps"),
            ("blocks", "blocks"),
            ("barriers", "barriers"),
        )
    }
    present = {n: v for n, v in limits.items() if v is not None}
    fewest = min(present.values(), default=None)
    limiter = m.get("occupancy_limiter")
    return {
        "achieved": fmt.pct(m.get("achieved_occupancy_pct")),
        "theoretical": fmt.pct(m.get("theoretical_occupancy_pct")),
        "limiter": limiter if isinstance(limiter, str) and limiter else None,
        "limits": [
            {"name": n, "blocks": fmt.num(v), "lowest": v == fewest} for n, v in present.items()
        ],
    }


def _geometry(k: KernelDiagnosis) -> list[tuple[str, str]]:
    m = k.metrics
    rows = [
        ("grid", k.grid),
        ("block", k.block),
        ("threads", fmt.num(m.get("threads"))),
        ("registers per thread", fmt.num(m.get("registers_per_thread"))),
        (
            "shared memory (static / dynamic)",
            f"{fmt.bytes_(m.get('shared_mem_static_bytes'))} / "
            f"{fmt.bytes_(m.get('shared_mem_dynamic_bytes'))}",
        ),
        ("waves per SM", fmt.num(m.get("waves_per_sm"))),
        ("mean per launch (region)", fmt.time_ns(k.region_mean_ns)),
        ("mean profiled launch", fmt.time_ns(k.profiled_mean_ns)),
    ]
    return [(label, value) for label, value in rows if value and value != fmt.MISSING]


def _roofline_facts(k: KernelDiagnosis) -> list[tuple[str, str]]:
    r = k.roofline
    intensity = number(r.arithmetic_intensity)
    achieved = number(r.achieved_flops_per_s)
    rows = [
        ("% of roof", fmt.pct(r.pct_of_roof)),
        ("side of the ridge", r.side or fmt.MISSING),
        (
            "arithmetic intensity",
            fmt.MISSING if intensity is None else f"{fmt.num(intensity)} FLOP/B",
        ),
        (
            "achieved",
            fmt.MISSING
            if achieved is None
            else f"{fmt.rate(achieved, 'FLOP/s')}" + (f" ({r.precision})" if r.precision else ""),
        ),
        ("DRAM bandwidth", fmt.rate(r.achieved_dram_bytes_per_s, "B/s")),
    ]
    if number(r.pct_of_measured_ceiling) is not None:
        rows.append(("% of measured DRAM ceiling", fmt.pct(r.pct_of_measured_ceiling)))
    return rows


def _ncu_rule(r: NcuRuleResult) -> dict[str, str]:
    return {
        "rule": r.rule,
        "section": r.section,
        "type": r.type,
        "message": r.message,
        "speedup": fmt.pct(r.speedup) if r.speedup is not None else "",
        "speedup_type": r.speedup_type or "",
    }


def _card(
    k: KernelDiagnosis, rank: int, diagnosis: Diagnosis, names: dict[str, str]
) -> dict[str, Any]:
    return {
        "rank": rank,
        "anchor": _anchor(k),
        "short": names[k.name],
        "full": k.demangled or k.name,
        "share": fmt.share(k.time_share),
        "total": fmt.time_ns(k.total_duration_ns),
        "launches": f"{k.launches:,}",
        "bound": k.bound,
        "limiter": k.limiter or fmt.MISSING,
        "verdict": k.verdict,
        "note": k.verdict_note,
        "throughput": _chart(charts.throughput_bars(k), f"chart-throughput-{k.id}"),
        "stalls": _chart(charts.stall_bars(k), f"chart-stalls-{k.id}"),
        "occupancy": _occupancy(k),
        "geometry": _geometry(k),
        "roofline": _roofline_facts(k),
        "findings": [_finding(f, diagnosis, names) for f in k.findings],
        "ncu_rules": [_ncu_rule(r) for r in k.ncu_rules],
        "skipped": [{"rule": s.rule, "reason": s.reason} for s in k.skipped],
    }


def _meta_items(diagnosis: Diagnosis) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    meta = dict(diagnosis.meta)
    if diagnosis.timeline is not None:
        meta["timeline"] = diagnosis.timeline.to_json()
    for key, value in meta.items():
        if key in _META_SKIP or value is None or value == "":
            continue
        if isinstance(value, dict):
            items.extend(
                (_meta_label(f"{key} {k}"), _meta_value(k, v))
                for k, v in value.items()
                if isinstance(v, (str, int, float))
            )
        elif isinstance(value, (str, int, float)):
            items.append((_meta_label(key), _meta_value(key, value)))
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            items.append((key.replace("_", " "), " ".join(value)))
    return items


def _meta_label(key: str) -> str:
    """`timeline span_ns` -> `timeline span`: the unit goes into the value."""
    key = key.replace("_", " ")
    return key[: -len(" ns")] if key.endswith(" ns") else key


def _meta_value(key: str, value: str | int | float) -> str:
    """Nanosecond counts in time units (7.69 s, not 7688396560.0)."""
    if key.endswith("_ns") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.time_ns(value)
    return str(value)


def _left_out(
    diagnosis: Diagnosis, cards: Sequence[KernelDiagnosis], options: RenderOptions
) -> dict[str, Any] | None:
    rest = len(diagnosis.kernels) - len(cards)
    if rest <= 0:
        return None
    covered = sum(number(k.time_share) or 0.0 for k in cards)
    return {
        "shown": len(cards),
        "rest": rest,
        "covered": fmt.share(covered),
        "rest_share": fmt.share(max(1 - covered, 0)),
        "option": options.cards_option,
    }


def _timeline(
    session: Session | None,
    options: RenderOptions,
    diagnosis: Diagnosis | None = None,
    segments: int = timeline_zoom.SEGMENTS,
    opening: bool = True,
) -> dict[str, Any] | None:
    """The timeline chart and its caption; `segments`: at most this many kept for zooming;
    `opening`: the opening view's bars in the figure's data too (the page draws them anyway)."""
    if session is None or not session.has_timeline():
        return None
    nvtx = session.nvtx_ranges if len(session.nvtx_ranges) else None
    late = diagnosis.ranks.late_rank if diagnosis is not None and diagnosis.ranks else None
    region = diagnosis.region if diagnosis is not None else None
    fig = timeline_chart.timeline(
        session.timeline,
        nvtx,
        max_segments=options.timeline_segments,
        first_ranks=(0, late) if late is not None else (),
        region=region.windows if region is not None else (),
        zoomable=segments,
        opening=opening,
    )
    if fig is None:
        return None
    kept = sum(
        len(row[2]) for rows_ in fig.layout.meta["nsdiagTimeline"]["bars"].values() for row in rows_
    )
    rows = len(session.timeline) + (len(nvtx) if nvtx is not None else 0)
    span, busy = timeline_chart.busy_time(session.timeline)
    return {
        "chart": _chart(fig, "chart-timeline"),
        "rows": f"{rows:,}",
        "segments": f"{kept:,}",
        "kept": kept,
        "opening": opening,
        "budget": segments,
        "merged": kept < rows,
        "region": bool(fig.layout.shapes),
        "span": fmt.time_ns(span),
        "busy": fmt.time_ns(busy),
        "busy_share": fmt.share(busy / span if span else None),
    }


def _top_changes(
    diagnosis: Diagnosis, names: dict[str, str], carded_ids: set[int], options: RenderOptions
) -> list[dict[str, Any]]:
    """The changes worth the most time, each with what it touches (a link to each touched
    kernel's card where it has one) and its fix."""
    top = []
    for change in diagnosis.top_changes(options.top_findings):
        numbered = fmt.repeated_names(change)
        touched = [
            {
                "name": fmt.touch_name(t, names, numbered),
                "full": t.name,
                "saving": fmt.ns_saved(t.saved_ns, diagnosis),
                "rules": ", ".join(t.rules),
                "anchor": f"kernel-{t.kernel_id}" if t.kernel_id in carded_ids else None,
            }
            for t in change.touches
        ]
        single = touched[0] if len(touched) == 1 else None
        top.append(
            {
                "key": change.key,
                "title": change.title,
                "fix": change.fix,
                "rules": list(change.rules),
                "saving": fmt.ns_saved(change.saved_ns, diagnosis),
                "share": fmt.share(change.share) if change.saved_ns is not None else "",
                "touches": fmt.touches(change, names),
                "anchor": single["anchor"] if single else None,
                "touched": touched if len(touched) > 1 else [],
                "after": len(change.after),
            }
        )
    return top


def _ceiling(diagnosis: Diagnosis, names: dict[str, str]) -> dict[str, str] | None:
    ceiling = diagnosis.measured_dram_ceiling
    if ceiling is None:
        return None
    return {
        "rate": fmt.rate(ceiling.bytes_per_s, "B/s"),
        "kernel": names.get(ceiling.kernel, ceiling.kernel),
    }


def context(
    diagnosis: Diagnosis, session: Session | None, options: RenderOptions
) -> dict[str, Any]:
    """Everything the template shows, as display-ready values."""
    names = fmt.display_names(diagnosis)
    total = diagnosis.total_gpu_time_ns
    carded = diagnosis.kernels[: max(options.cards, 0)]
    carded_ids = {k.id for k in carded}
    table = (
        diagnosis.kernels if options.table_rows is None else diagnosis.kernels[: options.table_rows]
    )
    roofline = charts.roofline(diagnosis, names, options.roofline_points)
    off_roof = [
        k for k in diagnosis.kernels[: options.roofline_points] if not charts.on_roofline(k)
    ]
    device = diagnosis.device or {}
    timeline = _timeline(session, options, diagnosis)
    return {
        "title": options.title,
        "version": __version__,
        "device": {
            "name": device.get("name") or "unknown GPU",
            "cc": device.get("cc"),
            "sm_count": device.get("sm_count"),
        },
        "meta": _meta_items(diagnosis),
        "warnings": list(diagnosis.warnings),
        "sources": [
            str(s.get("path", s)) if isinstance(s, dict) else str(s)
            for s in diagnosis.meta.get("sources", [])
        ],
        "ceiling": _ceiling(diagnosis, names),
        "total": fmt.time_ns(total),
        "signatures": f"{len(diagnosis.kernels):,}",
        "launches": f"{sum(k.launches for k in diagnosis.kernels):,}",
        "top_changes": _top_changes(diagnosis, names, carded_ids, options),
        "verdict_chart": _chart(charts.verdict_shares(diagnosis), "chart-verdict-shares"),
        "rows": [_kernel_row(k, names, k.id in carded_ids) for k in table],
        "rows_left_out": len(diagnosis.kernels) - len(table),
        "roofline": _chart(roofline, "chart-roofline"),
        "off_roof": len(off_roof),
        "roofline_capped": max(len(diagnosis.kernels) - options.roofline_points, 0),
        "cards": [_card(k, i + 1, diagnosis, names) for i, k in enumerate(carded)],
        "left_out": _left_out(diagnosis, carded, options),
        "program_findings": [
            _finding(f, diagnosis, names, of="device") for f in diagnosis.program_findings
        ],
        "ranks": {
            "headers": ranks.HEADERS,
            "rows": ranks.rows(diagnosis),
            "caption": ranks.caption(diagnosis),
            "left_out": ranks.left_out(diagnosis),
        }
        if diagnosis.ranks is not None
        else None,
        "region": fmt.region_line(diagnosis),
        "startup": diagnosis.startup.line() if diagnosis.startup is not None else None,
        "denominator": fmt.denominator(diagnosis),
        "timeline": timeline,
        "skipped": [{"rule": s.rule, "reason": s.reason} for s in diagnosis.skipped_rules],
        "css": _asset("report.css"),
        "js": _asset("report.js") + (_asset("timeline.js") if timeline else ""),
        "plotly_js": Markup(inline()),
        "once": Once(),
    }


_INDENT = re.compile(r"\n[ \t]*(?:\n[ \t]*)*")
_BUNDLE_MARK = "<!--nsdiag:plotly.js-->"


def compact(render: Callable[[dict[str, Any]], str], ctx: dict[str, Any]) -> str:
    """A page rendered without the templates' indentation and blank lines (whitespace the
    browser collapses: no element of the report keeps it), the plotly.js bundle set in after, as
    it is."""
    bundle = ctx["plotly_js"]
    page = render({**ctx, "plotly_js": Markup(_BUNDLE_MARK)})
    return _INDENT.sub("\n", page).replace(_BUNDLE_MARK, bundle, 1)


# Bytes a report keeps under: 1.5 MB (as the CLI counts MB: 10^6 bytes), less a small margin
# (render_html measures the page it wrote, so no more is needed).
SIZE_LIMIT = 1_497_000
MIN_SEGMENTS = 100  # timeline segments a report keeps however large the rest of it is


def render_html(
    diagnosis: Diagnosis, session: Session | None = None, options: RenderOptions | None = None
) -> str:
    """The page; a report that would pass SIZE_LIMIT leaves the timeline's opening bars to the
    page, then keeps fewer timeline segments (the region's zoom detail is what gives way)."""
    options = options or RenderOptions()
    template = environment().get_template(TEMPLATE)
    ctx = context(diagnosis, session, options)
    page = compact(lambda c: template.render(**c), ctx)
    for _ in range(5):
        over = len(page.encode("utf-8")) - SIZE_LIMIT
        timeline = ctx["timeline"]
        if over <= 0 or timeline is None:
            break
        if timeline["opening"]:
            ctx["timeline"] = _timeline(session, options, diagnosis, timeline["budget"], False)
        elif timeline["kept"] <= MIN_SEGMENTS:
            break
        else:
            per_segment = len(timeline["chart"].encode("utf-8")) / timeline["kept"]  # at most
            kept = timeline["kept"] - math.ceil(over / per_segment)
            ctx["timeline"] = _timeline(session, options, diagnosis, max(kept, MIN_SEGMENTS), False)
        ctx["once"] = Once()  # the page is written again from its first mention
        page = compact(lambda c: template.render(**c), ctx)
    return page
