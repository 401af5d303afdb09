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
    lines += [f"- **warning**: {_cell(w)}" for w in diff.warnings]
    if diff.region.note:
        lines.append(f"- note: {_cell(diff.region.note)}")
    lines += ["", f"**{_cell(rows.region_headline(diff))}**", ""]
    lines += [
        f"- BEFORE {rows.spread(diff.region.before)}",
        f"- AFTER {rows.spread(diff.region.after)}",
    ]
    runs = rows.runs_line(diff)
    if runs:
        lines.append(f"- {runs}")
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
                    r.launches + (f" ({r.per_launch})" if r.per_launch else ""),
                    r.verdicts,
                )
            )
            + " |"
        )
    lines += ["", rows.summary(diff), ""]
    lines += ["## Changes of BEFORE, as ranked: predicted against measured saving", ""]
    made = rows.change_rows(diff)
    if made:
        lines += ["| # | change | made | predicted | measured | ratio |"]
        lines += ["| ---: | --- | --- | ---: | ---: | ---: |"]
        lines += [
            f"| {r.rank} | {_cell(r.title)} ({_cell(r.rules)}) | {_cell(r.status)} | "
            f"{_cell(r.predicted)} | {_cell(r.measured)} | {r.ratio} |"
            for r in made
        ]
    else:
        lines.append("No change of BEFORE with an estimate was made.")
    left = rows.unestimated_changes(diff)
    if left:
        lines += ["", _cell(left)]
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
