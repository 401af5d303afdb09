"""A Diff as display rows (formatted strings) shared by the text, Markdown and HTML renderers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from nsdiag.analysis.diagnosis import KernelDiagnosis
from nsdiag.analysis.diff import Diff, KernelMatch
from nsdiag.analysis.diff.findings import ChangeCheck, FindingChange
from nsdiag.analysis.diff.gate import Gate, GateCheck
from nsdiag.analysis.diff.kernels import LABELS
from nsdiag.analysis.diff.side import KernelTimes, Side
from nsdiag.analysis.diff.stats import ALPHA, MIN_SAMPLES, Spread
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
    return ("+" if ns > 0 else "−" if ns < 0 else "±") + fmt.time_ns(abs(ns))


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
    return f"{side.label.upper()}: {sources} ({device}): {side.describe()}"


def noise(diff: Diff) -> str:
    """Whether the region's change stands out of the iteration-to-iteration noise."""
    r = diff.region
    p = r.p_faster if r.change_ns < 0 else r.p_slower
    if p is None:
        return (
            f"noise unknown: {r.before.n} vs {r.after.n} iterations ({MIN_SAMPLES} a side are "
            "needed to tell a change from noise)"
        )
    word = "faster" if r.change_ns < 0 else "slower"
    if p < ALPHA:
        return f"{word} beyond the iteration-to-iteration noise (Mann-Whitney p = {p:.2g})"
    return f"within the iteration-to-iteration noise (Mann-Whitney p = {p:.2g})"


def region_headline(diff: Diff) -> str:
    r = diff.region
    what = "Region time per iteration" if r.unit == "iteration" else "Region time"
    return (
        f"{what}: {fmt.time_ns(r.before.median)} -> {fmt.time_ns(r.after.median)} "
        f"({signed(r.change_ns)}, {pct_change(r.before.median, r.after.median)}); {noise(diff)}"
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
    """The prediction check in one sentence."""
    c = diff.check
    if c is None:
        return "Prediction check: no finding of BEFORE with an estimate was resolved or shrank"
    made = (
        f" ({c.changes} change(s) of BEFORE made in full, each counted once for its saving)"
        if c.changes
        else ""
    )
    return (
        f"Prediction check: the {c.findings} finding(s) resolved or shrunk{made} predicted "
        f"{time(diff, c.predicted_ns)}; the region measured {time(diff, c.measured_ns)} "
        f"(ratio {ratio(c.ratio)})"
    )


@dataclass(frozen=True)
class ChangeRow:
    """A change of BEFORE made in full, as display strings."""

    title: str
    rules: str
    findings: str
    predicted: str
    summed: str
    measured: str
    ratio: str


def change_rows(diff: Diff) -> list[ChangeRow]:
    """The changes made in full whose prediction is not simply one finding's: several findings,
    or a saving that the changes ranked above it shared."""
    out = []
    for m in diff.changes:
        if m.findings < 2 and not _differs(m.predicted_ns, m.summed_ns):
            continue
        out.append(
            ChangeRow(
                title=m.change.title,
                rules=", ".join(m.change.rules),
                findings=str(m.findings),
                predicted=time(diff, m.predicted_ns),
                summed=time(diff, m.summed_ns),
                measured=_change_measured(diff, m),
                ratio=ratio(m.ratio),
            )
        )
    return out


def _differs(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) > 0.01 * max(abs(b), 1.0)


def _change_measured(diff: Diff, m: ChangeCheck) -> str:
    if m.measured_ns is None:
        return fmt.MISSING
    on = m.measured_on if m.shared <= 1 else "shared with other findings"
    return time(diff, m.measured_ns) + (f" ({on})" if on else "")


def ratio(value: float | None) -> str:
    return fmt.MISSING if value is None else f"{value:.2f}"


def check_sentence(check: GateCheck) -> str:
    """`the region: 141 µs -> 561 µs (+297.4%, threshold 5%); median of 57 vs 58 iterations,
    quartiles 137 µs–145 µs vs 557 µs–565 µs (clear of the threshold), Mann-Whitney
    p = 1e-20 < 0.01`"""
    b, a = check.before, check.after
    head = (
        f"{check.what}: {fmt.time_ns(b.median)} -> {fmt.time_ns(a.median)} "
        f"({check.change_pct:+.1f}%, threshold {check.threshold_pct:g}%)"
    )
    if check.p_value is None:
        return (
            f"{head}; noise unknown ({b.n} vs {a.n} iterations, {MIN_SAMPLES} a side needed): "
            "the threshold alone decides"
        )
    sign = "<" if check.p_value < ALPHA else ">="
    spread = "clear of" if check.clear_of_spread else "within"
    return (
        f"{head}; median of {b.n} vs {a.n} iterations, quartiles "
        f"{fmt.time_ns(b.q1)}–{fmt.time_ns(b.q3)} vs {fmt.time_ns(a.q1)}–{fmt.time_ns(a.q3)} "
        f"({spread} the threshold), Mann-Whitney p = {check.p_value:.2g} {sign} {ALPHA:g}"
    )


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
        f"noise (the region and {len(gate.checks) - 1} kernel(s) above {gate.share_pct:g}% of it);"
        f" largest change: {check_sentence(closest)}"
    )
