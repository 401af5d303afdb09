"""Readable kernel names: demangled C++ signatures shortened for tables and charts.

`short_name("void at::native::elementwise_kernel<128, 4, ...>(int, T3)")` gives
`at::native::elementwise_kernel<…>`: the return type and parameter list go, template arguments
collapse to `<…>`, anonymous and versioned inline namespaces go, long namespace chains keep their
first and last parts, lambdas become `lambda#N`. The full name is always kept by the caller (a
hover title). `short_names` shortens a whole list and, where two different kernels would read the
same, adds the identifier that tells them apart (`at::elementwise_kernel<…DivFunctor…>`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache

ELLIPSIS = "…"
MAX_LEN = 72

_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
# Placeholders for operator names whose characters would confuse the bracket scan.
_OPERATORS = [
    ("operator()", "operator\x01"),
    ("operator ()", "operator\x01"),
    ("operator<<=", "operator\x02"),
    ("operator>>=", "operator\x03"),
    ("operator<<", "operator\x04"),
    ("operator>>", "operator\x05"),
    ("operator<=", "operator\x06"),
    ("operator>=", "operator\x07"),
    ("operator->", "operator\x0e"),
    ("operator<", "operator\x0f"),
    ("operator>", "operator\x10"),
    ("operator[]", "operator\x11"),
]
# EDG (ncu) `[lambda(int) (instance 1)]` and GCC/Clang `{lambda(int)#1}` / `{lambda()#2}`.
_LAMBDA_EDG = re.compile(r"\[lambda\((?:[^()]|\([^()]*\))*\) \(instance (\d+)\)\]")
_LAMBDA_GCC = re.compile(r"\{lambda\((?:[^()]|\([^()]*\))*\)#(\d+)\}")
_ANON = re.compile(r"\(anonymous namespace\)::|`anonymous namespace'::|_GLOBAL__N_1::|<unnamed>::")
# Inline/versioned namespaces libraries add for ABI reasons (cub::CUB_200200_900_NS,
# thrust::THRUST_..._NS).
_VERSIONED_NS = re.compile(r"^(?:[A-Z]+_\d+(?:_\d+)*_NS|__\d+|_V\d+|__cxx11|detail)$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNINFORMATIVE = frozenset(
    {
        "void",
        "const",
        "volatile",
        "unsigned",
        "signed",
        "int",
        "long",
        "short",
        "char",
        "bool",
        "float",
        "double",
        "half",
        "__half",
        "nv_bfloat16",
        "__nv_bfloat16",
        "size_t",
        "lambda",
        "instance",
        "true",
        "false",
        "struct",
        "class",
        "enum",
        "typename",
        "at",
        "c10",
        "std",
        "native",
        "detail",
        "operator",
    }
)
_TEMPLATE_PARAM = re.compile(r"^T\d*$")
_SIMPLE_ARG = re.compile(r"^[A-Za-z0-9_]{1,48}$")


def _protect(name: str) -> str:
    name = _LAMBDA_EDG.sub(lambda m: f"lambda#{m.group(1)}", name)
    name = _LAMBDA_GCC.sub(lambda m: f"lambda#{m.group(1)}", name)
    for text, mark in _OPERATORS:
        name = name.replace(text, mark)
    return _ANON.sub("", name)


def _unprotect(name: str) -> str:
    for text, mark in _OPERATORS:
        name = name.replace(mark, text)
    return name


def _depth_scan(text: str) -> list[int]:
    """Bracket depth before each character (all bracket kinds counted together)."""
    depths, depth = [], 0
    for ch in text:
        if ch in _CLOSE:
            depth = max(depth - 1, 0)
        depths.append(depth)
        if ch in _OPEN:
            depth += 1
    return depths


def _strip_parameters(name: str) -> str:
    """Drop a trailing `(params)` (and a trailing ` const`) at bracket depth zero."""
    name = re.sub(r"\s+(?:const|volatile|&&?)\s*$", "", name.rstrip())
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        ch = name[i]
        if ch in _CLOSE:
            depth += 1
        elif ch in _OPEN:
            depth -= 1
            if depth == 0:
                return name[:i].rstrip() if ch == "(" and i > 0 else name
    return name


def _split_top(text: str, sep: str) -> list[str]:
    """Split on `sep` where it occurs at bracket depth zero."""
    depths = _depth_scan(text)
    parts, start, i = [], 0, 0
    while i < len(text):
        if depths[i] == 0 and text.startswith(sep, i) and (sep != " " or text[i] == " "):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _collapse(component: str) -> str:
    """`Foo<a, b<c>>` -> `Foo<…>`; `fn(int)` -> `fn`; brackets at depth zero only.

    A template argument list that is one simple token (`Kernel2<cutlass_80_simt_sgemm_...>`,
    `foo<float>`) is kept: it is usually the most telling part of the name.
    """
    out: list[str] = []
    inner: list[str] = []
    depth = 0
    for ch in component:
        if ch in _OPEN:
            if depth == 0 and ch == "<":
                out.append("<")
                inner = []
            elif depth > 0:
                inner.append(ch)
            depth += 1
            continue
        if ch in _CLOSE:
            depth = max(depth - 1, 0)
            if depth == 0 and ch == ">":
                text = "".join(inner).strip()
                out.append((text if _SIMPLE_ARG.match(text) else ELLIPSIS) + ">")
            elif depth > 0:
                inner.append(ch)
            continue
        (out if depth == 0 else inner).append(ch)
    return "".join(out).strip()


def _truncate(text: str, max_len: int) -> str:
    if len(text) <= max_len:
        return text
    keep = max_len - 1
    head = (keep + 1) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head) :]


@lru_cache(maxsize=4096)  # pure, and asked for each name many times (tables, rules, changes)
def short_name(full: str, max_len: int = MAX_LEN) -> str:
    """A short readable name for a (demangled) kernel name; the input itself when nothing
    shortens."""
    name = " ".join(str(full).split())
    if not name:
        return ""
    protected = _strip_parameters(_protect(name))
    # The return type ends at the last space at bracket depth zero (`void `, `__global__ void `).
    words = [w for w in _split_top(protected, " ") if w]
    qualified = words[-1] if words else protected
    parts = [_collapse(p) for p in _split_top(qualified, "::")]
    parts = [p for p in parts if p and not _VERSIONED_NS.match(p)] or parts
    # The tail is the function, with the function a lambda or call operator belongs to.
    tail = 1
    while tail < len(parts) and parts[-tail].startswith(("lambda#", "operator")):
        tail += 1
    qualifiers, tail_parts = parts[:-tail], parts[-tail:]
    if len(qualifiers) > 3:
        qualifiers = [qualifiers[0], ELLIPSIS, qualifiers[-1]]
    short = _unprotect("::".join(qualifiers + tail_parts))
    if not _IDENT.search(short.replace("lambda#", "")):
        return _truncate(name, max_len)  # not a C++ name: show it as it is
    return _truncate(short, max_len)


@lru_cache(maxsize=4096)  # each name of a colliding group is asked once per other member
def _template_identifiers(full: str) -> tuple[str, ...]:
    """Identifiers inside the template arguments of a name, in order."""
    protected = _strip_parameters(_protect(" ".join(str(full).split())))
    depths = _depth_scan(protected)
    inner = "".join(ch if d > 0 else " " for ch, d in zip(protected, depths, strict=True))
    return tuple(
        t for t in _IDENT.findall(inner) if t not in _UNINFORMATIVE and not _TEMPLATE_PARAM.match(t)
    )


def _distinguishing(full: str, others: list[str]) -> str | None:
    """The last template identifier of `full` that none of `others` contains."""
    theirs: set[str] = set()
    for other in others:
        theirs.update(_template_identifiers(other))
    unique = [t for t in _template_identifiers(full) if t not in theirs]
    return unique[-1] if unique else None


def short_names(names: Iterable[str], max_len: int = MAX_LEN) -> dict[str, str]:
    """Short names for a set of kernels; names that would collide get a distinguishing hint."""
    unique_names = list(dict.fromkeys(str(n) for n in names))
    groups: dict[str, list[str]] = defaultdict(list)
    for name in unique_names:
        groups[short_name(name, max_len)].append(name)
    out: dict[str, str] = {}
    for short, members in groups.items():
        if len(members) == 1 or len(members) > 50:
            out.update(dict.fromkeys(members, short))
            continue
        for member in members:
            hint = _distinguishing(member, [m for m in members if m != member])
            if hint and short.endswith("<" + ELLIPSIS + ">"):
                out[member] = _truncate(f"{short[:-1]}{hint}{ELLIPSIS}>", max_len + len(hint) + 1)
            elif hint:
                out[member] = _truncate(f"{short} [{hint}]", max_len + len(hint) + 3)
            else:
                out[member] = short
    return out


# -- matching a kernel across tools ------------------------------------------------------------
# nsys and ncu spell one kernel differently (namespace qualifiers, casts on template integers);
# the profile's plan matches its signatures to the profiled kernels by these two forms.

_CAST = re.compile(
    r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|unsigned)\)(?=-?\w)"
    # nsys casts enum template arguments too, ncu prints the bare value:
    # `(cudnnKernelDataType_t)0` against `0` (cuDNN's layout conversions, H200)
    r"|\([A-Za-z_][\w:]*\)(?=-?\d)"
)
# ncu's exports print PyTorch's anonymous namespace as `unnamed>::` where nsys prints
# `<unnamed>::` (seen on the H200 with ncu 2025.3.1: `void unnamed>::max_pool_forward_nchw<...>`).
# A qualifier starts where its run of word characters does (digits before it stay: `9` in
# `9abc::`): tried at every position inside a long identifier, `[A-Za-z_]\w*::` would scan to
# the identifier's end from each one, quadratic in its length (100,000 characters: minutes).
_QUALIFIER = re.compile(r"(?<!\w)(\d*)[A-Za-z_]\w*::|<?unnamed>::|\(anonymous namespace\)::")
_NCU_UNNAMED = re.compile(r"(?<!<)\bunnamed>::")


def function_name(name: str) -> str:
    """The bare function name of a demangled kernel name, as ncu's `function` name base and nsys's
    short name have it: 'void at::native::f<4, g<float>>(int, T2)' -> 'f'."""
    text = _NCU_UNNAMED.sub("<unnamed>::", name.strip())
    for opener, closer in (("(", ")"), ("<", ">")):  # parameters, then template arguments
        if text.endswith(closer):
            start = _matching_open(text, opener, closer)
            if start > 0:
                text = text[:start]
    depth, cut = 0, 0
    for i, ch in enumerate(text):  # the last '::' or space outside brackets
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif depth == 0 and (ch == " " or (ch == ":" and text[i - 1 : i] == ":")):
            cut = i + 1
    return text[cut:] or name


def _matching_open(text: str, opener: str, closer: str) -> int:
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == closer:
            depth += 1
        elif text[i] == opener:
            depth -= 1
            if depth == 0:
                return i
    return -1


def normalized(name: str) -> str:
    """A demangled name with the spelling differences between nsys and ncu removed (namespace
    qualifiers, casts on template integers, spaces), to match a profiled kernel to its signature."""
    return _normalized(str(name))


@lru_cache(maxsize=8192)
def _normalized(name: str) -> str:
    """`normalized`, once per name: a change names each chain's kernels, their templated names
    thousands of characters long, and a diagnosis asks a thousand times (idioms/optim_step)."""
    text = _CAST.sub("", name)
    text = _QUALIFIER.sub(lambda m: m.group(1) or "", text)
    return re.sub(r"\s+", "", text)
