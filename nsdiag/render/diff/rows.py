"""A Diff as display rows (formatted strings) shared by the text, Markdown and HTML renderers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from nsdiag.analysis.diff import Diff, KernelMatch
from nsdiag.analysis.diff.by_change import ChangeOutcome
from nsdiag.analysis.diff.findings import FindingChange
from nsdiag.analysis.diff.gate import Gate, GateCheck
from nsdiag.analysis.diff.kernels import LABELS
from nsdiag.analysis.diff.side import KernelTimes, Side
from nsdiag.analysis.diff.stats import ALPHA, MIN_SAMPLES, Spread
from nsdiag.analysis.records.diagnosis import KernelDiagnosis
from nsdiag.model.names import ELLIPSIS, short_name, short_names
from nsdiag.render import fmt

METHOD_LABELS = LABELS
NAME_WIDTH = 60


def unit(diff: Diff) -> str:
    """What the times are per."""
    return "/iteration" if diff.region.unit == "iteration" else ""


def time(diff: Diff, ns: float | None) -> str:
    return fmt.MISSING if ns is None else f"{fmt.time_ns(ns)}{unit(diff)}"


def signed(ns: float) -> str:
    """`+434 µs`, `-6.36 ms`: the sign as the percentages beside it print theirs."""
    return ("+" if ns > 0 else "-" if ns < 0 else "±") + fmt.time_ns(abs(ns))


def pct_change(before: float, after: float) -> str:
    return f"{(after - before) / before * 100:+.1f}%" if before > 0 else "new"


def spread(s: Spread) -> str:
    """`median 21.4 ms (IQR 21.3–21.5 ms, min 20.7 ms, max 21.8 ms, 7 iterations)`."""
    if s.n <= 1:
        return f"{fmt.time_ns(s.median)} (one measurement)"
    return (
        f"median {fmt.time_ns(s.median)} (IQR {fmt.time_ns(s.q1)}–{fmt.time_ns(s.q3)}, "
        f"min {fmt.time_ns(s.low)}, max {fmt.time_ns(s.high)}, {s.n} iterations)"
    )


def summary(diff: Diff) -> str:
    """`matched: 88 same kernel, 3 same library role, 1 replaced by fused; 2 gone, 1 new`."""
    counts = Counter(m.method for m in diff.matches)
    matched = [
        f"{counts[m]} {METHOD_LABELS[m]}"
        for m in METHOD_LABELS
        if m not in ("gone", "new")
        if counts[m]
    ]
    return f"matched: {', '.join(matched) or 'nothing'}; {counts['gone']} gone, {counts['new']} new"


def side_line(side: Side) -> str:
    sources = ", ".join(side.sources)
    device = side.diagnosis.device.get("name") or "unknown GPU"
    line = f"{side.label.upper()}: {sources} ({device}): {side.describe()}"
    more = [", ".join(r.sources) for r in side.extra_runs]
    if more:
        runs = fmt.plural(len(more), "more run")
        line += f"; {runs} of it for the run-to-run noise: {'; '.join(more)}"
    return line


def noise(diff: Diff) -> str:
    """Whether the region's change stands out of the noise, and which noise: run-to-run where
    a side has several runs, else the iterations' (which says nothing of the runs')."""
    r = diff.region
    runs = diff.gate.noise if diff.gate is not None else r.noise
    word = "faster" if r.change_ns < 0 else "slower"
    b, a = _medians(diff)
    within = b > 0 and abs(a - b) / b * 100 <= runs.pct
    beyond_runs = f"within the {runs.describe()}" if within else f"beyond the {runs.describe()}"
    if runs.basis == "measured" and len(r.before_runs) + len(r.after_runs) > 2:
        return beyond_runs
    p = r.p_faster if r.change_ns < 0 else r.p_slower
    if p is None:
        return (
            f"iteration noise unknown ({r.before.n} vs {r.after.n} iterations, {MIN_SAMPLES} a "
            f"side needed); {beyond_runs}"
        )
    if p >= ALPHA:
        return f"within the iteration-to-iteration noise (Mann-Whitney p = {p:.2g})"
    return (
        f"{word} beyond the iteration-to-iteration noise (Mann-Whitney p = {p:.2g}) "
        f"{'but' if within else 'and'} {beyond_runs}"
    )


def runs_line(diff: Diff) -> str | None:
    """`runs: BEFORE 561 µs, 545 µs; AFTER 565 µs, 574 µs (median iteration of each)`, where a
    side has several runs."""
    r = diff.region
    if len(r.before_runs) < 2 and len(r.after_runs) < 2:
        return None
    b = ", ".join(fmt.time_ns(v) for v in r.before_runs)
    a = ", ".join(fmt.time_ns(v) for v in r.after_runs)
    return (
        f"runs: BEFORE {b}; AFTER {a} (each run's median iteration; the change is between "
        "the sides' median runs)"
    )


def _medians(diff: Diff) -> tuple[float, float]:
    """The region's time BEFORE and AFTER: the median runs where a side has several."""
    r = diff.region
    if len(r.before_runs) > 1 or len(r.after_runs) > 1:
        return float(np.median(r.before_runs)), float(np.median(r.after_runs))
    return r.before.median, r.after.median


