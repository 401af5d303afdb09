"""Cross-kernel analyses on ncu data: fusion candidates and layout conversions."""

from __future__ import annotations

import math
import re
from collections import defaultdict

import pandas as pd

from nsdiag.analysis import verdict
from nsdiag.analysis.diagnosis import Evidence, Finding, KernelDiagnosis
from nsdiag.analysis.rulespec import RuleSpec
from nsdiag.model.names import short_name, short_names
from nsdiag.model.session import Session

_COPY_NAME = re.compile(r"copy", re.IGNORECASE)
_LAYOUT_NAME = re.compile(
    r"nchw.?to.?nhwc|nhwc.?to.?nchw|transpose|permute|layout|convert_?(?:format|layout)|channels_?last",
    re.IGNORECASE,
)


_STEP_COLUMNS = (
    "id",
    "name",
    "grid",
    "block",
    "duration_ns",
    "dram_read_bytes",
    "dram_write_bytes",
    "dram_bytes_per_second",
    "dram_throughput_pct",
    "pipe_tensor_pct",
    "memory_throughput_pct",
    "sm_throughput_pct",
    "grid_size",
    "sm_count",
    "top_stall",
    "nvtx_range",
    *verdict.MEMORY_UNITS.values(),
    *verdict.COMPUTE_UNITS.values(),
)


def _num(values: dict, column: str) -> float:
    value = values.get(column)
    return float(value) if value is not None and not pd.isna(value) else 0.0


def _steps(records: list[dict]) -> list[dict]:
    """Collapse consecutive launches of one signature into a step: a library often splits one
    operation into several launches (cuBLAS ran the K=3 GEMM as 16 chunks), and together they
    read what the previous operation wrote."""
    steps: list[dict] = []
    for values in records:
        key = (values.get("name"), values.get("grid"), values.get("block"))
        if steps and steps[-1]["key"] == key:
            step = steps[-1]
        else:
            step = {
                "key": key,
                "name": str(values.get("name")),
                "rows": [],
                "duration_ns": 0.0,
                "read": 0.0,
                "write": 0.0,
                "best_bw": 0.0,
                "bounds": set(),
                "dram_pcts": [],
                "tensor": 0.0,
            }
            steps.append(step)
        step["rows"].append(values)
        step["duration_ns"] += _num(values, "duration_ns")
        step["read"] += _num(values, "dram_read_bytes")
        step["write"] += _num(values, "dram_write_bytes")
        step["best_bw"] = max(step["best_bw"], _num(values, "dram_bytes_per_second"))
        step["bounds"].add(verdict.classify(values).bound)
        step["dram_pcts"].append(_num(values, "dram_throughput_pct"))
        step["tensor"] = max(step["tensor"], _num(values, "pipe_tensor_pct"))
    return steps


def _chains(derived: pd.DataFrame, params: dict[str, float]) -> list[list[dict]]:
    """Runs of consecutive steps (same process, stream and NVTX range) that are not
    compute-bound, where each step reads back from DRAM about what the previous one wrote:
    the intermediate made a round trip through DRAM. Chains whose every kernel already streams
    at the DRAM roof are left out: ncu does not record which buffers a kernel touched, and
    independent, already-optimised kernels of equal size match on bytes alone."""
    min_bytes = params.get("min_intermediate_bytes", 1e6)
    min_overlap = params.get("min_read_fraction", 0.5)
    at_roof = params.get("at_roof_dram_pct", 75.0)
    order = derived.sort_values("id")
    keys = [c for c in ("process_id", "stream", "nvtx_range") if c in order]
    chains: list[list[dict]] = []
    order = order[list(dict.fromkeys(c for c in (*_STEP_COLUMNS, *keys) if c in order))]
    for _, group in order.groupby(keys, sort=False, dropna=False) if keys else [(None, order)]:
        current: list[dict] = []
        for step in _steps(group.to_dict("records")):
            # Memory-shaped operations only: compute-bound, launch-bound and tensor-core
            # kernels (convolutions, real GEMMs) are not what this rule can fuse away.
            member = not step["bounds"] & {"compute", "launch"} and step["tensor"] < 5
            if (
                current
                and member
                and current[-1]["write"] >= min_bytes
                and step["read"] >= min_overlap * current[-1]["write"]
            ):
                current.append(step)
                continue
            if len(current) >= 2:
                chains.append(current)
            current = [step] if member else []
        if len(current) >= 2:
            chains.append(current)
    return [c for c in chains if min(min(s["dram_pcts"]) for s in c) < at_roof]


