"""What the read-only tools do, through the CLI's own entry points so that each returns what the
command prints: `explain --json`, `diff --json`, `report -o`, `rules list` and `rules show`.
Free of the MCP SDK; errors are raised as the CLI raises them (errors.py words them)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsdiag.errors import InputError, NsdiagError
from nsdiag.mcp.summary import diff_summary, explain_summary

# One analysis at a time: tools run on worker threads, and the analyses were written for one
# command per process (they are CPU-bound: running two at once would not finish sooner).
ANALYSIS = threading.Lock()
DIFF_TOP = 15  # `nsdiag diff --top`'s default: what `diff --json` renders with


@dataclass(frozen=True)
class Answer:
    text: str  # the summary an agent reads first
    document: dict[str, Any] | None = None  # the JSON document, parsed
    document_text: str | None = None  # the JSON document exactly as the CLI prints it


def inputs(paths: str | Sequence[str], what: str) -> tuple[Path, ...]:
    """One path or several, as the CLI takes them (`~` expanded, as a shell would)."""
    given = [paths] if isinstance(paths, str) else list(paths)
    if not given or any(not p.strip() for p in given):
        raise InputError(
            f"{what}: no input given",
            "give a session folder, a .ncu-rep, an ncu CSV export or an nsys report",
        )
    return tuple(Path(p).expanduser() for p in given)


def explain(
    paths: str | Sequence[str], top: int, kernel: str | None = None, region: str = "auto"
) -> Answer:
    """`nsdiag explain --json PATHS [--kernel K] [--region R]`, and the summary."""
    from nsdiag.cli.analyse import diagnose_inputs
    from nsdiag.render import render

    with ANALYSIS:
        session, diagnosis = diagnose_inputs(inputs(paths, "explain"), kernel, region)
        text = render(diagnosis, session, "json")
    document = json.loads(text)
    return Answer(explain_summary(document, top), document, text)


def diff(
    before: str | Sequence[str],
    after: str | Sequence[str],
    fail_if_slower: float | None = None,
    region: str = "auto",
    kernel: str | None = None,
) -> Answer:
    """`nsdiag diff --json --before B... --after A... [--fail-if-slower PCT]`, and the summary
    with the gate's line (a gate that fails is an answer, not an error)."""
    from nsdiag.cli.diff import compare_inputs
    from nsdiag.render import DiffOptions, render_diff
    from nsdiag.render.diff.rows import gate_line

    before_paths, after_paths = inputs(before, "diff BEFORE"), inputs(after, "diff AFTER")
    with ANALYSIS:
        result = compare_inputs(
            before_paths, after_paths, region, region, kernel, fail_pct=fail_if_slower
        )
        text = render_diff(result, "json", DiffOptions(top=DIFF_TOP))
    document = json.loads(text)
    gate = gate_line(result.gate) if result.gate is not None else None
    return Answer(diff_summary(document, gate), document, text)


def report(
    paths: str | Sequence[str], out: str, region: str = "auto", kernel: str | None = None
) -> Answer:
    """`nsdiag report PATHS -o OUT`: the format from OUT's extension; the line it prints."""
    from nsdiag.cli.analyse import report_to_file

    if out.strip() in ("", "-"):
        raise InputError(
            f"report: out {out!r} is not a file (standard output is this server's protocol)",
            "give the file to write, e.g. nsdiag-report.html (.json, .md and .txt work too)",
        )
    with ANALYSIS:
        line = report_to_file(inputs(paths, "report"), Path(out).expanduser(), None, kernel, region)
    return Answer(line)


def rules(action: str = "list", rule_id: str | None = None) -> Answer:
    """`nsdiag rules list` (with each rule's fields as data) or `nsdiag rules show ID`."""
    from nsdiag.analysis.ruleset import find_rule, template_values
    from nsdiag.cli.rules import active_rules
    from nsdiag.render.ruledoc import rule_row, rule_text

    rule_set = active_rules(())
    if action == "show":
        if not rule_id:
            raise InputError(
                "rules show: no rule id given", "e.g. NSD101, or a cause slug: pageable-memcpy"
            )
        rule = find_rule(rule_id, rule_set.rules)
        return Answer(rule_text(rule, template_values(rule)))
    rows = [rule_row(r, r.path if r.id in rule_set.user else None) for r in rule_set.rules]
    listed = [
        {"id": r.id, "scope": r.scope, "cause": r.cause, "title": r.title} for r in rule_set.rules
    ]
    return Answer("\n".join(rows), {"rules": listed})


def profiled(result: Mapping[str, Any], note: str | None = None, top: int = 5) -> Answer:
    """A finished `nsdiag profile`: its session folder, what it lacks, and the session
    explained (as `explain` on the folder answers)."""
    from nsdiag.mcp.errors import error_line

    session = str(result["session"])
    missing = [str(m) for m in result.get("missing", [])]
    lines = [f"session: {session}" + ("" if missing else " (complete)")]
    lines += [f"missing: {m}" for m in missing]
    lines.append(f"ncu profiled {result.get('profiled', 0)} launches")
    if note:
        lines.append(f"note: {note}")
    diagnosis = None
    try:
        explained = explain([session], top)
        lines.append(explained.text)
        diagnosis = explained.document
    except NsdiagError as error:  # a session with nothing to diagnose is still a session
        lines.append(f"explain: {error_line(error)}")
    document = {
        "session": session,
        "complete": not missing,
        "missing": missing,
        "profiled": result.get("profiled", 0),
        "diagnosis": diagnosis,
    }
    return Answer("\n".join(lines), document, json.dumps(document))