def region_headline(diff: Diff) -> str:
    r = diff.region
    what = "Region time per iteration" if r.unit == "iteration" else "Region time"
    b, a = _medians(diff)
    if len(r.before_runs) > 1 or len(r.after_runs) > 1:
        what += ", median run"
    return (
        f"{what}: {fmt.time_ns(b)} -> {fmt.time_ns(a)} ({signed(a - b)}, {pct_change(b, a)}); "
        f"{noise(diff)}"
    )


def verdict(k: KernelDiagnosis | None) -> str:
    if k is None:
        return "not profiled"
    return k.bound + (f": {k.limiter}" if k.limiter and k.limiter != k.bound else "")


@dataclass(frozen=True)
class MatchRow:
    match: KernelMatch
    before: str  # short names
    after: str
    before_full: str
    after_full: str
    method: str
    how: str
    before_time: str
    after_time: str
    change: str
    change_pct: str
    launches: str
    per_launch: str  # where the launch count changed: time per launch before -> after
    verdicts: str


def _names(kernels: tuple[KernelTimes, ...], short: dict[str, str]) -> str:
    if not kernels:
        return fmt.MISSING
    first = short.get(kernels[0].name, short_name(kernels[0].name))
    if len(first) > NAME_WIDTH:
        first = first[: NAME_WIDTH - 1] + ELLIPSIS
    return first + (f" + {len(kernels) - 1} more" if len(kernels) > 1 else "")


def _launches(kernels: tuple[KernelTimes, ...]) -> float:
    return sum(k.launches_per_iteration for k in kernels)


def _verdicts(m: KernelMatch) -> str:
    """`memory: dram -> memory: dram`, `–` where a side did not profile the kernel."""
    b = verdict(m.before[0].diagnosis) if m.before and m.before[0].diagnosis else fmt.MISSING
    a = verdict(m.after[0].diagnosis) if m.after and m.after[0].diagnosis else fmt.MISSING
    return fmt.MISSING if b == a == fmt.MISSING else f"{b} -> {a}"


def per_launch(m: KernelMatch) -> str:
    """`8.1 µs -> 805 ns a launch (−90.1%)` where both sides run and the launch count changed
    (the time per iteration alone would call a kernel launched more often, each launch
    faster, slower); "" otherwise."""
    b, a = m.per_launch_ns("before"), m.per_launch_ns("after")
    if b is None or a is None or abs(m.launches("before") - m.launches("after")) < 0.05:
        return ""
    return f"{fmt.time_ns(b)} -> {fmt.time_ns(a)} a launch ({pct_change(b, a)})"


def match_rows(diff: Diff) -> list[MatchRow]:
    names = [k.name for m in diff.matches for k in (*m.before, *m.after)]
    short = short_names(names)
    rows = []
    for m in diff.matches:
        rows.append(
            MatchRow(
                match=m,
                before=_names(m.before, short),
                after=_names(m.after, short),
                before_full="\n".join(k.name for k in m.before),
                after_full="\n".join(k.name for k in m.after),
                method=METHOD_LABELS[m.method],
                how=m.how(),
                before_time=fmt.time_ns(m.before_ns) if m.before else fmt.MISSING,
                after_time=fmt.time_ns(m.after_ns) if m.after else fmt.MISSING,
                change=signed(m.change_ns),
                change_pct=pct_change(m.before_ns, m.after_ns) if m.before else "new",
                launches=f"{fmt.num(round(_launches(m.before), 1))} -> "
                f"{fmt.num(round(_launches(m.after), 1))}",
                per_launch=per_launch(m),
                verdicts=_verdicts(m),
            )
        )
    return rows


def where(change: FindingChange) -> str:
    scoped = change.before or change.after
    assert scoped is not None
    f = scoped.finding
    if scoped.kernel is not None:
        return short_name(scoped.kernel.name)
    if f.range:
        return f"NVTX {f.range}"
    if f.chain:
        return f"chain of {len(f.chain)} kernels from {short_name(f.chain[0])}"
    return short_name(f.kernel) if f.kernel else "the program"


def expected(diff: Diff, change: FindingChange) -> str:
    """A resolved finding's predicted saving; a changed one's drop, with both savings."""
    if change.expected_ns is None:
        return fmt.NO_ESTIMATE
    text = time(diff, change.expected_ns)
    if change.status == "changed":
        text += f" ({fmt.time_ns(change.predicted_ns)} -> {fmt.time_ns(change.after_saved_ns)})"
    return text


def measured(diff: Diff, change: FindingChange) -> str:
    if change.measured_ns is None:
        return fmt.MISSING
    on = change.measured_on
    if change.shared > 1:
        on = f"the region, for {change.shared} findings together"
    return time(diff, change.measured_ns) + (f" ({on})" if on else "")


