"""Renderers: a Diagnosis (and its Session, for the timeline) as html, json, md or text.

Renderers only display what the Diagnosis holds; they compute no diagnosis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nsdiag.errors import NsdiagError

if TYPE_CHECKING:
    from nsdiag.analysis.diagnosis import Diagnosis
    from nsdiag.model.session import Session

FORMATS = ("html", "json", "md", "text")
_EXTENSIONS = {
    ".html": "html",
    ".htm": "html",
    ".json": "json",
    ".md": "md",
    ".markdown": "md",
    ".txt": "text",
    ".text": "text",
}


@dataclass(frozen=True)
class RenderOptions:
    """What to show. The CLI maps its options onto these fields (`--cards N` -> cards)."""

    cards: int = 10  # kernel cards (detailed sections) for the N longest signatures
    table_rows: int | None = None  # kernel table rows; None: every signature
    top_findings: int = 5  # findings listed in the summary
    text_top: int = 10  # kernels in the text rendering
    md_kernels: int = 20  # kernels in the Markdown table
    roofline_points: int = 2000  # kernels drawn on the roofline (longest first)
    timeline_segments: int = 3000  # bars in the timeline before nearby activities are merged
    title: str = "nsdiag report"
    cards_option: str = "--cards N"  # how a user asks for more cards (said in the report)


def format_from_path(path: str | Path) -> str:
    """The output format an output file's extension asks for."""
    suffix = Path(str(path)).suffix.lower()
    if suffix not in _EXTENSIONS:
        known = ", ".join(sorted(_EXTENSIONS))
        raise NsdiagError(
            f"cannot tell the report format from {str(path)!r}",
            f"use one of the extensions {known}, or pass --format html|json|md|text",
        )
    return _EXTENSIONS[suffix]


def render_json(diagnosis: Diagnosis) -> str:
    from nsdiag.analysis.diagnosis import clean

    return (
        json.dumps(clean(diagnosis.to_json()), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    )


def render(
    diagnosis: Diagnosis,
    session: Session | None = None,
    fmt: str = "html",
    options: RenderOptions | None = None,
) -> str:
    """The report as a string in `fmt` (html, json, md or text)."""
    options = options or RenderOptions()
    fmt = fmt.lower()
    if fmt == "html":
        from nsdiag.render.html import render_html

        return render_html(diagnosis, session, options)
    if fmt == "json":
        return render_json(diagnosis)
    if fmt in ("md", "markdown"):
        from nsdiag.render.markdown import render_markdown

        return render_markdown(diagnosis, options)
    if fmt in ("text", "txt"):
        from nsdiag.render.text import render_text

        return render_text(diagnosis, top=options.text_top)
    raise NsdiagError(f"unknown report format {fmt!r}", f"use one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "RenderOptions", "format_from_path", "render", "render_json"]
