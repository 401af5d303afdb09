"""Kernel names a reader can tell apart: look-alikes (signatures that shorten to one name, such
as five `at::batch_norm_transform_input_kernel<…>` of different launch shapes) carry what
differs, their grid, block or a short hash of the full name."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable

from nsdiag.analysis.records.diagnosis import KernelDiagnosis


def dims(text: str) -> str:
    """A launch dimension `(64, 2, 1)` as `64x2` (trailing 1s left out)."""
    parts = [p.strip() for p in str(text).strip("()[] ").split(",") if p.strip()]
    while len(parts) > 1 and parts[-1] == "1":
        parts.pop()
    return "x".join(parts) or str(text)


def short_hash(text: str) -> str:
    """Four hex digits that tell two full names apart when nothing shorter does."""
    return hashlib.blake2s(text.encode(), digest_size=2).hexdigest()


def labels(kernels: Iterable[KernelDiagnosis], names: dict[str, str]) -> dict[int, str]:
    """Kernel id -> a display name that no other listed kernel shares: the short name, and
    for look-alikes (one short name, several signatures) what tells them apart (`tellers`)."""
    listed = list(kernels)
    told = tellers(listed, names)
    return {
        k.id: f"{names.get(k.name, k.name)} {told[k.id]}"
        if k.id in told
        else names.get(k.name, k.name)
        for k in listed
    }


def tellers(kernels: Iterable[KernelDiagnosis], names: dict[str, str]) -> dict[int, str]:
    """Kernel id -> what tells a look-alike (a kernel whose short name another listed kernel
    has) apart: `grid 64`, else `block 256x2`, else both, else a short hash of its full name."""
    groups: dict[str, list[KernelDiagnosis]] = defaultdict(list)
    for k in kernels:
        groups[names.get(k.name, k.name)].append(k)
    return {k.id: _telling(k, group) for group in groups.values() if len(group) > 1 for k in group}


def _telling(kernel: KernelDiagnosis, group: list[KernelDiagnosis]) -> str:
    """What tells `kernel` apart from the others of its group: the first of its grid, block,
    both, a hash of its full name, the grid and the hash, that no other member shares."""

    def parts(k: KernelDiagnosis) -> dict[str, str]:
        return {
            "grid": f"grid {dims(k.grid)}",
            "block": f"block {dims(k.block)}",
            "hash": f"~{short_hash(k.demangled or k.name)}",
        }

    mine, others = parts(kernel), [parts(k) for k in group if k is not kernel]
    for keys in (("grid",), ("block",), ("grid", "block"), ("hash",), ("grid", "hash")):
        if all(any(o[key] != mine[key] for key in keys) for o in others):
            return " ".join(mine[key] for key in keys)
    return " ".join(mine.values())
