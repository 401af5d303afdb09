"""Renderers: a Diagnosis (and its Session, for the timeline) or a Diff as html, json, md or text.

Renderers only display what the Diagnosis or Diff holds; they compute no diagnosis. The formats
are one table, `registry.TABLE` (name, extensions, report and diff renderer).
"""

from __future__ import annotations

from nsdiag.render.jsondoc import render_json
from nsdiag.render.registry import (
    DiffOptions,
    RenderOptions,
    format_from_path,
    formats,
    render,
    render_diff,
)

FORMATS = formats("report")

__all__ = [
    "FORMATS",
    "DiffOptions",
    "RenderOptions",
    "format_from_path",
    "formats",
    "render",
    "render_diff",
    "render_json",
]
