"""Cross-kernel analyses on ncu data: fusion candidates and layout conversions."""
from __future__ import annotations

import math
import re
from collections import defaultdict

import pandas as pd

from nsdiag.analysis import verdict
from nsdiag.analysis.diagnosis import Evidence, Finding, KernelDiagnosis
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.model.session import Session

_LAYOUT_NAME = re.compile(
    r"nchw.?to.?nhwc|nhwc.?to.?nchw|transpose|permute|layout|convert_?(?:format|layout)|channels_?last",
    re.IGNORECASE)


def _bytes(row: pd.Series, column: str) -> float:
    value = row.get(column)
    return float(value) if value is not None and not pd.isna(value) else 0.0


def _chains(derived: pd.DataFrame, params: dict[str, float]) -> list[list[pd.Series]]:
    """Runs of consecutive memory-bound launches (same process and stream) where each kernel
    reads back from DRAM about what the previous one wrote: the intermediate went off chip."""
    min_bytes = params.get("min_intermediate_bytes", 1e6)
    min_overlap = params.get("min_read_fraction", 0.5)
    order = derived.sort_values("id")
    chains: list[list[pd.Series]] = []
    keys = [c for c in ("process_id", "stream") if c in order]
    for _, group in order.groupby(keys, sort=False) if keys else [(None, order)]:
        current: list[pd.Series] = []
        for _, row in group.iterrows():
            is_memory = verdict.classify(row.to_dict()).bound == "memory"
            if current and is_memory:
                written = _bytes(current[-1], "dram_write_bytes")
                read = _bytes(row, "dram_read_bytes")
                if written >= min_bytes and read >= min_overlap * written:
                    current.append(row)
                    continue
            if len(current) >= 2:
                chains.append(current)
            current = [row] if is_memory else []
        if len(current) >= 2:
            chains.append(current)
    return chains


def fusion_candidates(rule: RuleSpec, session: Session, derived: pd.DataFrame,
                      kernels: list[KernelDiagnosis], total_ns: float) -> list[Finding]:
    ceiling = next((k.roofline.get("measured_dram_ceiling_bytes_per_s") for k in kernels
                    if k.roofline.get("measured_dram_ceiling_bytes_per_s")), None)
    grouped: dict[tuple[str, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for chain in _chains(derived, rule.params):
        names = tuple(str(r["name"]) for r in chain)
        time_ns = sum(_bytes(r, "duration_ns") for r in chain)
        moved = sum(_bytes(r, "dram_read_bytes") + _bytes(r, "dram_write_bytes") for r in chain)
        intermediate = sum(min(_bytes(a, "dram_write_bytes"), _bytes(b, "dram_read_bytes")) for a, b in zip(chain, chain[1:]))
        remaining = max(moved - 2 * intermediate, 0.0)
        best_bw = max(_bytes(r, "dram_bytes_per_second") for r in chain)
        stream_bw = max(best_bw, ceiling or 0.0)
        fused_ns = remaining / stream_bw * 1e9 if stream_bw > 0 else time_ns
        g = grouped[names]
        g["time_ns"] += time_ns
        g["moved"] += moved
        g["intermediate"] += intermediate
        g["saved_ns"] += max(time_ns - fused_ns, 0.0)
        g["occurrences"] += 1
        g["stream_bw"] = stream_bw
    findings = []
    for names, g in grouped.items():
        impact = g["saved_ns"] / total_ns if total_ns else 0.0
        if impact < rule.params.get("min_impact", 0.01):
            continue
        chain_text = " -> ".join(names)
        evidence = (
            Evidence("chain_time_ns", g["time_ns"]), Evidence("dram_bytes_moved", g["moved"]),
            Evidence("intermediate_bytes", g["intermediate"], ">=", rule.params.get("min_intermediate_bytes", 1e6)),
            Evidence("fused_bandwidth_bytes_per_s", g["stream_bw"]),
        )
        findings.append(Finding(
            rule=rule.id, cause=rule.cause, title=rule.title, impact=impact,
            recoverable=g["saved_ns"] / g["time_ns"] if g["time_ns"] else 0.0,
            message=(f"{len(names)} memory-bound kernels in a row ({chain_text}) pass "
                     f"{g['intermediate'] / 1e6:.0f} MB of intermediates through DRAM (written, then read back): "
                     f"{g['moved'] / 1e6:.0f} MB moved where a fused kernel would move "
                     f"{max(g['moved'] - 2 * g['intermediate'], 0) / 1e6:.0f} MB."),
            fix=rule.fix, impact_basis=rule.impact_basis, evidence=evidence, kernel=names[0],
            saved_ns=g["saved_ns"], details={"chain": list(names), "occurrences": int(g["occurrences"])},
        ))
    return findings


def layout_conversions(rule: RuleSpec, session: Session, derived: pd.DataFrame,
                       kernels: list[KernelDiagnosis], total_ns: float) -> list[Finding]:
    matches = [k for k in kernels if _LAYOUT_NAME.search(k.demangled) or _LAYOUT_NAME.search(k.name)]
    if not matches or not total_ns:
        return []
    time_ns = sum(k.duration_ns for k in matches)
    share = time_ns / total_ns
    if share < rule.params.get("min_share", 0.01):
        return []
    moved = sum((k.metrics.get("dram_bytes") or 0.0) * k.launches for k in matches if not math.isnan(k.metrics.get("dram_bytes", math.nan)))
    names = ", ".join(f"{k.name} ({k.launches}x, {k.duration_ns / 1e3:.0f} us)" for k in matches[:5])
    return [Finding(
        rule=rule.id, cause=rule.cause, title=rule.title, impact=share, recoverable=1.0,
        message=(f"{share * 100:.1f}% of GPU time ({time_ns / 1e3:.0f} us) is spent converting tensor layouts: "
                 f"{names}; they move {moved / 1e6:.0f} MB and compute nothing."),
        fix=rule.fix, impact_basis=rule.impact_basis,
        evidence=(Evidence("layout_time_share", share, ">=", rule.params.get("min_share", 0.01)),
                  Evidence("layout_time_ns", time_ns), Evidence("layout_dram_bytes", moved)),
        kernel=matches[0].name, saved_ns=time_ns, details={"kernels": [k.name for k in matches]},
    )]
