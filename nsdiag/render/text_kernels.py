"""The text renderer's kernel and program-finding sections: the short view's kernel table (one
row per signature) and the verbose view's blocks (verdict, findings, evidence, fixes said once)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.table import Table

from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.analysis.records.findings import Evidence, Finding
from nsdiag.model.values import number
from nsdiag.render import fmt, kernel_names
from nsdiag.render.text_layout import DIM, NAME, RULE, SECTION, TITLE
from nsdiag.render.text_view import View

NAME_WIDTH = 16  # the narrowest kernel column (at 80 columns the others leave it about 20)
BOUND_WIDTH = 24  # the widest bound column (`latency: long scoreboard`)


def kernel_table(view: View, n: int) -> None:
    """The `n` longest kernel signatures, one row each: time, share, launches, what bounds
    it, and the change that fixes it (else its leading finding's rule)."""
    kernels = view.diagnosis.kernels[:n]
    if not kernels:
        return
    rows = [
        (
            str(k.id + 1),
            fmt.printable(view.labels.get(k.id, k.name)),
            fmt.time_ns(k.total_duration_ns),
            fmt.share(k.time_share),
            f"{k.launches:,}",
            fmt.bound_text(k, short=True),
            _finding_column(view, k),
        )
        for k in kernels
    ]
    headers = ("#", "kernel", "time", "share", "launches", "bound", "fix")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    widths[5] = min(widths[5], BOUND_WIDTH)
    # the name takes what the other columns leave (one space between columns)
    widths[1] = max(view.page.width - sum(widths) + widths[1] - len(headers) + 1, NAME_WIDTH)
    names = _fitted(view, kernels, widths[1])
    rows = [(r[0], name, *r[2:]) for r, name in zip(rows, names, strict=True)]
    table = Table(
        box=None,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        header_style=TITLE,
        title="Kernels by GPU time",
        title_justify="left",
        title_style=SECTION,
        collapse_padding=True,
    )
    for i, header in enumerate(headers):
        table.add_column(
            header,
            justify="left" if i in (1, 5, 6) else "right",
            no_wrap=True,
            overflow="ellipsis",
            width=widths[i],
            style=NAME if i == 1 else "",
        )
    for row in rows:
        table.add_row(*row)
    view.page.blank()
    view.page.table(table)


def _fitted(view: View, kernels: Sequence[KernelDiagnosis], width: int) -> list[str]:
    """Each kernel's label cut to the column; labels the cut made equal get a short hash of
    the full name (kept whole) so that no two rows read the same."""
    fitted = [view.fitted(k, width) for k in kernels]
    seen = Counter(fitted)
    hashed = [f"~{kernel_names.short_hash(k.demangled or k.name)}" for k in kernels]
    return [
        view.fitted(k, width, mark) if seen[f] > 1 and mark not in f else f
        for k, f, mark in zip(kernels, fitted, hashed, strict=True)
    ]


def _finding_column(view: View, kernel: KernelDiagnosis) -> str:
    change = view.change_of_kernel(kernel.id)
    if change is not None:
        return f"change {change}"
    return kernel.findings[0].rule if kernel.findings else ""


def program_findings(view: View) -> None:
    """Verbose: every program finding, its message, and its fix (said once)."""
    findings = view.diagnosis.program_findings
    if not findings:
        return
    view.page.blank()
    view.page.line(("Program findings", SECTION))
    for f in findings:
        where = f" [{f.range}]" if f.range else ""
        change = view.change_of_finding(f)
        page = view.page
        page.para(
            f"{fmt.saves(f, view.diagnosis)}" + (f", change {change}" if change else ""),
            label=f"- {f.rule} {f.cause}{where}: ",
            label_style=RULE,
        )
        page.para(f.message, indent=4)
        view.say_fix(f.fix, f"the {f.rule} finding{where}", indent=4)


def kernel_blocks(view: View, top: int, n: int) -> None:
    """Verbose: the `n` longest kernel signatures, each with its verdict and `top` findings."""
    d = view.diagnosis
    if not d.kernels:
        return
    view.page.blank()
    view.page.line(("Kernels by GPU time", SECTION))
    for kernel in d.kernels[:n]:
        _kernel_block(view, kernel, top)
    hidden = len(d.kernels) - n
    if hidden > 0:
        view.page.para(
            f"... {fmt.plural(hidden, 'more kernel signature')} (--top-kernels N or --json to see"
            " all)",
            style=DIM,
        )


def _kernel_block(view: View, kernel: KernelDiagnosis, top: int) -> None:
    page = view.page
    page.line((view.kernel(kernel), TITLE))
    page.para(_facts(kernel), indent=3)
    if "~" in view.labels.get(kernel.id, ""):  # told apart by a hash: the full name says how
        page.para(kernel.demangled or kernel.name, label="name: ", indent=3, style=DIM)
    page.para(kernel.verdict + _note(kernel), indent=3)
    for finding in kernel.findings[:top]:
        change = view.change_of_kernel(kernel.id, finding.rule)
        page.para(
            fmt.saves(finding, view.diagnosis) + (f", change {change}" if change else ""),
            label=f"- {finding.rule} {finding.cause}: ",
            indent=3,
            label_style=RULE,
        )
        page.para(finding.message, indent=5)
        evidence = _evidence(finding)
        if evidence:
            page.para(evidence, label="evidence: ", indent=5, style=DIM)
        view.say_fix(finding.fix, f"{finding.rule} on #{kernel.id + 1}", indent=5)
    if len(kernel.findings) > top:
        more = fmt.plural(len(kernel.findings) - top, "more finding")
        page.para(f"{more} (--top N)", indent=3, style=DIM)
    if kernel.ncu_rules:
        first = kernel.ncu_rules[0]
        speedup = (
            f" (est. {first.speedup_type or ''} speedup {first.speedup:.0f}%)"
            if first.speedup
            else ""
        )
        page.para(f"ncu's own top rule: {first.rule}{speedup}", indent=3, style=DIM)


def _note(kernel: KernelDiagnosis) -> str:
    """The verdict's note, less what the verdict's sentence already says (a small grid's block
    count, a launch-bound kernel's duration)."""
    parts = [p for p in kernel.verdict_note.split("; ") if p and p not in kernel.verdict]
    return f" ({'; '.join(parts)})" if parts else ""


def _facts(kernel: KernelDiagnosis) -> str:
    """`10 launches, 30.7 ms (21.3% of GPU time), latency-bound (long scoreboard), 11% of
    roof, grid 64, block 512`."""
    launches = f"{kernel.launches:,} launch" + ("" if kernel.launches == 1 else "es")
    if number(kernel.total_duration_ns) is None:
        time = "no duration (left out: see the warnings)"
    else:
        time = (
            f"{fmt.time_ns(kernel.total_duration_ns)} ({fmt.share(kernel.time_share)} of GPU time)"
        )
    roof = number(kernel.roofline.pct_of_roof)
    parts = [launches, time, fmt.bound_text(kernel)]
    if roof is not None:
        parts.append(f"{roof:.0f}% of roof")
    parts.append(f"grid {kernel_names.dims(kernel.grid)}, block {kernel_names.dims(kernel.block)}")
    return ", ".join(parts)


def _evidence(finding: Finding) -> str:
    return "; ".join(_evidence_item(e) for e in finding.evidence if e.value is not None)


def _evidence_item(e: Evidence) -> str:
    """`theoretical occupancy 18.8% (threshold < 50.0%)`: the value in words and its unit, and
    the threshold it was compared with."""
    return fmt.evidence_item(e.metric, e.value, e.op, e.threshold)
