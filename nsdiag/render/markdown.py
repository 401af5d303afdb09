"""A concise Markdown summary of a Diagnosis, for a pull-request comment.

Names from the profiled program are escaped for Markdown and for the HTML that Markdown allows,
so a kernel named `<img src=x onerror=alert(1)>` or `a|b*c` prints as itself.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.model.values import number
from nsdiag.render import fmt, ranks
from nsdiag.render.registry import RenderOptions

if TYPE_CHECKING:
    from nsdiag.model.session import Session

TOUCHES = 8  # kernels or ranges listed under a change
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


def escape(text: object) -> str:
    """Plain text safe inside Markdown (tables included): HTML-escaped, punctuation backslashed."""
    value = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = _MD_SPECIAL.sub(r"\\\1", value)
    return " ".join(value.split())  # newlines would end a table row


def _top_changes(diagnosis: Diagnosis, names: dict[str, str], n: int) -> list[str]:
    """One row per change (its marginal saving, what it touches, its fix), then what each
    change that touches several kernels or ranges saves on each."""
    changes = diagnosis.top_changes(n)
    if not changes:
        return ["No rule fired: nothing in this profile points at an obvious fix.", ""]
    lines = ["| saves | share | touches | change | fix |", "| ---: | ---: | --- | --- | --- |"]
    for c in changes:
        lines.append(
            f"| {escape(fmt.ns_saved(c.saved_ns, diagnosis))} | {escape(fmt.share(c.share))} | "
            f"{escape(fmt.touches(c, names))} | "
            f"**{escape(c.title)}** ({escape(', '.join(c.rules))}) | {escape(c.fix)} |"
        )
    lines.append("")
    for i, c in enumerate(changes, 1):
        if len(c.touches) < 2:
            continue
        numbered = fmt.repeated_names(c)
        listed = "; ".join(
            escape(f"{fmt.touch_name(t, names, numbered)} {fmt.ns_saved(t.saved_ns, diagnosis)}")
            for t in c.touches[:TOUCHES]
        )
        more = f"; {len(c.touches) - TOUCHES} more" if len(c.touches) > TOUCHES else ""
        lines.append(f"{i}. {escape(c.title)}: {listed}{more}.")
    return [*lines, ""]


def _kernel_table(diagnosis: Diagnosis, names: dict[str, str], n: int) -> list[str]:
    lines = [
        "| # | kernel | launches | total | share | verdict | limiter | % of roof | top finding |",
        "| ---: | --- | ---: | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for k in diagnosis.kernels[:n]:
        top = f"{escape(k.findings[0].title)} ({escape(k.findings[0].rule)})" if k.findings else ""
        lines.append(
            f"| {k.id + 1} | {escape(names[k.name])} | {k.launches:,} | "
            f"{fmt.time_ns(k.total_duration_ns)} | {escape(fmt.share(k.time_share))} | "
            f"{escape(k.bound)} | {escape(k.limiter or fmt.MISSING)} | "
            f"{fmt.pct(k.roofline.pct_of_roof, 0)} | {top} |"
        )
    rest = len(diagnosis.kernels) - n
    if rest > 0:
        lines += ["", f"{rest:,} more signatures are in the HTML or JSON report."]
    return [*lines, ""]


def _program(diagnosis: Diagnosis) -> list[str]:
    if not diagnosis.program_findings:
        return []
    lines = ["### Program findings", ""]
    for f in diagnosis.program_findings:
        where = f" in NVTX range {escape(f.range)}" if f.range else ""
        lines.append(
            f"- **{escape(f.title)}** ({escape(f.rule)}, "
            f"{escape(fmt.saves(f, diagnosis))}){where}: {escape(f.message)}"
        )
        lines.append(f"  *Fix:* {escape(f.fix)}")
    return [*lines, ""]


def render_markdown(
    diagnosis: Diagnosis, session: Session | None = None, options: RenderOptions | None = None
) -> str:
    options = options or RenderOptions()
    names = fmt.display_names(diagnosis)
    device = diagnosis.device.get("name") or "unknown GPU"
    launches = sum(k.launches for k in diagnosis.kernels)
    lines = [
        f"## nsdiag: {escape(device)}",
        "",
        f"Total GPU time **{fmt.time_ns(diagnosis.total_gpu_time_ns)}** in {launches:,} kernel "
        "launches "
        f"({len(diagnosis.kernels):,} signatures).",
        "",
        *[f"> **Warning:** {escape(w)}" for w in diagnosis.warnings],
        *([""] if diagnosis.warnings else []),
    ]
    region = fmt.region_line(diagnosis)
    if region:
        lines += [escape(region[0].upper() + region[1:]) + ".", ""]
    if diagnosis.startup is not None:
        lines += [escape(diagnosis.startup.line()) + ".", ""]
    shares: dict[str, float] = {}
    for k in diagnosis.kernels:
        shares[k.bound] = shares.get(k.bound, 0.0) + (number(k.time_share) or 0.0)
    if shares:
        lines += [
            "Time by verdict: "
            + ", ".join(
                f"{escape(b)} {escape(fmt.share(v))}"
                for b, v in sorted(shares.items(), key=lambda kv: -kv[1])
            )
            + ".",
            "",
        ]
    lines += [
        "### Top findings",
        "",
        "One row per change; saves: what it would save after the changes above it; share: "
        f"{escape(fmt.denominator(diagnosis))}.",
        "",
        *_top_changes(diagnosis, names, options.top_findings),
    ]
    lines += _ranks(diagnosis)
    if diagnosis.kernels:
        lines += ["### Kernels", "", *_kernel_table(diagnosis, names, options.md_kernels)]
    lines += _program(diagnosis)
    return "\n".join(lines).rstrip() + "\n"


def _ranks(diagnosis: Diagnosis) -> list[str]:
    """The table of ranks of a distributed run."""
    rows = ranks.rows(diagnosis)
    if not rows:
        return []
    headers = [h or "note" for h in ranks.HEADERS]
    more = ranks.left_out(diagnosis)
    return [
        "### Ranks",
        "",
        escape(ranks.caption(diagnosis)) + (f" ({more} more ranks not listed)." if more else "."),
        "",
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join("---" if h in ("host", "note") else "---:" for h in headers) + " |",
        *("| " + " | ".join(escape(c) for c in row) + " |" for row in rows),
        "",
    ]
