"""Terminal rendering of a Diagnosis (rich tables, returned as a string; the CLI prints it)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from nsdiag.analysis.diagnosis import Diagnosis, Evidence, Finding, KernelDiagnosis
from nsdiag.model.names import short_name, short_names
from nsdiag.render import fmt, ranks

if TYPE_CHECKING:
    from nsdiag.model.session import Session
    from nsdiag.render.registry import RenderOptions

WIDTH = 120
RANKED = 5  # changes in "Worth the most time"
TOUCHES = 8  # kernels or ranges listed under a change


def _pct(value: float | None) -> str:
    return fmt.pct(value, digits=0)


def _evidence_item(e: Evidence) -> str:
    """`dram_throughput_pct = 81.8 > 70`: the value, and the threshold it was compared with."""
    value = "n/a" if e.value is None else f"{e.value:.3g}"
    return f"{e.metric} = {value}" + (f" {e.op} {e.threshold:g}" if e.op else "")


def _evidence(finding: Finding) -> str:
    return "; ".join(_evidence_item(e) for e in finding.evidence if e.value is not None)


def _kernel_block(
    console: Console, diagnosis: Diagnosis, kernel: KernelDiagnosis, top: int, name: str
) -> None:
    roof = kernel.roofline.pct_of_roof
    header = Text.assemble(
        (name, "bold"),
        f"  {kernel.launches}x, {fmt.time_ns(kernel.total_duration_ns)} "
        f"({kernel.time_share * 100:.1f}% of GPU time)",
        f"  [{kernel.bound}"
        + (f": {kernel.limiter}" if kernel.limiter else "")
        + f", {_pct(roof)} of roof]",
    )
    console.print(header)
    console.print(
        Text(f"  {kernel.verdict}" + (f" ({kernel.verdict_note})" if kernel.verdict_note else ""))
    )
    for finding in kernel.findings[:top]:
        console.print(
            Text.assemble(
                ("  - ", ""),
                (f"{finding.rule} {finding.cause}", "yellow"),
                f" ({fmt.saves(finding, diagnosis)})",
            )
        )
        console.print(Text(f"      {finding.message}"))
        console.print(Text(f"      evidence: {_evidence(finding)}", style="dim"))
        console.print(Text(f"      fix: {finding.fix}", style="green"))
    if kernel.ncu_rules:
        first = kernel.ncu_rules[0]
        speedup = (
            f" (est. {first.speedup_type or ''} speedup {first.speedup:.0f}%)"
            if first.speedup
            else ""
        )
        console.print(Text(f"  ncu's own top rule: {first.rule}{speedup}", style="dim"))


def render_text_report(
    diagnosis: Diagnosis, session: Session | None, options: RenderOptions
) -> str:
    """The text format's entry in the renderer table (render/registry.py)."""
    return render_text(diagnosis, top=options.text_findings, kernels=options.text_kernels)


def render_text(diagnosis: Diagnosis, top: int = 3, kernels: int = 10) -> str:
    """Ranked summary: program findings first when they are worth more, then kernels by time."""
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=WIDTH, force_terminal=False, color_system=None, highlight=False
    )
    _header(console, diagnosis)
    for warning in diagnosis.warnings:
        console.print(Text(f"warning: {warning}", style="bold red"))
    _region(console, diagnosis)
    _ranked(console, diagnosis)
    _ranks(console, diagnosis)
    _program_findings(console, diagnosis, top * 2)
    _kernels(console, diagnosis, top, kernels)
    if diagnosis.skipped_rules:
        reasons = "; ".join(f"{s.rule}: {s.reason}" for s in diagnosis.skipped_rules[:6])
        console.print(Text(f"skipped rules: {reasons}", style="dim"))
    return buffer.getvalue()


def _header(console: Console, diagnosis: Diagnosis) -> None:
    """The device, what was profiled, the tools, the timeline and the measured ceiling."""
    device = diagnosis.device
    kernels_text = (
        f"{len(diagnosis.kernels)} kernel signatures, {fmt.time_ns(diagnosis.total_gpu_time_ns)} "
        "of profiled GPU time"
        if diagnosis.kernels
        else "no Nsight Compute kernel metrics (timeline only)"
    )
    console.print(
        Text(
            f"nsdiag: {device.get('name', 'unknown device')} (cc {device.get('cc', '?')}, "
            f"{device.get('sm_count', '?')} SMs), {kernels_text}",
            style="bold",
        )
    )
    tools = diagnosis.meta.get("tools")
    if tools:
        listed = ", ".join(f"{name} {version}" for name, version in tools.items())
        console.print(Text(f"tools: {listed}", style="dim"))
    timeline = diagnosis.timeline
    if timeline:
        counts = ", ".join(f"{n} {kind}s" for kind, n in timeline.activities.items())
        console.print(Text(f"timeline: {counts} over {fmt.time_ns(timeline.span_ns)}", style="dim"))
    ceiling = diagnosis.measured_dram_ceiling
    if ceiling:
        console.print(
            Text(
                f"measured DRAM ceiling: {ceiling.bytes_per_s / 1e12:.2f} TB/s "
                f"({short_name(ceiling.kernel)})",
                style="dim",
            )
        )


