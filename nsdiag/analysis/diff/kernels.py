"""Kernels of BEFORE matched to kernels of AFTER, and how each match was made.

In this order, each step working on what the steps before left unmatched:
1. `signature`: the same kernel (name as nsys and ncu both spell it), grid and block;
2. `name`: the same kernel with another grid or block (another problem size), paired in the
   order they run within the iteration;
3. `role`: a library picked another kernel for the same job (cuBLAS choosing another GEMM kernel
   once a dimension is a multiple of 8 or the precision changes, cuDNN another convolution). The
   two typical iterations' launch sequences, rotated to start at one matched kernel (a loop's
   iterations may begin at another step), are aligned (difflib) with the matches so far as
   anchors; where a stretch of BEFORE was replaced by a stretch of AFTER, the n-th matrix
   product (GEMM, convolution) launched pairs with the n-th, attention with attention. Kernels
   whose launches pair with one kernel only are a 1:1 match; the others group (fp32 -> bf16 of
   a ViT step: three fp32 GEMM kernels, one per shape, against one bf16 kernel for all three);
4. `fused`, `split`, `replaced`, `regrouped`: aligned again with the role matches as anchors,
   the kernels left in stretches that replace one another are grouped (several BEFORE kernels
   -> one AFTER kernel is a fusion; one -> several a split; one -> one another kernel at the same
   place; several -> several a regrouping, torch.compile's per-layer fused kernels);
5. `gone` and `new`: what is left runs on one side only.
"""

from __future__ import annotations

import difflib
from collections import Counter
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

    def launches(self, side: str) -> float:
        """Launches per iteration (in the region) of the side's kernels together."""
        kernels = self.before if side == "before" else self.after
        return sum(k.launches_per_iteration for k in kernels)

    def per_launch_ns(self, side: str) -> float | None:
        """Time per launch: where a change alters the launch count (3 -> 4 chunks), the time
        per iteration and per launch can move in opposite directions."""
        n = self.launches(side)
        return (self.before_ns if side == "before" else self.after_ns) / n if n > 0 else None

    @property
    def per_launch_change_pct(self) -> float | None:
        b, a = self.per_launch_ns("before"), self.per_launch_ns("after")
        return (a - b) / b * 100 if a is not None and b else None

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
            "same place in the launch sequence"
            + (
                f" ({nb} kernel(s) of BEFORE and {na} of AFTER do these jobs, paired launch by "
                "launch: another precision or shape picks kernels that cover other sets of "
                "matrix products)"
                if nb > 1 or na > 1
                else ""
            ),
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
    sequences = _aligned_sequences(before, after, pairs)
    roles = _by_role(before, after, _replaced_stretches(sequences, pairs, []), pairs)
    groups = _groups(sequences, pairs, roles)
    return _records(before, after, pairs, roles, groups)


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


Group = tuple[list[int], list[int]]  # BEFORE kernel indices, AFTER kernel indices
Sequences = tuple[tuple[int, ...], tuple[int, ...]]


def _rotated(sequence: tuple[int, ...], at: int) -> tuple[int, ...]:
    return sequence[at:] + sequence[:at]


def _aligned_sequences(before: Side, after: Side, pairs: _Pairs) -> Sequences:
    """The two typical iterations, each rotated to start at the same matched kernel where both
    sides have iterations: a steady-state loop is a cycle, and where its iterations begin is
    the region finder's choice (ViT fp32's starts with the forward pass, its bf16 twin's with
    the optimizer step), which would leave the alignment one short stretch in common. The
    anchor is the matched kernel launched fewest times, as often on both sides."""
    b_seq, a_seq = before.sequence, after.sequence
    if not (before.iterations and after.iterations):
        return b_seq, a_seq
    b_count = Counter(i for i in b_seq if i in pairs.after_of)
    a_count = Counter(pairs.before_of[j] for j in a_seq if j in pairs.before_of)
    common = [b for b, n in b_count.items() if a_count.get(b) == n]
    if not common:
        return b_seq, a_seq
    anchor = min(common, key=lambda b: (b_count[b], b_seq.index(b)))
    return _rotated(b_seq, b_seq.index(anchor)), _rotated(
        a_seq, a_seq.index(pairs.after_of[anchor])
    )


def _tokens(sequence: tuple[int, ...], anchor: dict[int, str], own: str) -> list[str]:
    """The typical iteration's launches as tokens: its match's token (shared by both sides)
    where the kernel is matched, else the kernel's own."""
    return [anchor.get(i, f"{own}{i}") for i in sequence]


def _anchors(pairs: _Pairs, roles: list[Group]) -> tuple[dict[int, str], dict[int, str]]:
    """Each matched kernel's token, BEFORE's and AFTER's: `m<BEFORE index>` for 1:1 matches,
    `r<group>` for the kernels of a role group."""
    b = {i: f"m{i}" for i in pairs.after_of}
    a = {j: f"m{i}" for j, i in pairs.before_of.items()}
    for g, (bs, as_) in enumerate(roles):
        b.update((i, f"r{g}") for i in bs)
        a.update((j, f"r{g}") for j in as_)
    return b, a


