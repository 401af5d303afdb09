"""Formatting helpers shared by the renderers: numbers with units, missing values, escaping."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from nsdiag.analysis.records.changes import Change, Touch
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.records.findings import Finding
from nsdiag.model import evidence_labels, quantities
from nsdiag.model.names import short_names
from nsdiag.model.values import number

MISSING = "–"

# Display labels for the canonical metrics the renderers show (others print their own name).
METRIC_LABELS: dict[str, str] = {
    "dram_throughput_pct": "DRAM throughput %",
    "l2_throughput_pct": "L2 throughput %",
    "l1_throughput_pct": "L1/TEX throughput %",
    "shared_throughput_pct": "shared memory throughput %",
    "memory_throughput_pct": "memory throughput %",
    "sm_throughput_pct": "SM throughput %",
    "achieved_occupancy_pct": "achieved occupancy %",
    "theoretical_occupancy_pct": "theoretical occupancy %",
    "registers_per_thread": "registers per thread",
    "waves_per_sm": "waves per SM",
    "global_load_bytes_per_sector": "bytes used per 32-byte load sector",
    "global_load_sectors_per_request": "sectors per load request",
    "l1_hit_rate_pct": "L1 hit rate %",
    "l2_hit_rate_pct": "L2 hit rate %",
    "mem_pct": "busiest memory unit %",
    "compute_pct": "busiest pipe %",
    "time_share": "share of GPU time",
    "chain_time_ns": "chain time (ns)",
    "dram_bytes_moved": "DRAM bytes moved",
    "intermediate_bytes": "intermediate bytes",
    "fused_bandwidth_bytes_per_s": "bandwidth a fused kernel would reach (B/s)",
}


def _scaled(value: float, units: list[tuple[float, str]], digits: int = 3) -> str:
    """`value` in the first unit whose scale it reaches (the last unit has scale 1)."""
    for scale, unit in units[:-1]:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {unit}"
    return f"{value:.{digits}g} {units[-1][1]}"


def time_ns(value: Any) -> str:
    """Nanoseconds in words, three significant digits: `512 ns`, `4.30 µs`, `336 ms`, `1.25 s`."""
    v = number(value)
    return MISSING if v is None else quantities.duration(v)


duration = time_ns


def count(value: Any) -> str:
    """A count with thousands separators (`5,475`)."""
    v = number(value)
    return MISSING if v is None else quantities.count(v)


def plural(n: float, noun: str, nouns: str | None = None) -> str:
    """`1 kernel signature`, `7 kernel signatures`."""
    return quantities.plural(n, noun, nouns)


def pct(value: Any, digits: int = 1) -> str:
    """A value already in percent (0-100)."""
    v = number(value)
    return MISSING if v is None else f"{v:.{digits}f}%"


def share(value: Any, digits: int = 1) -> str:
    """A fraction (0-1) printed as percent; tiny shares do not print as 0.0%."""
    v = number(value)
    if v is None:
        return MISSING
    if 0 < v * 100 < 10**-digits:
        return f"<{10**-digits:g}%"
    return f"{v * 100:.{digits}f}%"


def bytes_(value: Any) -> str:
    """Bytes in words: `96 B`, `7.00 kB`, `1.85 TB` (never `0.0 MB`)."""
    v = number(value)
    return MISSING if v is None else quantities.size(v)


size = bytes_


def rate(value: Any, unit: str) -> str:
    """FLOP/s, B/s: `rate(4.1e12, "B/s")` -> `4.1 TB/s`."""
    v = number(value)
    return MISSING if v is None else quantities.rate(v, unit)


def num(value: Any, digits: int = 3) -> str:
    v = number(value)
    if v is None:
        return MISSING if not isinstance(value, str) else value
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    if abs(v) >= 1e6 or (v != 0 and abs(v) < 1e-3):
        return f"{v:.{digits}e}"
    return f"{v:.{digits}g}"


def quantity(value: Any) -> str:
    """A count or plain number: thousands separators from 1,000 on, an SI prefix from a
    million (`1.23 M`), three digits below 1,000: no e-notation down to 0.001."""
    v = number(value)
    if v is None:
        return MISSING if not isinstance(value, str) else value
    if abs(v) >= 1e6:
        return _scaled(v, [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1.0, "")]).rstrip()
    if v.is_integer() or abs(v) >= 1e3:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def metric_value(name: str, value: Any) -> str:
    """A metric or evidence value in its unit (model/evidence_labels.py's table, else what the
    name's suffix says): `18.8%`, `4.30 µs`, `134 kB`, `4.09 TB/s`, `5,475`, `yes`."""
    v = number(value)
    if v is None:
        return MISSING if not isinstance(value, str) else value
    unit = evidence_labels.unit(name)
    if unit == "pct":
        return pct(v)
    if unit == "share":
        return share(v)
    if unit == "ns":
        return time_ns(v)
    if unit == "bytes":
        return bytes_(v)
    if unit in ("B/s", "FLOP/s"):
        return rate(v, unit)
    if unit in ("TB/s", "GB/s"):
        return rate(v * (1e12 if unit == "TB/s" else 1e9), "B/s")
    if unit == "count":
        return quantities.count(v)
    if unit == "flag":
        return "yes" if v >= 1 else "no"
    return quantity(v)


def evidence_value(name: str, value: Any) -> str:
    """A metric value for a terminal or a page: its unit where the name says it, and plain
    numbers that never print in e-notation."""
    return metric_value(name, value)


def metric_label(name: str) -> str:
    """A metric's label in words (the renderers' own labels first, then the evidence table)."""
    return METRIC_LABELS.get(name) or evidence_labels.label(name)


def evidence_item(metric: str, value: Any, op: str = "", threshold: Any = None) -> str:
    """One evidence item in words: `theoretical occupancy 18.8% (threshold < 50.0%)`; a yes/no
    value without its threshold (`a matrix product or convolution (from its name): no`)."""
    shown = metric_value(metric, value)
    words = evidence_labels.label(metric)
    if evidence_labels.unit(metric) == "flag":
        return f"{words}: {shown}"
    if not op or number(threshold) is None:
        return f"{words} {shown}"
    return f"{words} {shown} (threshold {op} {metric_value(metric, threshold)})"


def plotly_text(text: Any) -> str:
    """Escape a program-supplied string for plotly, which renders hover and tick text as HTML."""
    return html.escape(str(text), quote=False)


NO_ESTIMATE = "no estimate"


def saved_time(finding: Finding, diagnosis: Diagnosis) -> str:
    """The time a finding's fix would save in the analysed region: per iteration where the
    region is made of iterations, else in all of it."""
    return ns_saved(finding.saved_ns, diagnosis)


def saving(finding: Finding, diagnosis: Diagnosis) -> str:
    """The saving and its share of the region's wall time: "1.2 ms/iteration (17%)"."""
    if finding.saved_ns is None:
        return NO_ESTIMATE
    return f"{saved_time(finding, diagnosis)} ({share(finding.impact)})"


def saves(finding: Finding, diagnosis: Diagnosis) -> str:
    """ "saves 1.2 ms/iteration (17%)", or "no estimate"."""
    return NO_ESTIMATE if finding.saved_ns is None else f"saves {saving(finding, diagnosis)}"


def ns_saved(saved_ns: float | None, diagnosis: Diagnosis) -> str:
    """A saving in the region's currency: per iteration where there are iterations."""
    if saved_ns is None:
        return NO_ESTIMATE
    n = diagnosis.iterations
    return f"{time_ns(saved_ns / n)}/iteration" if n else time_ns(saved_ns)


def change_saving(change: Change, diagnosis: Diagnosis) -> str:
    """A change's marginal saving and its share: "40 ms/iteration (24%)"."""
    if change.saved_ns is None:
        return NO_ESTIMATE
    return f"{ns_saved(change.saved_ns, diagnosis)} ({share(change.share)})"


# What a kernel's name says it does (Touch.kernel_kind), as a noun before "kernels".
_KERNEL_NOUNS = {
    "gemm": "GEMM",
    "conv": "convolution",
    "conv-fprop": "convolution",
    "conv-dgrad": "convolution",
    "conv-wgrad": "convolution",
    "attention": "attention",
    "elementwise": "elementwise",
    "reduction": "reduction",
    "layout-conversion": "layout conversion",
}


def touches(change: Change, names: dict[str, str], counted: bool = False) -> str:
    """What a change touches in a few words: "5 GEMM kernels", one kernel's short name, "2
    kernels (9 shapes)" (signatures of one name with other grids), "NVTX range batch", "the
    program", "the program and 3 kernels" (each counted: the list after it has one item each);
    `counted`: one kernel as "1 kernel" where a list of what it touches follows."""
    kernels = change.kernels
    ranges = [t.name for t in change.touches if t.kind == "range"]
    parts = []
    distinct = list(dict.fromkeys(t.name for t in kernels))
    shapes = f" ({len(kernels)} shapes)" if len(kernels) > len(distinct) else ""
    if len(distinct) == 1 and not (counted and len(change.touches) > 1):
        parts.append(names.get(distinct[0], distinct[0]) + shapes)
    elif len(distinct) == 1:  # `counted`: a list of them follows, by number
        parts.append(f"1 kernel{shapes}")
    elif kernels:
        nouns = {_KERNEL_NOUNS.get(t.kernel_kind or "") for t in kernels}
        noun = nouns.pop() if len(nouns) == 1 else None
        parts.append(f"{len(distinct)} {noun + ' ' if noun else ''}kernels{shapes}")
    if len(ranges) == 1:
        parts.append(f"NVTX range {ranges[0]}")
    elif ranges:
        parts.append(f"{len(ranges)} NVTX ranges")
    program = any(t.kind == "program" for t in change.touches)
    if program and parts:  # "the program and 3 kernels": what follows lists each of them
        parts.insert(0, "the program")
        return ", ".join(parts[:-1]) + " and " + parts[-1]
    return " and ".join(parts) if len(parts) == 2 else ", ".join(parts) or "the program"


def repeated_names(change: Change) -> bool:
    """Whether a change touches several signatures of one name (numbered to tell them apart)."""
    kernels = [t.name for t in change.kernels]
    return len(kernels) != len(set(kernels))


def touch_name(touch: Touch, names: dict[str, str], numbered: bool = False) -> str:
    """One touched kernel (its short name; `numbered`: with its number in the kernel table),
    NVTX range, or the program."""
    if touch.kind == "kernel":
        name = names.get(touch.name, touch.name)
        return (
            f"{name} #{touch.kernel_id + 1}" if numbered and touch.kernel_id is not None else name
        )
    return f"NVTX range {touch.name}" if touch.kind == "range" else "the program"


def denominator(diagnosis: Diagnosis) -> str:
    """What a finding's share is a share of."""
    if diagnosis.region is None:
        return "of the profiled GPU time"
    return "of each iteration" if diagnosis.iterations else "of the analysed region"


@dataclass(frozen=True)
class Location:
    """Where a finding is: a kernel, an NVTX range, or the program (one rule for every
    renderer)."""

    kind: str  # "kernel", "NVTX range" or ""
    short: str
    full: str


def location(kernel: KernelDiagnosis | None, finding: Finding, names: dict[str, str]) -> Location:
    """A kernel finding's kernel; a program finding's NVTX range, else the kernel it points at,
    else the program."""
    if kernel is not None:
        return Location("", names.get(kernel.name, kernel.name), kernel.demangled or kernel.name)
    if finding.range:
        return Location("NVTX range", finding.range, finding.range)
    if finding.kernel:
        return Location("kernel", names.get(finding.kernel, finding.kernel), finding.kernel)
    return Location("", "the program", "")


def region_line(diagnosis: Diagnosis) -> str | None:
    """Which part of the timeline was analysed, how it was chosen, and its wall time."""
    region = diagnosis.region
    if region is None:
        return None
    left_out = diagnosis.kernels_outside_region
    outside = (
        f"; {plural(left_out, 'profiled kernel signature')} ran only outside it and "
        f"{'is' if left_out == 1 else 'are'} left out"
        if left_out
        else ""
    )
    return f"analysed: {region.description}, {time_ns(region.wall_ns)} of wall time{outside}"


def display_names(diagnosis: Diagnosis) -> dict[str, str]:
    """Signature name -> short display name (shortened from the demangled name where there is
    one)."""
    full = {k.name: k.demangled or k.name for k in diagnosis.kernels}
    for f in diagnosis.program_findings:
        for name in (f.kernel, *f.chain):
            if name:
                full.setdefault(name, name)
    for c in diagnosis.changes:
        for t in c.kernels:
            full.setdefault(t.name, t.name)
    shorts = short_names(full.values())
    return {name: shorts[text] for name, text in full.items()}


# Control characters (C0, DEL, C1: ESC starts a terminal's control sequences) and the Unicode
# marks that reorder or hide text, in program-supplied strings (kernel names, NVTX ranges).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: Any) -> str:
    """Text safe to print on a terminal: each control character shown as `\\xNN` (`\\uNNNN`),
    so a kernel name cannot move the cursor, retitle the window or change colours."""

    def shown(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNPRINTABLE.sub(shown, str(text))


# The units a verdict's limiter names, in words (others: the stall reason, spaced).
_LIMITERS = {
    "dram": "DRAM",
    "l2": "L2",
    "l1": "L1",
    "shared": "shared memory",
    "tensor": "tensor cores",
    "fma": "the FMA pipe",
    "fp64": "the FP64 pipe",
    "xu": "the XU pipe",
    "alu": "the ALU pipe",
    "lsu": "the LSU pipe",
}


def bound_text(kernel: KernelDiagnosis, short: bool = False) -> str:
    """`memory-bound on DRAM`, `latency-bound (long scoreboard)`, `launch-bound`; `short`
    (under a "bound" heading): `memory: DRAM`, `latency: long scoreboard`."""
    if not kernel.bound or kernel.bound == "unknown":
        return MISSING
    limiter = kernel.limiter
    bound = kernel.bound if short else f"{kernel.bound}-bound"
    if not limiter or limiter == kernel.bound:
        return bound
    if limiter in _LIMITERS and kernel.bound in ("memory", "compute"):
        unit = _LIMITERS[limiter]
        return f"{bound}: {unit.removeprefix('the ')}" if short else f"{bound} on {unit}"
    reason = limiter.replace("_", " ")
    return f"{bound}: {reason}" if short else f"{bound} ({reason})"


def code(change: Change, verbose: bool = False) -> str | None:
    """Whose code a change is about (its CodeAttribution): the Python functions holding its work,
    with their launches and host time, else the operators its kernel names imply; with `verbose`
    also what a profile with the PyTorch ranges would add. None: nothing to say."""
    attribution = change.code
    if attribution is None:
        return None
    per = " per iteration" if attribution.per_iteration else ""
    parts = []
    for site in attribution.sites:
        words = []
        if site.launches:
            words.append(f"{site.launches:,.0f} of {attribution.total_launches:,.0f} launches{per}")
        if site.host_ns:
            words.append(f"{time_ns(site.host_ns)} of host time")
        where = f"{site.function} ({site.inner})" if site.inner else site.function
        parts.append(f"{where}: {', '.join(words)}" if words else where)
    if parts:
        return "; ".join(parts)
    if attribution.operators:
        return ", ".join(attribution.operators) + " (from the kernel names)"
    return (attribution.note or None) if verbose else None
