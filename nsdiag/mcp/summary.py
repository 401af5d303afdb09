"""The short text an agent reads first beside the JSON: the first changes with their saving (and,
where a change names it, the code it comes from), from the very document the tool returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nsdiag.render.fmt import NO_ESTIMATE, share, time_ns

# A change's own record of the code it comes from (the Python functions whose ranges hold its
# kernels' launches: issue 37). Shown as the JSON has it; nothing is shown where it is absent.
CODE_KEY = "code"

Document = Mapping[str, Any]


def explain_summary(doc: Document, top: int) -> str:
    """What was analysed, any warning, and the `top` first changes: title, saving, rules, code,
    fix."""
    region = doc.get("region") or {}
    sources = ", ".join(str(s.get("path")) for s in (doc.get("meta") or {}).get("sources", []))
    device = (doc.get("device") or {}).get("name")
    lines = [f"{doc.get('schema')}: {sources}" + (f" ({device})" if device else "")]
    if region.get("description"):
        lines.append(
            f"analysed: {region['description']}, {time_ns(region.get('wall_ns'))} of wall time"
        )
    lines += [f"warning: {w}" for w in doc.get("warnings", [])]
    changes: Sequence[Document] = doc.get("changes") or []
    iterations = region.get("iterations") or 0
    if not changes:
        lines.append("no change to suggest: no rule with a saving fired")
    elif top:
        lines.append(
            "What to change first (saving, share of the analysed region; each after those above):"
        )
    for rank, change in enumerate(changes[:top], 1):
        rules = ", ".join(change.get("rules", []))
        lines.append(f"{rank:2d}. {change.get('title')}: {_saving(change, iterations)} [{rules}]")
        code = code_text(change)
        if code:
            lines.append(f"    code: {code}")
        if change.get("fix"):
            lines.append(f"    fix: {change['fix']}")
    if len(changes) > top:
        lines.append(f"({len(changes) - top} more in the JSON's changes)")
    lines.append(
        f"{len(doc.get('kernels', []))} kernel signature(s) in the JSON's kernels, "
        f"{len(doc.get('program_findings', []))} program finding(s) in program_findings"
    )
    return "\n".join(lines)


def _saving(change: Document, iterations: int) -> str:
    saved = change.get("saved_ns")
    if saved is None:
        return NO_ESTIMATE
    amount = f"{time_ns(saved / iterations)}/iteration" if iterations else time_ns(saved)
    return f"{amount} ({share(change.get('share'))})"


def code_text(change: Document) -> str | None:
    """The change's code as its record gives it (analysis/records/code.py): the Python
    functions holding its work with their launches and host time, else the operators its
    kernel names imply, else what a profile with the PyTorch ranges would add; None: nothing."""
    code = change.get(CODE_KEY)
    if not isinstance(code, Mapping):
        return None
    per = " per iteration" if code.get("per_iteration") else ""
    total = code.get("total_launches") or 0
    parts = []
    for site in code.get("sites") or []:
        words = [f"{site['function']}"]
        if site.get("launches"):
            words.append(f"{site['launches']:,.0f} of {total:,.0f} launches{per}")
        if site.get("host_ns"):
            words.append(f"{site['host_ns'] / 1e6:.1f} ms of host time")
        parts.append(": ".join([words[0], ", ".join(words[1:])]) if len(words) > 1 else words[0])
    if parts:
        return "; ".join(parts)
    if code.get("operators"):
        return ", ".join(code["operators"]) + " (from the kernel names)"
    note = code.get("note")
    return str(note) if note else None


def diff_summary(doc: Document, gate_line: str | None, top: int = 5) -> str:
    """BEFORE against AFTER: the region's time, the findings resolved and new, and the first
    changes of BEFORE with their predicted and measured savings; the gate's verdict."""
    before, after = doc.get("before") or {}, doc.get("after") or {}
    lines = [
        f"{doc.get('schema')}: BEFORE {', '.join(before.get('sources', []))} -> "
        f"AFTER {', '.join(after.get('sources', []))}"
    ]
    if gate_line:
        lines.append(gate_line)
    region = doc.get("region") or {}
    if region:
        what = "time per iteration" if region.get("unit") == "iteration" else "region time"
        was, now = (region.get(k) or {} for k in ("before", "after"))
        pct = region.get("change_pct")
        lines.append(
            f"{what}: {time_ns(was.get('median_ns'))} -> {time_ns(now.get('median_ns'))} "
            f"({_signed(region.get('change_ns'))}" + (f", {pct:+.1f}%)" if pct is not None else ")")
        )
    lines += [f"warning: {w}" for w in doc.get("warnings", [])]
    statuses: dict[str, int] = {}
    for finding in doc.get("findings", []):
        statuses[finding.get("status")] = statuses.get(finding.get("status"), 0) + 1
    if statuses:
        lines.append("findings: " + ", ".join(f"{n} {status}" for status, n in statuses.items()))
    rows: Sequence[Document] = doc.get("prediction_by_change") or []
    if rows:
        lines.append("Changes of BEFORE, as ranked: predicted against measured saving")
    for row in rows[:top]:
        made = row.get("status") or ("made" if row.get("made") else "not made")
        if row.get("evidence"):
            made += f": {row['evidence']}"
        measured = row.get("measured_ns")
        on = f" on {row['measured_on']}" if measured is not None and row.get("measured_on") else ""
        shared = row.get("measured_shared_by")
        shared_text = f", shared by {shared} changes" if shared and shared > 1 else ""
        lines.append(
            f"{row.get('rank', 0):2d}. {row.get('title')} ({made}): predicted "
            f"{time_ns(row.get('predicted_ns'))}, measured {time_ns(measured)}{on}{shared_text}"
        )
        code = code_text(row)
        if code:
            lines.append(f"    code: {code}")
    if len(rows) > top:
        lines.append(f"({len(rows) - top} more in the JSON's prediction_by_change)")
    check = doc.get("prediction_check")
    if check and check.get("ratio") is not None:
        lines.append(
            f"prediction check: predicted {time_ns(check.get('predicted_ns'))}, measured "
            f"{time_ns(check.get('measured_ns'))} (measured/predicted {check['ratio']:.2f})"
        )
    return "\n".join(lines)


def _signed(ns: Any) -> str:
    if not isinstance(ns, int | float):
        return time_ns(ns)
    return ("+" if ns > 0 else "−" if ns < 0 else "") + time_ns(abs(ns))