def _region(console: Console, diagnosis: Diagnosis) -> None:
    """Which part of the timeline was analysed, and the start-up before it (never ranked)."""
    line = fmt.region_line(diagnosis)
    if line:
        console.print(Text(line))
    if diagnosis.startup is not None:
        console.print(Text(diagnosis.startup.line(), style="dim"))


def _ranked(console: Console, diagnosis: Diagnosis) -> None:
    """What to change first: one row per change, its marginal saving, what it touches, its
    fix; then, for the changes that touch several kernels or ranges, what each gets."""
    ranked = diagnosis.top_changes(RANKED)
    if not ranked:
        return
    table = Table(title="Worth the most time", show_lines=True, expand=True)
    for column, ratio in (("saves", 2), ("touches", 3), ("change", 4), ("fix", 6)):
        table.add_column(column, overflow="fold", ratio=ratio)
    names = fmt.display_names(diagnosis)
    for change in ranked:
        table.add_row(
            fmt.change_saving(change, diagnosis),
            fmt.touches(change, names),
            f"{change.title} ({', '.join(change.rules)})",
            change.fix,
        )
    console.print(table)
    console.print(
        Text(
            f"saves: what the change would save after the ones above it, and its share "
            f"{fmt.denominator(diagnosis)}",
            style="dim",
        )
    )
    for i, change in enumerate(ranked, 1):
        if len(change.touches) < 2:
            continue
        console.print(Text(f"{i}. {change.title}: {fmt.touches(change, names)}", style="bold"))
        numbered = fmt.repeated_names(change)
        for touch in change.touches[:TOUCHES]:
            saved = fmt.ns_saved(touch.saved_ns, diagnosis)
            name = fmt.touch_name(touch, names, numbered)
            console.print(Text(f"   - {name}: {saved} ({', '.join(touch.rules)})"))
        if len(change.touches) > TOUCHES:
            console.print(
                Text(f"   ... {len(change.touches) - TOUCHES} more (--json)", style="dim")
            )


def _program_findings(console: Console, diagnosis: Diagnosis, n: int) -> None:
    if not diagnosis.program_findings:
        return
    console.print(Text("Program findings", style="bold underline"))
    for finding in diagnosis.program_findings[:n]:
        where = f" [{finding.range}]" if finding.range else ""
        console.print(
            Text.assemble(
                ("- ", ""),
                (f"{finding.rule} {finding.cause}", "yellow"),
                where,
                f" ({fmt.saves(finding, diagnosis)})",
            )
        )
        console.print(Text(f"    {finding.message}"))
        console.print(Text(f"    fix: {finding.fix}", style="green"))


def _kernels(console: Console, diagnosis: Diagnosis, top: int, n: int) -> None:
    if diagnosis.kernels:
        console.print(Text("Kernels by GPU time", style="bold underline"))
    names = short_names(k.name for k in diagnosis.kernels)
    for kernel in diagnosis.kernels[:n]:
        _kernel_block(
            console, diagnosis, kernel, top, names.get(kernel.name, short_name(kernel.name))
        )
    hidden = len(diagnosis.kernels) - n
    if hidden > 0:
        console.print(
            Text(
                f"... {hidden} more kernel signatures (use --top-kernels or --json to see all)",
                style="dim",
            )
        )


def _ranks(console: Console, diagnosis: Diagnosis) -> None:
    """The table of ranks of a distributed run."""
    rows = ranks.rows(diagnosis)
    if not rows:
        return
    table = Table(title="Ranks", title_justify="left")
    for header in ranks.HEADERS:
        table.add_column(header, justify="left" if header in ("host", "") else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    more = ranks.left_out(diagnosis)
    console.print(
        Text(ranks.caption(diagnosis) + (f" ({more} more ranks not listed)" if more else ""))
    )
