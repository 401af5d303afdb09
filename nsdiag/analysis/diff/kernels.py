"""Kernels of BEFORE matched to kernels of AFTER, and how each match was made.

In this order, each step working on what the steps before left unmatched:
1. `signature`: the same kernel (name as nsys and ncu both spell it), grid and block;
2. `name`: the same kernel with another grid or block (another problem size), paired in the
   order they run within the iteration;
3. `role`: a library picked another kernel for the same job (cuBLAS choosing another GEMM kernel
   once a dimension is a multiple of 8, cuDNN another convolution). The two typical iterations'
   launch sequences are aligned (difflib) with the matches so far as anchors; where a stretch of
   BEFORE was replaced by a stretch of AFTER, matrix products (GEMMs, convolutions) pair with
   matrix products and attention with attention, in the order they run;
4. `fused`, `split`, `replaced`, `regrouped`: aligned again with the role matches as anchors,
   the kernels left in stretches that replace one another are grouped (several BEFORE kernels
   -> one AFTER kernel is a fusion; one -> several a split; one -> one another kernel at the same
   place; several -> several a regrouping, torch.compile's per-layer fused kernels);
5. `gone` and `new`: what is left runs on one side only.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from nsdiag.analysis.diff.side import KernelTimes, Side

# How a match was made, in a few words (KernelMatch.how() says it in a sentence).
LABELS = {
    "signature": "same kernel",
    "name": "same kernel, other shape",
    "role": "same library role",
    "fused": "replaced by a fused kernel",
    "split": "split",
    "replaced": "replaced",
    "regrouped": "regrouped",
    "gone": "gone",
    "new": "new",
}
METHODS = tuple(LABELS)


@dataclass(frozen=True)
class KernelMatch:
    id: int
    method: str  # one of METHODS
    before: tuple[KernelTimes, ...]
    after: tuple[KernelTimes, ...]
    role: str | None = None  # for `role` matches: the job both kernels do

    @property
    def before_ns(self) -> float:
        return sum(k.time_ns for k in self.before)

    @property
    def after_ns(self) -> float:
        return sum(k.time_ns for k in self.after)

    @property
    def change_ns(self) -> float:
        return self.after_ns - self.before_ns

    @property
    def same_kernel(self) -> bool:
        return self.method in ("signature", "name")

    def samples(self, side: str) -> tuple[float, ...]:
        """The group's time in each iteration of one side (its kernels' sum)."""
        kernels = self.before if side == "before" else self.after
        if not kernels:
            return ()
        return tuple(float(x) for x in np.sum([k.samples for k in kernels], axis=0))

    def how(self) -> str:
        """One line: how the match was made."""
        nb, na = len(self.before), len(self.after)
        return {
            "signature": "same kernel, grid and block",
            "name": "same kernel, other grid or block",
            "role": f"same library role ({self.role}): the library picked another kernel for the "
            "same place in the launch sequence",
            "fused": f"replaced by a fused kernel: {nb} kernels at this place in the launch "
            "sequence became one",
            "split": f"one kernel became {na} at this place in the launch sequence",
            "replaced": "another kernel at the same place in the launch sequence",
            "regrouped": f"{nb} kernels became {na} other ones in the same stretches of the launch "
            "sequence (fused differently)",
            "gone": "runs in BEFORE only",
            "new": "runs in AFTER only",
        }[self.method]


class _Pairs:
    """1:1 matches made so far (before index -> after index, with method and role)."""

    def __init__(self) -> None:
        self.after_of: dict[int, int] = {}
        self.before_of: dict[int, int] = {}
        self.method: dict[int, tuple[str, str | None]] = {}

    def add(self, b: int, a: int, method: str, role: str | None = None) -> None:
        if b in self.after_of or a in self.before_of:
            return
        self.after_of[b], self.before_of[a] = a, b
        self.method[b] = (method, role)


def match_kernels(before: Side, after: Side) -> tuple[KernelMatch, ...]:
    pairs = _Pairs()
    _by_signature(before.kernels, after.kernels, pairs)
    _by_name(before.kernels, after.kernels, pairs)
    for b_block, a_block in _replaced_stretches(before, after, pairs):
        _by_role(before, after, b_block, a_block, pairs)
    groups = _groups(before, after, pairs)
    return _records(before, after, pairs, groups)


def _by_signature(bs: Sequence[KernelTimes], as_: Sequence[KernelTimes], pairs: _Pairs) -> None:
    """The same name, grid and block. A signature whose launches fall in duration groups (one
    GEMM kernel for several K) pairs its groups by their launches' duration (the work they do),
    then by where they run in the iteration."""
    left_a = _grouped(as_, lambda k: k.key[:3])
    for key, group in _grouped(bs, lambda k: k.key[:3]).items():
        _nearest(group, left_a.get(key, []), pairs, "signature", by_duration=True)


def _by_name(bs: Sequence[KernelTimes], as_: Sequence[KernelTimes], pairs: _Pairs) -> None:
    """The same kernel with another grid or block, paired by where they run in the iteration."""
    left_b = [k for k in bs if k.index not in pairs.after_of]
    left_a = _grouped((k for k in as_ if k.index not in pairs.before_of), lambda k: k.key[0])
    for name, group in _grouped(left_b, lambda k: k.key[0]).items():
        _nearest(group, left_a.get(name, []), pairs, "name")


def _grouped(
    kernels: Iterable[KernelTimes], key: Callable[[KernelTimes], object]
) -> dict[object, list[KernelTimes]]:
    out: dict[object, list[KernelTimes]] = {}
    for k in kernels:
        out.setdefault(key(k), []).append(k)
    return out


def _nearest(
    bs: list[KernelTimes],
    as_: list[KernelTimes],
    pairs: _Pairs,
    method: str,
    by_duration: bool = False,
) -> None:
    """Pairs the closest first: in mean launch duration (a factor) where asked, then in place
    in the iteration, then the most time."""
    candidates = sorted(
        (
            _duration_distance(b, a) if by_duration else 0.0,
            abs(_place(b) - _place(a)),
            -b.time_ns - a.time_ns,
            b.index,
            a.index,
        )
        for b in bs
        for a in as_
    )
    for *_, b, a in candidates:
        pairs.add(b, a, method)


def _duration_distance(b: KernelTimes, a: KernelTimes) -> float:
    mb = b.time_ns / max(b.launches_per_iteration, 1e-9)
    ma = a.time_ns / max(a.launches_per_iteration, 1e-9)
    return abs(float(np.log(mb / ma))) if mb > 0 and ma > 0 else 0.0


def _place(k: KernelTimes) -> float:
    return 2.0 if np.isnan(k.position) else k.position


def _tokens(side: Side, pair_of: dict[int, int], own: str) -> list[str]:
    """The typical iteration's launches as tokens: its match's id (the BEFORE kernel's index,
    shared by both sides) where the kernel is matched, else the kernel's own."""
    return [f"m{pair_of[i]}" if i in pair_of else f"{own}{i}" for i in side.sequence]