def fusion_candidates(
    rule: RuleSpec,
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    total_ns: float,
) -> list[Finding]:
    ceiling = next(
        (
            k.roofline.get("measured_dram_ceiling_bytes_per_s")
            for k in kernels
            if k.roofline.get("measured_dram_ceiling_bytes_per_s")
        ),
        None,
    )
    grouped: dict[tuple[str, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    ranges: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for chain in _chains(derived, rule.params):
        names = tuple(step["name"] for step in chain)
        ranges[names].update(str(r.get("nvtx_range") or "") for step in chain for r in step["rows"])
        time_ns = sum(step["duration_ns"] for step in chain)
        moved = sum(step["read"] + step["write"] for step in chain)
        intermediate = sum(min(a["write"], b["read"]) for a, b in zip(chain, chain[1:]))
        remaining = max(moved - 2 * intermediate, 0.0)
        best_bw = max(step["best_bw"] for step in chain)
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
        labels = short_names(names)
        chain_text = " -> ".join(labels[n] for n in names)
        evidence = (
            Evidence("chain_time_ns", g["time_ns"]),
            Evidence("dram_bytes_moved", g["moved"]),
            Evidence(
                "intermediate_bytes",
                g["intermediate"],
                ">=",
                rule.params.get("min_intermediate_bytes", 1e6),
            ),
            Evidence("fused_bandwidth_bytes_per_s", g["stream_bw"]),
        )
        findings.append(
            Finding(
                rule=rule.id,
                cause=rule.cause,
                title=rule.title,
                impact=impact,
                recoverable=g["saved_ns"] / g["time_ns"] if g["time_ns"] else 0.0,
                message=(
                    f"{len(names)} operations in a row ({chain_text}) pass "
                    f"{g['intermediate'] / 1e6:.0f} MB of intermediates through DRAM (written, then read back): "
                    f"{g['moved'] / 1e6:.0f} MB moved where a fused kernel would move "
                    f"{max(g['moved'] - 2 * g['intermediate'], 0) / 1e6:.0f} MB."
                ),
                fix=rule.fix,
                impact_basis=rule.impact_basis,
                evidence=evidence,
                kernel=names[0],
                range=", ".join(sorted(r for r in ranges[names] if r)) or None,
                saved_ns=g["saved_ns"],
                details={"chain": list(names), "occurrences": int(g["occurrences"])},
            )
        )
    return findings


def _is_layout_kernel(k: KernelDiagnosis) -> bool:
    """Named as a layout conversion, or a copy whose accesses are strided: a plain copy is
    coalesced on both sides, a transposing one (NCHW <-> NHWC) cannot be on both."""
    if _LAYOUT_NAME.search(k.demangled) or _LAYOUT_NAME.search(k.name):
        return True
    if not _COPY_NAME.search(k.name):
        return False
    per_sector = [
        k.metrics.get(m) for m in ("global_load_bytes_per_sector", "global_store_bytes_per_sector")
    ]
    return any(v is not None and not math.isnan(v) and 0 < v < 16 for v in per_sector)


def layout_conversions(
    rule: RuleSpec,
    session: Session,
    derived: pd.DataFrame,
    kernels: list[KernelDiagnosis],
    total_ns: float,
) -> list[Finding]:
    matches = [k for k in kernels if _is_layout_kernel(k)]
    if not matches or not total_ns:
        return []
    time_ns = sum(k.duration_ns for k in matches)
    share = time_ns / total_ns
    if share < rule.params.get("min_share", 0.01):
        return []
    moved = sum(
        (k.metrics.get("dram_bytes") or 0.0) * k.launches
        for k in matches
        if not math.isnan(k.metrics.get("dram_bytes", math.nan))
    )
    names = ", ".join(
        f"{short_name(k.name)} ({k.launches}x, {k.duration_ns / 1e3:.0f} us)" for k in matches[:5]
    )
    return [
        Finding(
            rule=rule.id,
            cause=rule.cause,
            title=rule.title,
            impact=share,
            recoverable=1.0,
            message=(
                f"{share * 100:.1f}% of GPU time ({time_ns / 1e3:.0f} us) is spent converting tensor layouts: "
                f"{names}; they move {moved / 1e6:.0f} MB and compute nothing."
            ),
            fix=rule.fix,
            impact_basis=rule.impact_basis,
            evidence=(
                Evidence("layout_time_share", share, ">=", rule.params.get("min_share", 0.01)),
                Evidence("layout_time_ns", time_ns),
                Evidence("layout_dram_bytes", moved),
            ),
            kernel=matches[0].name,
            saved_ns=time_ns,
            details={"kernels": [k.name for k in matches]},
        )
    ]
