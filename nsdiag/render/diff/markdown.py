"""The comparison as Markdown (a pull-request comment, a CI summary)."""

from __future__ import annotations

from nsdiag.analysis.diff import Diff
from nsdiag.render.diff import rows
from nsdiag.render.registry import DiffOptions


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_diff_markdown(diff: Diff, options: DiffOptions | None = None) -> str:
    top = (options or DiffOptions()).top
    lines = ["# nsdiag diff", ""]
    lines += [f"- {_cell(rows.side_line(side))}" for side in (diff.before, diff.after)]
    if diff.region.note:
        lines.append(f"- note: {_cell(diff.region.note)}")
    lines += ["", f"**{_cell(rows.region_headline(diff))}**", ""]
    lines += [
        f"- BEFORE {rows.spread(diff.region.before)}",
        f"- AFTER {rows.spread(diff.region.after)}",
    ]
    lines += ["", f"## Kernels (time{rows.unit(diff)}, largest change first)", ""]
    lines += ["| BEFORE | AFTER | matched | before | after | change | launches | verdict |"]
    lines += ["| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    ranked = sorted(rows.match_rows(diff), key=lambda r: -abs(r.match.change_ns))
    for r in ranked[:top]:
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    f"`{r.before}`" if r.match.before else "",
                    f"`{r.after}`" if r.match.after else "",
                    r.method,
                    r.before_time,
                    r.after_time,
                    f"{r.change} ({r.change_pct})",
                    r.launches,
                    r.verdicts,
                )
            )
            + " |"
        )
    lines += [
        "",
        rows.summary(diff),
        "",
        "## Findings resolved or shrunk: predicted against measured",
        "",
    ]
    checked = [c for c in diff.findings if c.status == "resolved" or c.expected_ns]
    if checked:
        lines += ["| rule | where | status | predicted | measured | ratio |"]
        lines += ["| --- | --- | --- | ---: | ---: | ---: |"]
        for c in checked:
            lines.append(
                f"| {c.finding.rule} {c.finding.cause} | `{_cell(rows.where(c))}` | {c.status} | "
                f"{_cell(rows.expected(diff, c))} | {_cell(rows.measured(diff, c))} | "
                f"{rows.ratio(c.ratio)} |"
            )
    made = rows.change_rows(diff)
    if made:
        lines += ["", "Changes made (predicted: marginal, after the changes ranked above it):", ""]
        lines += ["| change | findings | predicted | its findings | measured | ratio |"]
        lines += ["| --- | ---: | ---: | ---: | ---: | ---: |"]
        lines += [
            f"| {_cell(r.title)} ({_cell(r.rules)}) | {r.findings} | {_cell(r.predicted)} | "
            f"{_cell(r.summed)} | {_cell(r.measured)} | {r.ratio} |"
            for r in made
        ]
    lines += ["", rows.check_line(diff), ""]
    new = [c for c in diff.findings if c.status == "new"]
    if new:
        lines += ["## New findings", ""]
        lines += [
            f"- {c.finding.rule} {c.finding.cause} [{_cell(rows.where(c))}]: saves "
            f"{rows.time(diff, c.after_saved_ns)}"
            for c in new
        ]
        lines.append("")
    if diff.gate is not None:
        lines += [f"`{rows.gate_line(diff.gate)}`", ""]
    return "\n".join(lines)
