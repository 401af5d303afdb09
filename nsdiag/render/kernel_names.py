"""Kernel names a reader can tell apart: look-alikes (signatures that shorten to one name, such
as five `at::batch_norm_transform_input_kernel<…>` of different launch shapes) carry what
differs, their grid, block or a short hash of the full name."""

from __future__ import annotations

import hashlib
import re
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


# Words of a kernel name that tell a reader little (said by every kernel of a library, the
# architecture, a compiler's numbering): left out first when a name must be shortened.
_FILLER = frozenset({"void", "kernel", "generated", "fort", "native", "cga1x1x1", "knob"})
_FILLER_WORD = re.compile(r"^(?:\d+|sm\d+[a-z]?|kernel\d+)$")
_WORD = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]+")
_SHAPE = re.compile(r"^\d+(?:x\d+)+$")  # a tile or cluster shape: 64x128x64
TEMPLATE = "<…>"


def fit(name: str, width: int, others: Iterable[str] = ()) -> str:
    """`name` in at most `width` characters, keeping what tells it apart from the `others`
    listed beside it. Left out in turn until it fits, each run of left-out words shown as one
    …: its template arguments (`<…>`), filler words (`kernel`, `generated`, `sm90`, numbering),
    the words every other name of its family (same first word) has too, then the words some
    of them have, then words from its middle; only then is it cut inside a word. Beside other
    nvjet kernels `nvjet_sm90_hsh_64x32_64x16_2x4_h_bz_splitK_bias_TNT` keeps
    `nvjet…64x32…splitK…TNT`, and
    cuDNN's attention kernel keeps `sdpa` and its tile."""
    if len(name) <= width:
        return name
    if name.endswith(TEMPLATE):
        name = name[: -len(TEMPLATE)]
        if len(name) <= width:
            return name
    tokens = _WORD.findall(name)
    words = [i for i, t in enumerate(tokens) if t[0].isalnum()]
    if len(words) < 2:
        return _middle(name, width)
    first = tokens[words[0]]
    family = [_WORD.findall(o) for o in others if o != name and _first_word(o) == first]
    everywhere = set.intersection(*map(set, family)) if family else set()
    somewhere = set.union(*map(set, family)) if family else set()
    inner, rest = words[1:-1], words[1:]
    order = [i for i in rest if tokens[i] in _FILLER or _FILLER_WORD.match(tokens[i])]
    order += [i for i in inner if tokens[i] in everywhere]
    order += [i for i in inner if tokens[i] in somewhere]
    dropped: set[int] = set()
    text = name
    for i in dict.fromkeys(order):
        if len(text) <= width:
            break
        dropped.add(i)
        text = _joined(tokens, dropped)
    kept = [i for i in words[1:-1] if i not in dropped]
    while len(text) > width and len(kept) > 1:  # then whole words from the middle: the first
        middle = kept[len(kept) // 2]  # one after the family's word stays, and shapes last
        plain = [i for i in kept[1:] if not _SHAPE.match(tokens[i])]
        victim = min(plain, key=lambda i: abs(i - middle)) if plain else kept[-1]
        kept.remove(victim)
        dropped.add(victim)
        text = _joined(tokens, dropped)
    return text if len(text) <= width else _middle(text, width)


def _first_word(name: str) -> str:
    return next((t for t in _WORD.findall(name) if t[0].isalnum()), "")


def _joined(tokens: list[str], dropped: set[int]) -> str:
    """The tokens less the dropped words: each run of them, with its separators, as one …."""
    out: list[str] = []
    cut = False
    for i, token in enumerate(tokens):
        if i in dropped:
            while out and not out[-1][0].isalnum() and out[-1] != "…":
                out.pop()
            if not out or out[-1] != "…":
                out.append("…")
            cut = True
        elif token[0].isalnum():
            out.append(token)
            cut = False
        elif not cut:
            out.append(token)
    return "".join(out)


def _middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]