def _replaced_stretches(
    before: Side, after: Side, pairs: _Pairs
) -> list[tuple[list[int], list[int]]]:
    """Stretches of the two typical iterations that replace one another, once aligned on the
    matches so far: (BEFORE kernel indices, AFTER kernel indices), unmatched ones only."""
    tb = _tokens(before, {b: b for b in pairs.after_of}, "b")
    ta = _tokens(after, pairs.before_of, "a")
    matcher = difflib.SequenceMatcher(a=tb, b=ta, autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace":
            continue
        b_block = [before.sequence[i] for i in range(i1, i2) if tb[i].startswith("b")]
        a_block = [after.sequence[j] for j in range(j1, j2) if ta[j].startswith("a")]
        out.append((list(dict.fromkeys(b_block)), list(dict.fromkeys(a_block))))
    return out


def _by_role(
    before: Side, after: Side, b_block: list[int], a_block: list[int], pairs: _Pairs
) -> None:
    """Matrix products with matrix products, attention with attention, in launch order."""
    for role in {before.kernels[i].role for i in b_block} - {None}:
        bs = [i for i in b_block if before.kernels[i].role == role and i not in pairs.after_of]
        as_ = [j for j in a_block if after.kernels[j].role == role and j not in pairs.before_of]
        for b, a in zip(bs, as_, strict=False):
            pairs.add(b, a, "role", role)


def _groups(before: Side, after: Side, pairs: _Pairs) -> list[tuple[list[int], list[int]]]:
    """Unmatched kernels of stretches that replace one another, grouped (union-find over the
    stretches they share)."""
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for b_block, a_block in _replaced_stretches(before, after, pairs):
        members = [("b", i) for i in b_block] + [("a", j) for j in a_block]
        if not b_block or not a_block:
            continue
        for m in members[1:]:
            parent[find(m)] = find(members[0])
    components: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for node in list(parent):
        side, i = node
        entry = components.setdefault(find(node), ([], []))
        (entry[0] if side == "b" else entry[1]).append(i)
    return [(sorted(b), sorted(a)) for b, a in components.values() if b and a]


def _records(
    before: Side, after: Side, pairs: _Pairs, groups: list[tuple[list[int], list[int]]]
) -> tuple[KernelMatch, ...]:
    made: list[tuple[str, tuple[KernelTimes, ...], tuple[KernelTimes, ...], str | None]] = []
    for b, a in pairs.after_of.items():
        method, role = pairs.method[b]
        made.append((method, (before.kernels[b],), (after.kernels[a],), role))
    grouped_b: set[int] = set()
    grouped_a: set[int] = set()
    for b_list, a_list in groups:
        method = _group_method(len(b_list), len(a_list))
        made.append(
            (
                method,
                tuple(before.kernels[i] for i in b_list),
                tuple(after.kernels[j] for j in a_list),
                None,
            )
        )
        grouped_b.update(b_list)
        grouped_a.update(a_list)
    for k in before.kernels:
        if k.index not in pairs.after_of and k.index not in grouped_b:
            made.append(("gone", (k,), (), None))
    for k in after.kernels:
        if k.index not in pairs.before_of and k.index not in grouped_a:
            made.append(("new", (), (k,), None))
    made.sort(key=lambda m: -max(sum(k.time_ns for k in m[1]), sum(k.time_ns for k in m[2])))
    return tuple(KernelMatch(i, *m) for i, m in enumerate(made))


def _group_method(n_before: int, n_after: int) -> str:
    if n_after == 1:
        return "fused" if n_before > 1 else "replaced"
    return "split" if n_before == 1 else "regrouped"
