"""The table of output formats: for each, the file extensions that ask for it and the functions
that draw a diagnosis (a report) and a comparison (a diff) in it. Adding a format is one entry
in `TABLE`; `render`, `render_diff`, `format_from_path` and the CLI's `--format` choices read it.

A renderer only displays: it receives a finished Diagnosis (and the Session, for the timeline)
or a Diff and returns a string. It is named "module:function" and imported when first used
(nsdiag/lazy.py), so the text path never loads jinja2 or plotly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.errors import NsdiagError
from nsdiag.lazy import resolve

if TYPE_CHECKING:  # annotations only: the comparison and the session hold pandas tables
    from nsdiag.analysis.diff import Diff
    from nsdiag.model.session import Session

Kind = Literal["report", "diff"]


@dataclass(frozen=True)
class RenderOptions:
    """What to show. The CLI maps its options onto these fields (`--cards N` -> cards)."""

    cards: int = 10  # kernel cards (detailed sections) for the N longest signatures
    table_rows: int | None = None  # kernel table rows; None: every signature
    top_findings: int = 5  # changes listed in the summary (what is worth the most time)
    text_findings: int = 10  # findings per kernel in the text rendering (explain: --top)
    text_kernels: int = 10  # kernels in the text rendering (explain: --top-kernels)
    md_kernels: int = 20  # kernels in the Markdown table
    roofline_points: int = 2000  # kernels drawn on the roofline (longest first)
    timeline_segments: int = 3000  # bars in the timeline before nearby activities are merged
    title: str = "nsdiag report"
    cards_option: str = "--cards N"  # how a user asks for more cards (said in the report)


@dataclass(frozen=True)
class DiffOptions:
    """What a comparison shows (`nsdiag diff --top N` -> top)."""

    top: int = 15  # kernel matches listed (text, Markdown)
    width: int = 100  # text: columns (the terminal's; text_layout.WIDTH into a pipe or file)
    color: bool = False  # text: ANSI colour and emphasis


ReportRenderer = Callable[["Diagnosis", "Session | None", RenderOptions], str]
DiffRenderer = Callable[["Diff", DiffOptions], str]


@dataclass(frozen=True)
class Format:
    name: str
    extensions: tuple[str, ...]  # lower case, with the dot; the first is the one to suggest
    report: str | None  # "module:function", a ReportRenderer; None: no report in this format
    diff: str | None  # "module:function", a DiffRenderer; None: no diff in this format
    aliases: tuple[str, ...] = ()  # other names `render(fmt=...)` accepts

    def renderer(self, kind: Kind) -> str | None:
        return self.report if kind == "report" else self.diff


TABLE: tuple[Format, ...] = (
    Format(
        "html",
        (".html", ".htm"),
        report="nsdiag.render.html:render_html",
        diff="nsdiag.render.diff.html:render_diff_html",
    ),
    Format(
        "json",
        (".json",),
        report="nsdiag.render.jsondoc:render_json",
        diff="nsdiag.render.jsondoc:render_diff_json",
    ),
    Format(
        "md",
        (".md", ".markdown"),
        report="nsdiag.render.markdown:render_markdown",
        diff="nsdiag.render.diff.markdown:render_diff_markdown",
        aliases=("markdown",),
    ),
    Format(
        "text",
        (".txt", ".text"),
        report="nsdiag.render.text:render_text_report",
        diff="nsdiag.render.diff.text:render_diff_text",
        aliases=("txt",),
    ),
)


def formats(kind: Kind = "report") -> tuple[str, ...]:
    """The names of the formats that can draw `kind`, in table order."""
    return tuple(f.name for f in TABLE if f.renderer(kind))


def extensions(kind: Kind = "report", first: bool = False) -> tuple[str, ...]:
    """The file extensions that name a format of `kind` (first: one a format, to suggest)."""
    return tuple(
        e for f in TABLE if f.renderer(kind) for e in (f.extensions[:1] if first else f.extensions)
    )


def format_from_path(path: str | Path, kind: Kind = "report") -> str:
    """The output format an output file's extension asks for."""
    suffix = Path(str(path)).suffix.lower()
    for f in TABLE:
        if f.renderer(kind) and suffix in f.extensions:
            return f.name
    raise NsdiagError(
        f"cannot tell the report format from {str(path)!r}",
        f"use one of the extensions {', '.join(sorted(extensions(kind)))}, "
        f"or pass --format {'|'.join(formats(kind))}",
    )


def _entry(fmt: str, kind: Kind) -> str:
    name = fmt.lower()
    for f in TABLE:
        ref = f.renderer(kind)
        if ref and name in (f.name, *f.aliases):
            return ref
    raise NsdiagError(f"unknown report format {fmt!r}", f"use one of {', '.join(formats(kind))}")


def render(
    diagnosis: Diagnosis,
    session: Session | None = None,
    fmt: str = "html",
    options: RenderOptions | None = None,
) -> str:
    """The report as a string in `fmt` (a name or alias in TABLE)."""
    renderer = cast(ReportRenderer, resolve(_entry(fmt, "report")))
    return renderer(diagnosis, session, options or RenderOptions())


def render_diff(diff: Diff, fmt: str = "text", options: DiffOptions | None = None) -> str:
    """The comparison as a string in `fmt` (a name or alias in TABLE)."""
    renderer = cast(DiffRenderer, resolve(_entry(fmt, "diff")))
    return renderer(diff, options or DiffOptions())
