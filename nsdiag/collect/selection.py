"""Which kernel signatures phase 2 profiles: the most expensive, until `coverage` of the kernel
time is reached, counting the other shapes ncu profiles along with each. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

from nsdiag.model.launches import Signature


def _firsts_of_shape(sigs: Sequence[Signature]) -> dict[tuple[str, str, str], Signature]:
    """For each (filter name, grid, block): the signature whose launch comes first, the one a
    per-launch-config count of 1 reaches (the only one, when filter names are mangled)."""
    out: dict[tuple[str, str, str], Signature] = {}
    for s in sorted(sigs, key=lambda s: s.first):
        out.setdefault((s.filter_name, s.grid, s.block), s)
    return out


def choose(
    sigs: Sequence[Signature], coverage: float, max_kernels: int, kernel_regex: str | None
) -> list[Signature]:
    """The most expensive signatures until `coverage` of the (matching) kernel time is reached.

    Choosing a signature makes ncu profile the other shapes of its kernel name too (one launch
    each): their time counts toward coverage and their launches toward `max_kernels`, the cap on
    profiled signatures."""
    if kernel_regex:
        pattern = re.compile(kernel_regex)
        sigs = [s for s in sigs if pattern.search(s.name) or pattern.search(s.function)]
    goal = coverage * sum(s.total_ns for s in sigs)
    firsts = set(_firsts_of_shape(sigs).values())
    by_name: dict[str, list[Signature]] = {}
    for s in sigs:
        if s in firsts:
            by_name.setdefault(s.filter_name, []).append(s)
    chosen: list[Signature] = []
    reached: set[Signature] = set()  # chosen, or profiled along with a chosen signature
    covered = 0.0
    for s in sigs:
        if covered >= goal and chosen:
            break
        if s in reached:
            continue
        riders = [r for r in by_name.get(s.filter_name, []) if r not in reached and r is not s]
        if chosen and len(reached) + 1 + len(riders) > max_kernels:
            continue  # too many shapes come with it; a cheaper one may still fit
        if not chosen and len(riders) + 1 > max_kernels:
            riders = []  # the most expensive signature is always planned
        chosen.append(s)
        for r in (s, *riders):
            reached.add(r)
            covered += r.total_ns
    return chosen
