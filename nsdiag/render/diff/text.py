"""Terminal rendering of a Diff (rich tables returned as a string; the CLI prints it)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from nsdiag.analysis.diff import Diff
from nsdiag.render import fmt
from nsdiag.render.diff import rows
from nsdiag.render.registry import DiffOptions
from nsdiag.render.text import WIDTH


def render_diff_text(diff: Diff, options: DiffOptions | None = None) -> str:
    top = (options or DiffOptions()).top
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=WIDTH, force_terminal=False, color_system=None, highlight=False
    )
    for side in (diff.before, diff.after):
        console.print(Text(rows.side_line(side), style="bold" if side.label == "before" else ""))
    for warning in diff.warnings:
        console.print(Text(f"warning: {warning}", style="bold red"))
    if diff.region.note:
        console.print(Text(f"note: {diff.region.note}", style="yellow"))
    console.print(Text(rows.region_headline(diff), style="bold"))
    console.print(Text(f"  BEFORE {rows.spread(diff.region.before)}", style="dim"))
    console.print(Text(f"  AFTER  {rows.spread(diff.region.after)}", style="dim"))
    runs = rows.runs_line(diff)
    if runs:
        console.print(Text(f"  {runs}", style="dim"))
    _kernels(console, diff, top)
    _findings(console, diff)
    return buffer.getvalue()  # the gate's line is the CLI's to print, unwrapped


def _kernels(console: Console, diff: Diff, top: int) -> None:
    table = Table(
        title=f"Kernels, largest change first (time{rows.unit(diff)})", expand=True, show_lines=True
    )
    for name, justify in (
        ("kernel BEFORE -> AFTER", "left"),
        ("matched", "left"),
        ("before", "right"),
        ("after", "right"),
        ("change", "right"),
        ("launches", "right"),
        ("verdict", "left"),
    ):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    ranked = sorted(rows.match_rows(diff), key=lambda r: -abs(r.match.change_ns))
    for r in ranked[:top]:
        m = r.match
        kernel = r.before if m.before else r.after
        if m.before and m.after and not m.same_kernel:
            kernel = f"{r.before}\n-> {r.after}"
        table.add_row(
            kernel,
            r.method,
            r.before_time,
            r.after_time,
            f"{r.change}\n({r.change_pct})",
            r.launches + (f"\n{r.per_launch}" if r.per_launch else ""),
            r.verdicts,
        )
    console.print(table)
    hidden = len(ranked) - top
    more = f"; {hidden} more matches (--top N, or --json)" if hidden > 0 else ""
    console.print(Text(rows.summary(diff) + more, style="dim"))


def _findings(console: Console, diff: Diff) -> None:
    made = rows.change_rows(diff)
    if made:
        table = Table(
            title="Changes of BEFORE, as ranked: predicted against measured saving", expand=True
        )
        for name, justify in (
            ("#", "right"),
            ("change", "left"),
            ("made", "left"),
            ("predicted", "right"),
            ("measured", "right"),
            ("ratio", "right"),
        ):
            table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
        for r in made:
            table.add_row(
                r.rank, f"{r.title} ({r.rules})", r.status, r.predicted, r.measured, r.ratio
            )
        console.print(table)
    left = rows.unestimated_changes(diff)
    if left:
        console.print(Text(left, style="dim"))
    if diff.check is not None:
        console.print(Text(rows.check_line(diff), style="bold"))
    for status, title in (
        ("changed", "Findings whose saving changed"),
        ("persists", "Findings that persist"),
        ("new", "New findings"),
    ):
        group = [c for c in diff.findings if c.status == status]
        if not group:
            continue
        console.print(Text(title, style="bold underline"))
        for c in group[:10]:
            f = c.finding
            was = rows.time(diff, c.predicted_ns) if c.predicted_ns else fmt.NO_ESTIMATE
            now = rows.time(diff, c.after_saved_ns) if c.after_saved_ns else fmt.NO_ESTIMATE
            saving = f"saves {now}" if status == "new" else f"saves {was} -> {now}"
            console.print(Text(f"- {f.rule} {f.cause} [{rows.where(c)}]: {saving}"))
        if len(group) > 10:
            console.print(Text(f"  ... {len(group) - 10} more (--json)", style="dim"))
    unchecked = [c for c in diff.findings if c.status == "unchecked"]
    if unchecked:
        rules = ", ".join(sorted({c.finding.rule for c in unchecked}))
        console.print(
            Text(
                f"{len(unchecked)} finding(s) of BEFORE not re-checked ({rules}): "
                f"{unchecked[0].how}",
                style="dim",
            )
        )
