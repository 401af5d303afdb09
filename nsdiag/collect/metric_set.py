"""The ncu metrics the rules, the verdict and the roofline read, requested by name.

Why by name and not by ncu's sections: on the H200 (ncu 2025.3.1, tools/probes/probe_sections.sh)
the twelve sections holding these metrics cost 35 replay passes and about 1.9 s per profiled
launch; the same metrics by name, with the three sections that carry the launch and occupancy
figures, cost 25 passes and about 0.5 s. (`--set full`: 38 passes, 2.2 s.) The sections add
per-instance tables and source-level data no rule reads.

Names are checked against the metrics the GPU's chip offers (`ncu --query-metrics`): the first
name of each catalogue entry that the chip knows is requested, so a metric renamed in another
ncu version or absent on another chip falls back or is left out instead of failing the run.
Pure: metric base names in, a list out.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from nsdiag.model.catalogue import CATALOGUE

# Sections kept by name: launch__* and occupancy figures come only with them, and they are cheap
# (SpeedOfLight also gives ncu's own bottleneck hint).
BASE_SECTIONS: tuple[str, ...] = ("SpeedOfLight", "LaunchStats", "Occupancy")
# Fewer rule metrics than this means the chip's listing was not understood (136 on the H200).
MIN_RULE_METRICS = 60
_FROM_SECTIONS = ("launch__", "device__")  # recorded with every result or by LaunchStats/Occupancy
_METRIC_NAME = re.compile(r"^[a-z0-9]+__[a-z0-9_]+$")


def base_name(metric: str) -> str:
    """'dram__bytes_read.sum.per_second' -> 'dram__bytes_read' (what --query-metrics lists)."""
    return metric.split(".", 1)[0]


def parse_query(text: str) -> set[str]:
    """Metric base names from `ncu --query-metrics` output (table or CSV, any column order)."""
    names: set[str] = set()
    for line in text.splitlines():
        for cell in re.split(r"[\s,\"]+", line):
            if _METRIC_NAME.match(cell):
                names.add(cell)
    return names


def requestable(metric: str) -> bool:
    """ncu names are base.rollup.submetric at most; longer chains (a peak per second, say) are
    not accepted by name, and one unknown name fails the whole run."""
    return metric.count(".") <= 2


def rule_metrics(known_bases: Collection[str]) -> list[str]:
    """For each catalogue metric, its first ncu name whose base the chip knows; for an entry
    that adds up a group of metrics, the first group the chip knows entirely (on the H200 one
    per-precision sum of tensor operations each, not the per-instruction paths); every known
    base a pattern entry matches (the dense tensor-core operation paths)."""
    known = set(known_bases)
    out: list[str] = []
    for spec in CATALOGUE.values():
        if spec.pattern:
            pattern = re.compile(spec.pattern)
            out += sorted(f"{b}.sum" for b in known if pattern.match(f"{b}.sum"))
            continue
        if spec.groups:
            out += next(
                (
                    list(group)
                    for group in spec.groups
                    if all(base_name(n) in known and requestable(n) for n in group)
                ),
                [],
            )
            continue
        for name in spec.ncu:
            if name.startswith(_FROM_SECTIONS):
                break
            if base_name(name) in known and requestable(name):
                out.append(name)
                break
    return list(dict.fromkeys(out))
