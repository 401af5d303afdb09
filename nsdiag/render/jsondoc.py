"""The JSON documents: a Diagnosis (schema nsdiag.diagnosis/4, docs/diagnosis.schema.json) and a
Diff (schema nsdiag.diff/1, docs/diff.schema.json). The one path for `explain --json` and
`report -o x.json`, and for `diff --json` and `diff -o x.json`: the bytes are the same."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.render.registry import DiffOptions, RenderOptions

if TYPE_CHECKING:  # annotations only: the comparison and the session hold pandas tables
    from nsdiag.analysis.diff import Diff
    from nsdiag.model.session import Session


def render_json(
    diagnosis: Diagnosis, session: Session | None = None, options: RenderOptions | None = None
) -> str:
    """The diagnosis's document; the same whatever the options (it holds everything)."""
    return json.dumps(diagnosis.to_json(), indent=1, allow_nan=False) + "\n"


def render_diff_json(diff: Diff, options: DiffOptions | None = None) -> str:
    """The comparison's document; every match and finding, whatever `--top` says."""
    return json.dumps(diff.to_json(), indent=1, allow_nan=False, ensure_ascii=False) + "\n"
