"""Terminal rendering of a Diagnosis, for people (a string; the CLI prints it).

The short view fits one screen: what was analysed, any warning, the changes worth the most time
(each with its saving, what it touches, why, and its fix, wrapped to a few lines and cut at a
sentence or clause), the kernels by GPU time as one table, and a line saying what `--verbose`
adds. The verbose view (also what `report --format text` writes) holds everything: tools and
timeline, every change with all it touches, the program findings, each kernel's verdict and
findings with their evidence, ncu's own rules, the skipped rules. A fix is printed once; later
places say "same fix as change 2". Kernels are numbered as in the JSON (`#3` is id 2) and look-
alike names carry what tells them apart (grid, block, or a short hash). Program-supplied text is
made printable (no terminal control characters); colour only when the caller asks (the CLI: a
TTY, FORCE_COLOR).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from nsdiag.analysis.records.changes import Change
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.model.names import short_name
from nsdiag.render import fmt, ranks
from nsdiag.render.registry import RenderOptions
from nsdiag.render.text_kernels import kernel_blocks, kernel_table, program_findings
from nsdiag.render.text_layout import (
    DIM,
    RULE,
    SAVING,
    SECTION,
    TITLE,
    WARNING,
    Page,
)
from nsdiag.render.text_layout import WIDTH as PAGE_WIDTH
from nsdiag.render.text_view import View

if TYPE_CHECKING:  # annotations only: a session holds pandas tables
    from nsdiag.model.session import Session

WIDTH = 120  # what render/diff/text.py draws `nsdiag diff` at (this view: PAGE_WIDTH)
RANKED = 5  # changes in the short view
TOUCHES = 8  # kernels or ranges listed under a change in the short view's summary line
WHY_LINES = 3  # lines of a change's why and fix in the short view (then cut at a sentence or
FIX_LINES = 2  # clause boundary; why: a line more where that ends a sentence)


def render_text_report(
    diagnosis: Diagnosis, session: Session | None, options: RenderOptions
) -> str:
    """The text format's entry in the renderer table (render/registry.py): a report file holds
    the verbose view."""
    return render_text(
        diagnosis, top=options.text_findings, kernels=options.text_kernels, verbose=True
    )


def render_text(
    diagnosis: Diagnosis,
    top: int = 3,
    kernels: int = 10,
    *,
    verbose: bool = False,
    color: bool = False,
    width: int = PAGE_WIDTH,
    changes: int = RANKED,
) -> str:
    """The diagnosis for a terminal: `top` findings per kernel and `kernels` kernels (verbose
    view: blocks; short view: table rows), `width` columns, ANSI colour when `color`; the
    short view lists `changes` changes (explain --changes N)."""
    view = View.of(diagnosis, Page(width, color), verbose, changes)
    _header(view)
    _ranks(view)
    _changes(view)
    if verbose:
        program_findings(view)
        kernel_blocks(view, top, kernels)
        _skipped(view)
    else:
        kernel_table(view, kernels)
        _more(view, kernels)
    return view.page.text()


def _header(view: View) -> None:
    """The device and what was profiled; the warnings; the analysed region (verbose: the
    tools, the timeline, the measured ceiling and the start-up too)."""
    d, page = view.diagnosis, view.page
    device = d.device
    kernels_text = (
        f"{fmt.plural(len(d.kernels), 'kernel signature')}, "
        f"{fmt.time_ns(d.total_gpu_time_ns)} of profiled "
        "GPU time"
        if d.kernels
        else "no Nsight Compute kernel metrics (timeline only)"
    )
    page.para(
        f"{device.get('name', 'unknown device')} (cc {device.get('cc', '?')}, "
        f"{device.get('sm_count', '?')} SMs), {kernels_text}",
        label="nsdiag: ",
        style=TITLE,
        label_style=TITLE,
    )
    if view.verbose:
        _provenance(view)
    for warning in d.warnings:
        page.para(warning, label="warning: ", style=WARNING, label_style=WARNING)
    line = fmt.region_line(d)
    if line:
        page.para(line)
    if view.verbose and d.startup is not None:
        page.para(d.startup.line(), style=DIM)


def _provenance(view: View) -> None:
    d, page = view.diagnosis, view.page
    tools = d.meta.get("tools")
    if tools:
        page.para(", ".join(f"{n} {v}" for n, v in tools.items()), label="tools: ", style=DIM)
    if d.timeline:
        counts = ", ".join(f"{n:,} {kind}s" for kind, n in d.timeline.activities.items())
        page.para(f"{counts} over {fmt.time_ns(d.timeline.span_ns)}", label="timeline: ")
    ceiling = d.measured_dram_ceiling
    if ceiling:
        page.para(
            f"{fmt.rate(ceiling.bytes_per_s, 'B/s')} ({short_name(ceiling.kernel)})",
            label="measured DRAM ceiling: ",
            style=DIM,
        )


def _changes(view: View) -> None:
    """What to change first: each change's saving after the ones above it, what it touches,
    why (its leading finding), and its fix (said once)."""
    if not view.changes:
        return
    d, page = view.diagnosis, view.page
    per = " per iteration" if d.iterations else ""
    page.blank()
    page.para(
        f"saving{per}, share {fmt.denominator(d)}, each after those above",
        label="What to change first  ",
        label_style=SECTION,
        style=DIM,
    )
    for i, change in enumerate(view.changes, 1):
        _change(view, i, change)


def _change(view: View, i: int, change: Change) -> None:
    page, verbose = view.page, view.verbose
    saving = fmt.change_saving(change, view.diagnosis)
    head = f"{i:>2}. "
    room = page.width - len(head) - len(saving) - 2
    indent = len(head)
    if len(change.title) > room:  # the whole title, wrapped, its saving under it
        page.para(change.title, label=head, style=TITLE, label_style=TITLE)
        page.para(saving, indent=indent, style=SAVING)
    else:
        title = change.title
        page.line((head + title, TITLE), " " * (room - len(title) + 2), (saving, SAVING))
    if verbose:
        _touches(view, change, indent)
    else:
        summary = _touch_summary(view, change)
        if summary:
            page.para(summary, indent=indent, style=DIM, lines=2)
    code = fmt.code(change, verbose)
    if code:
        page.para(code, label="code: ", indent=indent, style=DIM, lines=None if verbose else 2)
    if change.findings:
        lead = change.findings[0]
        page.para(
            lead.message,
            label="why: ",
            indent=indent,
            lines=None if verbose else WHY_LINES,
            lead=f"{lead.rule} {lead.cause}: ",
            lead_style=RULE,
            whole_sentence=True,
        )
    view.say_fix(change.fix, f"change {i}", indent, None if verbose else FIX_LINES)


def _touch_summary(view: View, change: Change) -> str | None:
    """`on 3 GEMM kernels: #1 2.59 ms, #2 1.77 ms, #3 1.65 ms` (kernels by their number in the
    table below); one kernel by its name; None when the title names all it touches."""
    touches = change.touches
    if len(touches) == 1:
        only = touches[0]
        named = only.kind != "kernel" and (only.name in change.title or only.kind == "program")
        if named:
            return None
        kernel = view.kernel_of(only)
        if kernel is None:
            return f"on {view.touch(only)}"
        number = f"#{kernel.id + 1} "
        room = view.page.width - 4 - len("on ") - len(number)  # one line under the title
        return f"on {number}{view.fitted(kernel, room)}"
    items = []
    for t in touches[:TOUCHES]:
        if t.kind == "kernel" and t.kernel_id is not None:
            where = f"#{t.kernel_id + 1}"
        else:
            where = t.name if t.kind == "range" else view.touch(t)
        items.append(where if t.saved_ns is None else f"{where} {view.saved(t.saved_ns)}")
    more = f", {len(touches) - TOUCHES} more" if len(touches) > TOUCHES else ""
    return f"on {fmt.touches(change, view.names, counted=True)}: {', '.join(items)}{more}"


def _touches(view: View, change: Change, indent: int) -> None:
    """Verbose: every kernel and range a change touches, with what it gets there."""
    if change.after:
        shared = ", ".join(
            f"change {view.number(c)}" for c in view.changes if c.key in change.after
        )
        view.page.para(f"after {shared}, which took some of the same time", indent=indent)
    if len(change.touches) < 2:
        if change.touches:
            only = change.touches[0]
            rules = f" ({', '.join(only.rules)})" if only.rules else ""
            view.page.para(f"on {view.touch(only)}{rules}", indent=indent, style=DIM)
        return
    view.page.para(f"on {fmt.touches(change, view.names)}:", indent=indent, style=DIM)
    for t in change.touches:
        view.page.para(
            f"{view.touch(t)}: {fmt.ns_saved(t.saved_ns, view.diagnosis)} ({', '.join(t.rules)})",
            label="- ",
            indent=indent + 1,
        )


def _more(view: View, kernels: int) -> None:
    """The short view's last line: what --verbose adds."""
    d = view.diagnosis
    parts = []
    if len(d.changes) > len(view.changes):
        parts.append(fmt.plural(len(d.changes) - len(view.changes), "more change"))
    if len(d.kernels) > kernels:
        parts.append(fmt.plural(len(d.kernels) - kernels, "more kernel"))
    parts.append("each finding's evidence")
    if d.skipped_rules:
        parts.append(fmt.plural(len(d.skipped_rules), "skipped rule"))
    view.page.blank()
    view.page.para(f"--verbose: {', '.join(parts)}; --json: all", style=DIM)


def _skipped(view: View) -> None:
    skipped = view.diagnosis.skipped_rules
    if skipped:
        view.page.blank()
        view.page.para(
            "; ".join(f"{s.rule}: {s.reason}" for s in skipped), label="skipped rules: ", style=DIM
        )


def _ranks(view: View) -> None:
    """The table of ranks of a distributed run."""
    d = view.diagnosis
    rows = ranks.rows(d)
    if not rows:
        return
    table = Table(title="Ranks", title_justify="left", title_style=SECTION)
    for header in ranks.HEADERS:
        table.add_column(header, justify="left" if header in ("host", "") else "right")
    for row in rows:
        table.add_row(*(fmt.printable(cell) for cell in row))
    view.page.blank()
    view.page.table(table)
    more = ranks.left_out(d)
    view.page.para(ranks.caption(d) + (f" ({more} more ranks not listed)" if more else ""))