def check_line(diff: Diff) -> str:
    """The prediction check in one sentence: the sum of the counted rows of the table."""
    c = diff.check
    if c is None:
        return (
            "Prediction check: no change of BEFORE with an estimate is shown made by AFTER "
            "(made: its kernels or timeline changed as the change says)"
        )
    ranks = ", ".join(f"#{r.rank}" for r in diff.by_change if r.counted)
    n = len([r for r in diff.by_change if r.counted])
    return (
        f"Prediction check: the {n} change{'s' if n != 1 else ''} made ({ranks}) predicted "
        f"{time(diff, c.predicted_ns)}; the region measured {time(diff, c.measured_ns)} "
        f"(ratio {ratio(c.ratio)})"
    )


@dataclass(frozen=True)
class ChangeRow:
    """One change of BEFORE with a finding resolved or shrunk, as display strings."""

    rank: str
    title: str
    rules: str
    status: str  # `made: its kernels' precision changed (fp32 -> bf16)`, `not made: ...`
    predicted: str
    measured: str
    ratio: str
    counted: bool = False  # in the prediction check's total


def change_rows(diff: Diff, all_rows: bool = False) -> list[ChangeRow]:
    """The prediction check, one row per change of BEFORE in its ranked order; `all_rows`:
    also the changes resolved without an estimate (unchecked_changes names them)."""
    out = []
    for r in diff.by_change:
        if not r.predicted_ns and r.measured_ns is None and not all_rows:
            continue
        status = _status(r)
        out.append(
            ChangeRow(
                rank=f"#{r.rank}",
                title=r.title,
                rules=", ".join(r.rules),
                status=status,
                predicted=time(diff, r.predicted_ns) if r.predicted_ns else fmt.NO_ESTIMATE,
                measured=_change_measured(diff, r),
                ratio=ratio(r.ratio),
                counted=r.counted,
            )
        )
    return out


def _status(r: ChangeOutcome) -> str:
    """`made: its kernels' precision changed (fp32 -> bf16)`, `partly: ...; 2 of 5 findings`,
    `not made: its kernel runs unchanged ...`, `unclear: ...`."""
    return f"{r.status}: {r.evidence}" if r.evidence else r.status


def unestimated_changes(diff: Diff) -> str | None:
    """One line naming the changes whose findings went with no estimate to check."""
    left = [r for r in diff.by_change if not r.predicted_ns and r.measured_ns is None]
    if not left:
        return None
    names = ", ".join(f"#{r.rank} {'/'.join(r.rules)}" for r in left)
    changes = fmt.plural(len(left), "more change")
    return f"{changes} of BEFORE resolved with no estimate to check: {names}"


def _change_measured(diff: Diff, r: ChangeOutcome) -> str:
    if r.measured_ns is None:
        return fmt.MISSING
    on = r.measured_on
    if r.shared > 1:
        on += (
            f", shared by {r.shared} changes"
            if on == "the region"
            else ", already measured for a change above"
        )
    return time(diff, r.measured_ns) + (f" ({on})" if on else "")


def ratio(value: float | None) -> str:
    return fmt.MISSING if value is None else f"{value:.2f}"


def check_sentence(check: GateCheck) -> str:
    """`the region: 545 µs -> 574 µs (+5.3%, threshold 5%): within the run-to-run noise 6.0%
    (...); Mann-Whitney p = 2.4e-19 over 59 vs 59 iterations`"""
    head = (
        f"{check.what}: {fmt.time_ns(check.before_ns)} -> {fmt.time_ns(check.after_ns)} "
        f"({check.change_pct:+.1f}%, threshold {check.threshold_pct:g}%)"
    )
    if check.runs:
        head += f", median of {len(check.before_runs)} vs {len(check.after_runs)} runs"
    if not check.over_threshold:
        verdict = "under the threshold"
    elif not check.beyond_run_noise:
        verdict = "within the " + check.noise.describe()
    elif check.beyond_noise is False:
        verdict = "within the iteration-to-iteration noise"
    else:
        verdict = "slower beyond the " + check.noise.describe()
    samples = "runs" if check.runs else "iterations"
    n = (
        (len(check.before_runs), len(check.after_runs))
        if check.runs
        else (check.before.n, check.after.n)
    )
    if check.p_value is None:
        test = f"too few {samples} for a rank test ({n[0]} vs {n[1]}, {MIN_SAMPLES} a side)"
    else:
        sign = "<" if check.p_value < ALPHA else ">="
        test = (
            f"Mann-Whitney p = {check.p_value:.2g} {sign} {ALPHA:g} over {n[0]} vs {n[1]} {samples}"
        )
    return f"{head}: {verdict}; {test}"


def gate_line(gate: Gate) -> str:
    """One line for the CI log: why the gate failed, or that it passed and the largest
    change it saw."""
    failed = gate.failed
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"nsdiag diff: FAIL: {check_sentence(failed[0])}{more}"
    closest = max(gate.checks, key=lambda c: c.change_pct)
    return (
        f"nsdiag diff: pass: nothing got slower by more than {gate.threshold_pct:g}% beyond the "
        f"run-to-run noise (the region and {fmt.plural(len(gate.checks) - 1, 'kernel')} above "
        f"{gate.share_pct:g}% of it); largest change: {check_sentence(closest)}"
    )