def _replaced_stretches(
    sequences: Sequences, pairs: _Pairs, roles: list[Group]
) -> list[tuple[list[int], list[int]]]:
    """Stretches of the two typical iterations that replace one another, once aligned on the
    matches so far: (BEFORE launches, AFTER launches) as kernel indices in launch order,
    unmatched kernels only."""
    b_seq, a_seq = sequences
    b_anchor, a_anchor = _anchors(pairs, roles)
    tb, ta = _tokens(b_seq, b_anchor, "b"), _tokens(a_seq, a_anchor, "a")
    matcher = difflib.SequenceMatcher(a=tb, b=ta, autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace":
            continue
        b_block = [b_seq[i] for i in range(i1, i2) if tb[i].startswith("b")]
        a_block = [a_seq[j] for j in range(j1, j2) if ta[j].startswith("a")]
        out.append((b_block, a_block))
    return out


class _Components:
    """Union-find over BEFORE and AFTER kernels: the groups the edges made."""

    def __init__(self) -> None:
        self.parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(self, x: tuple[str, int]) -> tuple[str, int]:
        while self.parent.setdefault(x, x) != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, members: Sequence[tuple[str, int]]) -> None:
        for m in members[1:]:
            self.parent[self.find(m)] = self.find(members[0])

    def groups(self) -> list[Group]:
        out: dict[tuple[str, int], Group] = {}
        for node in list(self.parent):
            side, i = node
            entry = out.setdefault(self.find(node), ([], []))
            (entry[0] if side == "b" else entry[1]).append(i)
        return [(sorted(b), sorted(a)) for b, a in out.values() if b and a]


def _by_role(
    before: Side, after: Side, stretches: list[tuple[list[int], list[int]]], pairs: _Pairs
) -> list[Group]:
    """Matrix products with matrix products, attention with attention: in each stretch, the
    n-th launch of a role in BEFORE with the n-th in AFTER (the same matrix product of the
    model, whatever kernel the library picked for it). A kernel that pairs with one other
    only is a 1:1 match (`pairs`); kernels whose launches pair across several (fp32 GEMMs,
    one kernel per shape, against bf16 ones that cover several shapes each) form a group.
    Roles are from the kernel names (side.py): a GEMM's shape is not in an nsys timeline, so
    the place in the iteration stands for it."""
    found = _Components()
    for b_block, a_block in stretches:
        roles = {before.kernels[i].role for i in b_block} - {None}
        for role in sorted(r for r in roles if r is not None):
            bs = [i for i in b_block if before.kernels[i].role == role]
            as_ = [j for j in a_block if after.kernels[j].role == role]
            for n in range(min(len(bs), len(as_))):
                found.join([("b", bs[n]), ("a", as_[n])])
            # Launches beyond the other side's count (cuBLAS's split-K runs a job as two
            # GEMMs) join the last pair, not the regrouped rest.
            for n in range(len(as_), len(bs)) if as_ else ():
                found.join([("b", bs[n]), ("a", as_[-1])])
            for n in range(len(bs), len(as_)) if bs else ():
                found.join([("b", bs[-1]), ("a", as_[n])])
    groups = []
    for bs, as_ in found.groups():
        if len(bs) == len(as_) == 1:
            pairs.add(bs[0], as_[0], "role", before.kernels[bs[0]].role)
        else:
            groups.append((bs, as_))
    return groups


def _groups(sequences: Sequences, pairs: _Pairs, roles: list[Group]) -> list[Group]:
    """Unmatched kernels of stretches that replace one another, grouped (union-find over the
    stretches they share)."""
    found = _Components()
    for b_block, a_block in _replaced_stretches(sequences, pairs, roles):
        if b_block and a_block:
            found.join([("b", i) for i in b_block] + [("a", j) for j in a_block])
    return found.groups()


def _records(
    before: Side, after: Side, pairs: _Pairs, roles: list[Group], groups: list[Group]
) -> tuple[KernelMatch, ...]:
    made: list[tuple[str, tuple[KernelTimes, ...], tuple[KernelTimes, ...], str | None]] = []
    for b, a in pairs.after_of.items():
        method, role = pairs.method[b]
        made.append((method, (before.kernels[b],), (after.kernels[a],), role))
    grouped_b: set[int] = set()
    grouped_a: set[int] = set()
    for kind, found in (("role", roles), ("group", groups)):
        for b_list, a_list in found:
            method = "role" if kind == "role" else _group_method(len(b_list), len(a_list))
            role = before.kernels[b_list[0]].role if kind == "role" else None
            made.append(
                (
                    method,
                    tuple(before.kernels[i] for i in b_list),
                    tuple(after.kernels[j] for j in a_list),
                    role,
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
