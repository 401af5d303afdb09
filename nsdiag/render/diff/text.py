"""Terminal rendering of a Diff at the terminal's width (the CLI passes it; a pipe gets
text_layout.WIDTH): every paragraph wrapped at word boundaries, each kernel a block of lines
(numbers first, in columns, then its name cut in the middle to the width left), and a word too
long for its line (a kernel name inside a change's title, a path) cut in the middle rather than
broken. Returned as a string; the CLI prints it."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nsdiag.analysis.diff import Diff
from nsdiag.analysis.diff.findings import FindingChange
from nsdiag.analysis.diff.side import KernelTimes
from nsdiag.model.names import short_names
from nsdiag.render import fmt, kernel_names
from nsdiag.render.diff import rows
from nsdiag.render.registry import DiffOptions
from nsdiag.render.text_layout import DIM, SECTION, TITLE, WARNING, Page, middle

FINDINGS_LISTED = 10  # per group (changed, persisting, new)
INDENT = 4  # a kernel's second and later lines, a change's lines under its title
# the numbers in front of each kernel: change, its percentage, before, after
NUMBER_WIDTHS = (8, 8, 7, 7)


def render_diff_text(diff: Diff, options: DiffOptions | None = None) -> str:
    opts = options or DiffOptions()
    page = Page(opts.width, color=opts.color)
    for side in (diff.before, diff.after):
        _para(page, rows.side_line(side), style=TITLE if side.label == "before" else "")
    for warning in diff.warnings:
        _para(page, warning, label="warning: ", style=WARNING, label_style=WARNING)
    if diff.region.note:
        _para(page, diff.region.note, label="note: ")
    _para(page, rows.region_headline(diff), style=TITLE)
    _para(page, f"BEFORE {rows.spread(diff.region.before)}", indent=2, style=DIM)
    _para(page, f"AFTER  {rows.spread(diff.region.after)}", indent=2, style=DIM)
    runs = rows.runs_line(diff)
    if runs:
        _para(page, runs, indent=2, style=DIM)
    _kernels(page, diff, opts.top)
    _changes(page, diff)
    _findings(page, diff)
    return page.text()  # the gate's line is the CLI's to print, unwrapped


# ---------------------------------------------------------------------------- paragraphs

_WORD = re.compile(r"\S+")


def _fitted_words(text: str, room: int) -> str:
    """`text` with every word longer than `room` cut in the middle (a kernel name keeps its
    start and its telling end): wrapping then never breaks a word."""
    room = max(room, 8)
    return _WORD.sub(lambda m: middle(m.group(0), room), fmt.printable(text))


def _para(
    page: Page,
    text: str,
    label: str = "",
    indent: int = 0,
    style: str = "",
    label_style: str = "",
) -> None:
    room = page.width - indent - len(label)
    page.para(
        _fitted_words(text, room), label=label, indent=indent, style=style, label_style=label_style
    )


# ------------------------------------------------------------------------------- kernels


_TORCH_NAMESPACE = re.compile(r"^(?:at::(?:native::)?|c10::)")


@dataclass(frozen=True)
class _Names:
    """Kernel signature name -> a display name no other listed kernel shares."""

    short: dict[str, str]
    tellers: dict[tuple[str, str, str], str]  # (name, grid, block) -> `grid 64`, `~1bd6`

    def of(self, k: KernelTimes, width: int, extra: str = "") -> str:
        """The name in `width` characters: cut in the middle, what tells it apart from
        look-alikes (and `extra`) kept whole."""
        base = fmt.printable(self.short.get(k.name, k.name))
        teller = " ".join(t for t in (self.tellers.get((k.name, k.grid, k.block), ""), extra) if t)
        if len(base) + len(teller) + 1 > width:  # PyTorch's namespaces go before the name
            base = _TORCH_NAMESPACE.sub("", base)
        if not teller:
            return middle(base, width)
        return f"{middle(base, max(width - len(teller) - 1, 8))} {teller}"


def _names(kernels: Iterable[KernelTimes], short: dict[str, str]) -> _Names:
    """Look-alikes (one short name, several signatures on one side) told apart by grid, block
    or a short hash of the full name, as explain's kernel table does (render/kernel_names.py)."""
    groups: dict[str, dict[tuple[str, str, str], KernelTimes]] = {}
    for k in kernels:
        groups.setdefault(short.get(k.name, k.name), {})[(k.name, k.grid, k.block)] = k
    tellers: dict[tuple[str, str, str], str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        for key, k in group.items():
            others = [o for other, o in group.items() if other != key]
            tellers[key] = _telling(k, others)
    return _Names(short, tellers)


def _telling(k: KernelTimes, others: Sequence[KernelTimes]) -> str:
    grid, block = f"grid {kernel_names.dims(k.grid)}", f"block {kernel_names.dims(k.block)}"
    if all(o.grid != k.grid for o in others):
        return grid
    if all(o.block != k.block for o in others):
        return block
    if all((o.grid, o.block) != (k.grid, k.block) for o in others):
        return f"{grid} {block}"
    return f"~{kernel_names.short_hash(k.name)}"


def _side_names(
    kernels: tuple[KernelTimes, ...], names: _Names, width: int, extra: str = ""
) -> str:
    if not kernels:
        return fmt.MISSING
    more = f" + {len(kernels) - 1} more" if len(kernels) > 1 else ""
    return names.of(kernels[0], max(width - len(more), 16), extra) + more


def _fitted(sides: Sequence[tuple[KernelTimes, ...]], names: _Names, width: int) -> list[str]:
    """Each row's names in `width`; rows the cut made read the same get a short hash of their
    first kernel's full name (as explain's kernel table does)."""
    fitted = [_side_names(ks, names, width) for ks in sides]
    seen = Counter(fitted)
    return [
        _side_names(ks, names, width, f"~{kernel_names.short_hash(ks[0].name)}")
        if ks and seen[f] > 1
        else f
        for ks, f in zip(sides, fitted, strict=True)
    ]


def _kernels(page: Page, diff: Diff, top: int) -> None:
    """One block per kernel match, largest change first: `change  %  before  after  name`,
    then (indented) what AFTER runs instead, how it was matched, its launches and verdicts."""
    ranked = sorted(rows.match_rows(diff), key=lambda r: -abs(r.match.change_ns))
    page.blank()
    page.line((f"Kernels, largest change first (time{rows.unit(diff)})", SECTION))
    head = ("change", "%", "before", "after")
    numbers = " ".join(h.rjust(w) for h, w in zip(head, NUMBER_WIDTHS, strict=True))
    page.line((f"{numbers}  kernel BEFORE (-> AFTER)", TITLE))
    lead = len(numbers) + 2
    every = [k for m in diff.matches for k in (*m.before, *m.after)]
    names = _names(every, short_names([k.name for k in every]))
    listed = ranked[:top]
    firsts = _fitted([r.match.before or r.match.after for r in listed], names, page.width - lead)
    replaced = [r.match.after if r.match.before else () for r in listed]
    afters = _fitted(replaced, names, page.width - INDENT - 3)
    for r, name, after in zip(listed, firsts, afters, strict=True):
        m = r.match
        cells = (r.change, r.change_pct, r.before_time, r.after_time)
        first = " ".join(c.rjust(w) for c, w in zip(cells, NUMBER_WIDTHS, strict=True))
        page.line(first + "  " + name)
        if m.before and m.after and not m.same_kernel:
            page.line(" " * INDENT + "-> " + after)
        detail = [r.method, f"launches {r.launches}"]
        if r.per_launch:
            detail.append(r.per_launch)
        if r.verdicts != fmt.MISSING:
            detail.append(r.verdicts)
        _para(page, "; ".join(detail), indent=INDENT, style=DIM)
    hidden = len(ranked) - top
    more = f"; {hidden} more matches (--top N, or --json)" if hidden > 0 else ""
    _para(page, rows.summary(diff) + more, style=DIM)


# ------------------------------------------------------------------------------- changes


def _changes(page: Page, diff: Diff) -> None:
    """The prediction check, one block per change of BEFORE with a finding resolved or shrunk:
    its title, whether AFTER shows it made (and how), predicted against measured."""
    made = rows.change_rows(diff)
    page.blank()
    page.line(
        ("Changes of BEFORE, as ranked: predicted against measured saving", SECTION),
    )
    for r in made:
        label = f"{r.rank} "
        _para(page, f"{r.title} ({r.rules})", label=label.rjust(INDENT), style=TITLE)
        _para(page, r.status, indent=INDENT)
        counted = f"ratio {r.ratio}" if r.counted else "not counted"
        _para(
            page, f"predicted {r.predicted}, measured {r.measured}; {counted}", indent=INDENT,
            style=DIM,
        )  # fmt: skip
    left = rows.unestimated_changes(diff)
    if left:
        _para(page, left, style=DIM)
    _para(page, rows.check_line(diff), style=TITLE)


# ------------------------------------------------------------------------------ findings


@dataclass(frozen=True)
class _Line:
    """Findings of one rule on one kernel or range (a kernel's duration groups, one NVTX
    range's instances): one line with a count."""

    rule: str
    cause: str
    where: str
    count: int
    before_ns: float | None
    after_ns: float | None


def _grouped(group: Sequence[FindingChange]) -> list[_Line]:
    out: dict[tuple[str, str, str], list[FindingChange]] = {}
    for c in group:
        f = c.finding
        out.setdefault((f.rule, f.cause, rows.where(c)), []).append(c)
    lines = []
    for (rule, cause, where), cs in out.items():
        lines.append(
            _Line(rule, cause, where, len(cs), _total(c.predicted_ns for c in cs),
                  _total(c.after_saved_ns for c in cs))
        )  # fmt: skip
    return lines


def _total(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v]
    return sum(known) if known else None


def _findings(page: Page, diff: Diff) -> None:
    for status, title in (
        ("changed", "Findings whose saving changed"),
        ("persists", "Findings that persist"),
        ("new", "New findings"),
    ):
        group = _grouped([c for c in diff.findings if c.status == status])
        if not group:
            continue
        page.blank()
        page.line((title, SECTION))
        for g in group[:FINDINGS_LISTED]:
            was = rows.time(diff, g.before_ns) if g.before_ns else fmt.NO_ESTIMATE
            now = rows.time(diff, g.after_ns) if g.after_ns else fmt.NO_ESTIMATE
            saving = f"saves {now}" if status == "new" else f"saves {was} -> {now}"
            times = f" ({g.count} findings)" if g.count > 1 else ""
            _para(page, f"{g.rule} {g.cause} [{g.where}]{times}: {saving}", label="- ")
        if len(group) > FINDINGS_LISTED:
            _para(page, f"... {len(group) - FINDINGS_LISTED} more (--json)", indent=2, style=DIM)
    unchecked = [c for c in diff.findings if c.status == "unchecked"]
    if unchecked:
        rules_ = ", ".join(sorted({c.finding.rule for c in unchecked}))
        page.blank()
        _para(
            page,
            f"{fmt.plural(len(unchecked), 'finding')} of BEFORE not re-checked ({rules_}): "
            f"{unchecked[0].how}",
            style=DIM,
        )
