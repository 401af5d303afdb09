"""Facts a library kernel's name states: library, kind, architecture, tile, precision, alignment.

`parse_kernel_name("void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_tn_align1>"
"(T1::Params)")` gives a `KernelFacts` with library `cutlass`, kind `gemm`, arch 75, tensor cores,
fp16 in / fp32 accumulate / fp16 out, tile (256, 128), layout `tn` and alignment 1. Each field
comes from a documented naming scheme (docs/kernel-names.md names the source of every field);
what a name does not say stays None, and tokens of a scheme nobody documents are kept verbatim in
`raw_tokens`, never interpreted. Any string parses: an unknown, empty or hostile name gives facts
with every field None. `fallback_reasons` says why a GEMM or convolution kernel is a fallback on
a device; `describe` gives the label/value pairs of a kernel card.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

_MAX_NAME = 65536  # longer names are cut here (real template names stay under ~12 kB)


@dataclass(frozen=True)
class Precision:
    """Data types a name prints: `printed` verbatim, the rest normalised (fp16, bf16, tf32, ...)."""

    printed: str
    inputs: str | None = None  # A and B
    accumulate: str | None = None
    output: str | None = None  # C/D


@dataclass(frozen=True)
class Alignment:
    """Alignment in elements per operand, as printed: (("ab", 1),) or (("a", 2), ("c", 8))."""

    operands: tuple[tuple[str, int], ...]

    @property
    def minimum(self) -> int:
        return min(v for _, v in self.operands)


@dataclass(frozen=True)
class KernelFacts:
    library: str | None = None  # cublas, cublaslt, cutlass, cudnn, triton, pytorch, nccl, cub ...
    scheme: str | None = None  # the naming scheme that matched (a section of docs/kernel-names.md)
    kind: str | None = None  # gemm, conv-fprop, attention, elementwise, reduction, copy ...
    op: str | None = None  # operation, functor or variant, as printed
    arch: int | None = None  # SM architecture the kernel was built for: 75, 80, 90 ...
    tile: tuple[int, ...] | None = None  # CTA tile (M, N) or (M, N, K)
    cluster: tuple[int, ...] | None = None  # CTAs per thread-block cluster
    stages: int | None = None
    warps: tuple[int, ...] | None = None  # warps per CTA along M, N, K
    warpgroups: tuple[int, ...] | None = None
    layout: str | None = None  # operand layouts as printed: tn, NNT, nhwckrsc_nhwc
    operand_layouts: tuple[tuple[str, str], ...] | None = None  # (("A", "row-major"), ...)
    memory_layout: str | None = None  # tensor memory format: nhwc, nchw, channels_last
    precision: Precision | None = None
    tensor_core: bool | None = None
    instruction_shape: str | None = None  # MMA instruction M x N x K, e.g. "16x8x16"
    alignment: Alignment | None = None
    split_k: str | None = None  # the split-K variant as printed (truthy when split)
    stream_k: str | None = None
    epilogue: tuple[str, ...] | None = None  # ("bias",), ("relu",)
    scalar_operand: bool | None = None  # elementwise kernel with a scalar (not tensor) operand
    raw_tokens: tuple[str, ...] = ()  # name tokens kept verbatim: no documented meaning

    def to_json(self) -> dict[str, Any]:
        """The facts as a JSON-ready dict; None fields and empty tuples are left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            if isinstance(value, Precision):
                value = {k.name: getattr(value, k.name) for k in fields(value)}
                value = {k: v for k, v in value.items() if v is not None}
            elif isinstance(value, Alignment):
                value = {"operands": dict(value.operands), "minimum": value.minimum}
            elif f.name == "operand_layouts":
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


EMPTY = KernelFacts()

# --- vocabulary ---------------------------------------------------------------------------------
# fmt: off
# CUTLASS DataTypeNames (python/cutlass_library/library.py), C++ element types as profilers print
# them, NCCL's type names (src/device/generate.py).
_TYPES = {
    "f16": "fp16", "fp16": "fp16", "half_t": "fp16", "__half": "fp16", "half": "fp16",
    "c10::Half": "fp16", "bf16": "bf16", "bfloat16_t": "bf16", "__nv_bfloat16": "bf16",
    "c10::BFloat16": "bf16", "tf32": "tf32", "tfloat32_t": "tf32", "f32": "fp32", "fp32": "fp32",
    "float": "fp32", "f64": "fp64", "double": "fp64", "e4m3": "fp8-e4m3", "e5m2": "fp8-e5m2",
    "f8e4m3": "fp8-e4m3", "f8e5m2": "fp8-e5m2", "float_e4m3_t": "fp8-e4m3",
    "float_e5m2_t": "fp8-e5m2", "s8": "int8", "i8": "int8", "int8_t": "int8", "u8": "uint8",
    "s32": "int32", "i32": "int32", "int32_t": "int32", "u32": "uint32", "i64": "int64",
    "u64": "uint64", "s4": "int4", "u4": "uint4", "cf32": "complex-fp32", "cf64": "complex-fp64",
}
# CUTLASS ShortDataTypeNames: the accumulator letter of core_name().
_CUTLASS_SHORT = {"i": "int32", "h": "fp16", "s": "fp32", "d": "fp64", "c": "complex-fp32",
                  "z": "complex-fp64"}
# cuBLAS's letters in mixed-precision API names (cublasHSHgemvBatched, cublasTSTgemvBatched).
_BLAS_LETTER = {"h": "fp16", "s": "fp32", "t": "bf16", "d": "fp64"}
_BITS = {"fp16": 16, "bf16": 16, "fp32": 32, "tf32": 32, "fp64": 64, "fp8-e4m3": 8,
         "fp8-e5m2": 8, "int8": 8, "uint8": 8, "int32": 32}
# MMA instruction shapes as CUTLASS prints them: "{0}{1}{2}" of instruction_shape (generator.py).
_INSTRUCTIONS = {
    "884": "8x8x4", "1684": "16x8x4", "1688": "16x8x8", "16816": "16x8x16", "16832": "16x8x32",
    "16864": "16x8x64", "168256": "16x8x256", "8816": "8x8x16", "8832": "8x8x32",
    "88128": "8x8x128", "161616": "16x16x16", "32816": "32x8x16", "83216": "8x32x16",
}
# fmt: on
_LAYOUT_LETTER = {"n": "column-major", "t": "row-major"}  # CUTLASS ShortLayoutTypeNames
_MEMORY_FORMATS = ("nhwc", "nchw", "ndhwc", "ncdhw", "nwc", "ncw")
_EPILOGUE_WORDS = frozenset({"bias", "relu", "gelu"})
_CONV_KIND = {"fprop": "conv-fprop", "dgrad": "conv-dgrad", "wgrad": "conv-wgrad"}


def _norm(type_name: str | None) -> str | None:
    return None if type_name is None else _TYPES.get(type_name)


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("x"))


def _int(text: str | None) -> int | None:
    return int(text) if text else None


# --- name anatomy -------------------------------------------------------------------------------
_ANON = re.compile(r"<unnamed>::|\(anonymous namespace\)::|`anonymous namespace'::")
_HEAD_END = re.compile(r"[<(\s]")


def _head(name: str) -> str:
    """The qualified function name: no return type, template arguments or parameters."""
    text = name[5:4101] if name.startswith("void ") else name[:4096]
    if "anonymous" in text or "<unnamed>" in text:
        text = _ANON.sub("", text)
    end = _HEAD_END.search(text)
    return (text[: end.start()] if end else text)[:1024]


# --- cuBLAS nvjet (cuBLAS/cuBLASLt GEMMs since CUDA 12.x) ----------------------------------------
_NVJET = re.compile(
    r"nvjet_(?:sm(?P<arch>\d+)_)?(?P<types>[a-z]{3})_(?P<m>\d+)x(?P<n>\d+)_(?P<k>\d+)x(?P<s>\d+)"
    r"_(?P<cm>\d+)x(?P<cn>\d+)(?P<rest>(?:_[A-Za-z0-9]+)*)"
)
_NT_LAYOUT = re.compile(r"[NT]{2,3}")


def _nvjet(name: str, head: str) -> KernelFacts | None:
    m = _NVJET.fullmatch(head) if head.startswith("nvjet_") else None
    if not m:
        return None
    letters = [_BLAS_LETTER.get(c) for c in m["types"]]
    rest = m["rest"].split("_")[1:]
    layout = rest.pop() if rest and _NT_LAYOUT.fullmatch(rest[-1]) else None
    epilogue = tuple(t for t in rest if t in _EPILOGUE_WORDS)
    split = next((t for t in rest if t.lower() == "splitk"), None)
    stream = next((t for t in rest if t.lower() == "streamk"), None)
    return KernelFacts(
        library="cublas", scheme="nvjet", kind="gemm", arch=_int(m["arch"]),
        tile=(int(m["m"]), int(m["n"]), int(m["k"])), stages=int(m["s"]),
        cluster=(int(m["cm"]), int(m["cn"])), layout=layout,
        precision=Precision(m["types"], *letters) if all(letters) else Precision(m["types"]),
        tensor_core=True if letters[0] in ("fp16", "bf16") else None,
        epilogue=epilogue or None, split_k=split, stream_k=stream,
        raw_tokens=tuple(t for t in rest if t not in epilogue and t not in (split, stream)),
    )  # fmt: skip


# --- xmma (cuBLAS and cuDNN kernels: sm80_xmma_gemm_..., sm90_xmma_fprop_...) -------------------
_XMMA = re.compile(r"sm(\d+)_xmma_([A-Za-z0-9_]+)")
_TYPE_GROUP = re.compile(r"(?:[a-z]{1,2}\d{1,2})+")  # f16f16, bf16bf16, f32, i8i8
_TYPE_TOKEN = re.compile(r"[a-z]{1,2}\d{1,2}")
_LAYOUT_TOKEN = re.compile(r"[nhwcdkrst]+")  # nn, n, nhwckrsc, nhwc
_X_TOKEN = re.compile(
    r"tile(?:size)?(?P<tile>\d+x\d+x\d+)|stage(?P<stages>\d+)"
    r"|warp(?P<group>group)?size(?P<warps>\d+x\d+x\d+)|tensor(?P<inst>\d+x\d+x\d+|\d+)"
    r"|align(?P<operand>[a-z])(?P<align>\d+)"
)
_XMMA_KIND = {"gemm": "gemm", "fprop": "conv-fprop", "dgrad": "conv-dgrad", "wgrad": "conv-wgrad"}
_XMMA_WORDS = frozenset({"implicit", "gemm", "indexed", "wo", "smem", "image", "first", "layer"})
_LIBRARIES = {"cudnn": "cudnn", "cublas": "cublas", "cublasLt": "cublaslt"}


def _xmma(name: str, head: str) -> KernelFacts | None:
    m = _XMMA.fullmatch(head) if "_xmma_" in head else None
    if not m:
        return None
    tokens = [t for t in m[2].split("_") if t]
    out: dict[str, Any] = {"scheme": "xmma", "arch": int(m[1])}
    out["kind"] = _XMMA_KIND.get(tokens[0])
    op: list[str] = []
    while tokens and (tokens[0] in _XMMA_KIND or tokens[0] in _XMMA_WORDS):
        op.append(tokens.pop(0))
    types: list[str] = []
    layouts: list[str] = []
    align: list[tuple[str, int]] = []
    raw: list[str] = []
    for i, t in enumerate(tokens):
        g = _X_TOKEN.fullmatch(t)
        if g and g.lastgroup in ("tile", "stages"):
            out[g.lastgroup] = _dims(g[g.lastgroup]) if g["tile"] else int(g["stages"])
        elif g and g["warps"]:
            out["warpgroups" if g["group"] else "warps"] = _dims(g["warps"])
        elif g and g["inst"]:
            out["instruction_shape"] = _INSTRUCTIONS.get(g["inst"], g["inst"] if "x" in t else None)
            out["tensor_core"] = True
        elif g:
            align.append((g["operand"], int(g["align"])))
        elif t in _LIBRARIES:
            out["library"] = _LIBRARIES[t]
        elif not layouts and t[0] not in "kg" and _TYPE_GROUP.fullmatch(t):
            types.append(t)
        elif types and "tile" not in out and _LAYOUT_TOKEN.fullmatch(t):
            layouts.append(t)
        elif t in ("hmma", "ffma"):  # the SASS instructions: half MMA on tensor cores, FP32 FMA
            out["tensor_core"] = t == "hmma"
        elif t == "split" and tokens[i + 1 : i + 2] == ["k"]:
            out["split_k"] = "split_k"
        elif t not in ("execute", "kernel") and not (t == "k" and tokens[i - 1] == "split"):
            raw.append(t)
    if "warpgroups" in out and "tensor_core" not in out:
        out["tensor_core"] = True  # warpgroup-level MMA is Hopper's wgmma (PTX ISA)
    if types:
        ins = set(_TYPE_TOKEN.findall(types[0]))  # the first group: A and B
        out["precision"] = Precision("_".join(types), _norm(ins.pop()) if len(ins) == 1 else None)
    if layouts:
        out["layout"] = "_".join(layouts)
        out["memory_layout"] = next((f for f in _MEMORY_FORMATS if layouts[0].startswith(f)), None)
    out["alignment"] = Alignment(tuple(align)) if align else None
    return KernelFacts(**out, op="_".join(op) or None, raw_tokens=tuple(raw))


# --- cuDNN runtime-compiled engines (cudnn_generated_fort_native_sdpa_sm90_...) -----------------
_G_TOKEN = re.compile(r"sm(?P<arch>\d+)|(?P<tile>\d+x\d+x\d+)|cga(?P<cluster>\d+x\d+x\d+)")


def _cudnn_generated(name: str, head: str) -> KernelFacts | None:
    if not head.startswith("cudnn_generated_"):
        return None
    out: dict[str, Any] = {"library": "cudnn", "scheme": "cudnn-generated"}
    op: list[str] = []
    raw: list[str] = []
    for t in head.split("_")[2:]:
        g = _G_TOKEN.fullmatch(t)
        if g and g["arch"]:
            out["arch"] = int(g["arch"])
        elif g and g["cluster"]:
            out["cluster"] = _dims(g["cluster"])
        elif g and "tile" not in out:
            out["tile"] = _dims(t)
        elif t in ("sdpa", "flash", "fprop", "bprop"):
            out["kind"] = "attention" if t == "sdpa" else out.get("kind")
            op.append(t)
        elif t in ("wgmma", "hmma"):
            out["tensor_core"] = True
        elif t in _TYPES and "precision" not in out:
            out["precision"] = Precision(t)  # "f16" also names bf16 runs: not normalised
        else:
            raw.append(t)
    return KernelFacts(**out, op="_".join(op) or None, raw_tokens=tuple(raw))


# --- CUTLASS procedural names (gemm_operation.py, conv2d_operation.py) --------------------------
_CUTLASS_NAME = re.compile(
    r"cutlass(?P<p>3x)?_(?:(?P<arch>\d+)_)?(?:sm(?P<sm>\d+)_)?"
    r"(?P<op>simt|tensorop|wmma_tensorop|sptensorop|bstensorop|bssptensorop)_(?P<rest>\w{1,512})"
)
_WORD = re.compile(r"\w")
_CUTLASS2 = re.compile(
    r"(?P<ex>.+?)_(?P<m>\d+)x(?P<n>\d+)(?:_(?P<k>\d+)x(?P<s>\d+))?_(?P<l>[a-z0-9]+)"
    r"(?P<extra>(?:_[a-z]+)*?)(?:_align(?P<al>\d+))?"
)
_CUTLASS3 = re.compile(
    r"(?P<core>[a-z0-9]*?)(?P<kind>gemm|spgemm|fprop|dgrad|wgrad)_(?P<types>.+?)"
    r"_(?P<tile>\d+x\d+x\d+)_(?P<cl>\d+x\d+x\d+)_(?P<s>\d+)_(?P<l>[nt]{2,3})_align(?P<al>\d+)"
    r"(?P<suffix>(?:_\w+)?)"
)
# core_name(): accumulator letter, instruction shape, intermediate (math) type, operation.
_CORE = re.compile(
    r"(?P<acc>[a-z])(?P<inst>\d+)?(?P<mid>[a-z]+\d+)?(?P<kind>gemm|spgemm|fprop|dgrad|wgrad)"
)
_CORE3_INST = re.compile(r"[a-z]?(\d+x\d+x\d+)")
_ITERATORS = frozenset({"analytic", "optimized", "fixed", "few", "channels", "stride", "dilation"})
_NT = re.compile(r"[nt]{2,3}")


def _cutlass_name(name: str, head: str) -> KernelFacts | None:
    if "cutlass" not in name or ("tensorop_" not in name and "simt_" not in name):
        return None  # the cheap test first: template names mention "cutlass" a hundred times
    found = _CUTLASS_NAME.finditer(name)
    m = next((m for m in found if m.start() == 0 or not _WORD.match(name, m.start() - 1)), None)
    if not m:
        return None
    base = {"library": _wrapper_library(head), "arch": _int(m["arch"] or m["sm"]),
            "tensor_core": m["op"] != "simt"}  # fmt: skip
    return _cutlass3(m["rest"], base) if m["p"] else _cutlass2(m["rest"], base)


def _wrapper_library(head: str) -> str:
    """cuDNN ships CUTLASS renamed (namespace cutlass__5x_cudnn): those kernels are cuDNN's."""
    return "cudnn" if "_cudnn" in head.split("::")[0] else "cutlass"


def _cutlass2(rest: str, base: dict[str, Any]) -> KernelFacts | None:
    m = _CUTLASS2.fullmatch(rest)
    parts = m["ex"].split("_") if m else []
    at = next((i for i, p in enumerate(parts[:2]) if _CORE.fullmatch(p)), None)
    core = _CORE.fullmatch(parts[at]) if at is not None else None
    if m is None or at is None or core is None:
        return None
    # conv: the iterator algorithm (IteratorAlgorithmNames), then "unity_stride" (dgrad only)
    variant = [p for p in parts[at + 1 :] if p in _ITERATORS] + m["extra"].split("_")[1:]
    a_type = next((p for p in parts[at + 1 :] if p not in _ITERATORS), None)
    acc = _CUTLASS_SHORT.get(core["acc"])
    # extended_name() prints C's type first and A's last only where they differ from the
    # accumulator's, so an absent one is the accumulator type.
    inputs = _norm(core["mid"]) or _norm(a_type) or acc
    kind, layout = core["kind"], m["l"]
    operand = "ab" if "gemm" in kind else "a"  # gemm: max(A, B) alignment; conv: A's
    return KernelFacts(
        **base, scheme="cutlass", kind=_CONV_KIND.get(kind, kind), op="_".join(variant) or None,
        tile=tuple(int(x) for x in (m["m"], m["n"], m["k"]) if x is not None),
        stages=_int(m["s"]), instruction_shape=_INSTRUCTIONS.get(core["inst"] or ""),
        precision=Precision(m["ex"], inputs, acc, _norm(parts[0]) if at == 1 else acc),
        layout=layout, operand_layouts=_operand_layouts(layout),
        memory_layout=layout if layout in _MEMORY_FORMATS else None,
        alignment=Alignment(((operand, int(m["al"])),)) if m["al"] else None,
    )  # fmt: skip


def _operand_layouts(layout: str) -> tuple[tuple[str, str], ...] | None:
    if not _NT.fullmatch(layout):
        return None
    return tuple(zip("ABC", (_LAYOUT_LETTER[c] for c in layout), strict=False))


def _cutlass3(rest: str, base: dict[str, Any]) -> KernelFacts | None:
    m = _CUTLASS3.fullmatch(rest)
    if not m:
        return None
    types = m["types"].split("_")
    a, acc, d = (types[0], types[2], types[4]) if len(types) == 5 else (None, None, None)
    inst = _CORE3_INST.fullmatch(m["core"])
    suffix = [t for t in m["suffix"].split("_") if t]
    stream = "stream_k" if "stream" in suffix and "k" in suffix else None
    return KernelFacts(
        **base, scheme="cutlass3", kind=_CONV_KIND.get(m["kind"], m["kind"]),
        tile=_dims(m["tile"]), cluster=_dims(m["cl"]), stages=int(m["s"]) or None,
        instruction_shape=inst[1] if inst else None,
        precision=Precision(m["types"], _norm(m["core"]) or _norm(a), _norm(acc), _norm(d)),
        layout=m["l"], operand_layouts=_operand_layouts(m["l"]),
        alignment=Alignment((("ab", int(m["al"])),)), stream_k=stream,
        raw_tokens=tuple(t for t in suffix if not (stream and t in ("stream", "k"))),
    )  # fmt: skip


# --- CUTLASS device kernels named by their template (cutlass__5x_cudnn::Kernel<...>) ------------
_T_HEAD = re.compile(r"cutlass\w*::(?:Kernel2?|device_kernel)")
_T_TILE = re.compile(r"GemmShape<\(int\)(\d+), \(int\)(\d+), \(int\)(\d+)>")
_T_INST = re.compile(r"arch::Mma<[\w:]*GemmShape<\(int\)(\d+), \(int\)(\d+), \(int\)(\d+)>")
_T_MMA = re.compile(r"arch::Mma<[^<>]*<[^<>]*>, \(int\)\d+, ([\w:]+), [\w:]+, [\w:]+, [\w:]+, "
                    r"([\w:]+),")  # fmt: skip
_T_STAGES = re.compile(r"\(int\)(\d+), bool>, [\w:]*epilogue::threadblock::Epilogue<")
_T_ALIGNED = re.compile(r"AlignedArray<[\w:]+, \(int\)(\d+)")
_T_OUTPUT = re.compile(r"LinearCombination<([\w:]+), \(int\)\d+")
_T_CONV = re.compile(r"Conv[23]d(Fprop|Dgrad|Wgrad)")


def _cutlass_template(name: str, head: str) -> KernelFacts | None:
    if not _T_HEAD.fullmatch(head):
        return None
    lib = _wrapper_library(head)
    if "ReduceSplitK" in name:
        return KernelFacts(library=lib, scheme="cutlass-template", kind="reduction",
                           op="ReduceSplitK", split_k="ReduceSplitK")  # fmt: skip
    conv, tile, inst = _T_CONV.search(name), _T_TILE.search(name), _T_INST.search(name)
    mma, stages, output = _T_MMA.search(name), _T_STAGES.search(name), _T_OUTPUT.search(name)
    aligned = _T_ALIGNED.findall(name)[:2]  # the A and B iterators' access width
    tensor = "MmaTensorOp" in name
    precision = None
    if mma:
        el = mma[1].rsplit("::", 1)[-1]
        out_t = output[1].rsplit("::", 1)[-1] if output else None
        precision = Precision(el, _norm(el), _norm(mma[2].rsplit("::", 1)[-1]), _norm(out_t))
    return KernelFacts(
        library=lib, scheme="cutlass-template",
        kind=_CONV_KIND.get(conv[1].lower()) if conv else None,
        op="ImplicitGemmConvolution" if "ImplicitGemmConvolution" in name else None,
        tile=_ints(tile), stages=int(stages[1]) if stages else None,
        tensor_core=True if tensor else (False if "MmaSimt" in name else None),
        instruction_shape="x".join(inst.groups()) if inst and tensor else None,
        precision=precision,
        alignment=Alignment(tuple(zip("ab", map(int, aligned), strict=False))) if aligned else None,
    )  # fmt: skip


def _ints(m: re.Match[str] | None) -> tuple[int, ...] | None:
    return tuple(int(x) for x in m.groups()) if m else None


# --- legacy cuBLAS (volta_/turing_/ampere_..gemm_..) --------------------------------------------
_ARCH_NAMES = {"maxwell": 50, "pascal": 60, "volta": 70, "turing": 75, "ampere": 80}
_LEGACY = re.compile(
    r"(?P<gen>maxwell|pascal|volta|turing|ampere)_(?:(?P<c>[a-z]+\d+)_)?(?P<acc>[a-z])"
    r"(?P<inst>\d+)?gemm(?:_(?P<a>[a-z]+\d+))?_(?P<m>\d+)x(?P<n>\d+)(?P<rest>(?:_[a-z0-9]+)*?)"
    r"_(?P<l>[nt]{2})"
)


def _cublas_legacy(name: str, head: str) -> KernelFacts | None:
    m = _LEGACY.fullmatch(head) if "gemm_" in head else None
    if not m:
        return None
    acc = _CUTLASS_SHORT.get(m["acc"])
    rest = [t for t in m["rest"].split("_") if t]
    epilogue = tuple(t for t in rest if t in _EPILOGUE_WORDS)
    return KernelFacts(
        library="cublas", scheme="cublas-legacy", kind="gemm", arch=_ARCH_NAMES[m["gen"]],
        tile=(int(m["m"]), int(m["n"])), layout=m["l"],
        precision=Precision(head[len(m["gen"]) + 1 : m.start("m") - 1], _norm(m["a"]) or acc, acc,
                            _norm(m["c"])),
        tensor_core=m["inst"] is not None, instruction_shape=_INSTRUCTIONS.get(m["inst"] or ""),
        epilogue=epilogue or None, raw_tokens=tuple(t for t in rest if t not in epilogue),
    )  # fmt: skip


# --- other cuBLASLt and cuDNN kernels -----------------------------------------------------------
_CUDNN_KERNELS: dict[str, tuple[str, str | None]] = {
    "nchwToNhwcKernel": ("layout-conversion", None),
    "nhwcToNchwKernel": ("layout-conversion", None),
    "nhwcAddPaddingKernel": ("padding", "nhwc"),
}


def _cublaslt_cudnn(name: str, head: str) -> KernelFacts | None:
    parts = head.split("::")
    base = parts[-1]
    if parts[0] == "cublasLt":
        split = "splitKreduce" if base.startswith("splitKreduce") else None
        return KernelFacts(library="cublaslt", scheme="cublaslt", op=base, split_k=split,
                           kind="reduction" if split else None)  # fmt: skip
    if "cudnn" not in parts[0] and base not in _CUDNN_KERNELS:
        return None
    kind, memory = _CUDNN_KERNELS.get(base, (None, None))
    return KernelFacts(library="cudnn", scheme="cudnn", kind=kind, op=base, memory_layout=memory)


def _convolve_sgemm(name: str, head: str) -> KernelFacts | None:
    if head not in ("implicit_convolve_sgemm", "precomputed_convolve_sgemm"):
        return None
    return KernelFacts(scheme="cudnn-legacy", kind="conv", op=head, tensor_core=False)


# --- Triton kernels generated by TorchInductor --------------------------------------------------
_INDUCTOR = re.compile(r"triton_(poi|red|per|for|spl|tem|unk)_(\w*?)(?:_(\d+))?")
_INDUCTOR_KIND = {"poi": "elementwise", "red": "reduction", "per": "reduction",
                  "for": "elementwise", "spl": "scan"}  # fmt: skip
_MM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm"})


def _triton(name: str, head: str) -> KernelFacts | None:
    m = _INDUCTOR.fullmatch(head) if head.startswith("triton_") else None
    if not m:
        return None
    kind = _INDUCTOR_KIND.get(m[1])
    if m[1] == "tem" and _MM_OPS.intersection(m[2].split("_")):
        kind = "gemm"
    return KernelFacts(library="triton", scheme="inductor", kind=kind, op=m[2] or None)


# --- NCCL, FlashAttention, CUB/Thrust -----------------------------------------------------------
_NCCL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)((?:_\w+)?)")
_FLASH = re.compile(r"flash_(?:fwd|bwd)\w*|FlashAttn\w+")


def _nccl(name: str, head: str) -> KernelFacts | None:
    """ncclDevKernel_<coll>[_<redop>_<type>]_<algo>_<proto> (src/device/generate.py)."""
    m = _NCCL.fullmatch(head) if head.startswith("nccl") else None
    if not m:
        return None
    rest = [t for t in m[2].split("_") if t]
    ty = next((t for t in rest if _norm(t)), None)
    others = ", ".join(t for t in rest if t != ty)  # reduction op, algorithm, protocol
    return KernelFacts(library="nccl", scheme="nccl", kind="communication",
                       op=f"{m[1]} ({others})" if others else m[1],
                       precision=Precision(ty, _norm(ty)) if ty else None)  # fmt: skip


def _flash(name: str, head: str) -> KernelFacts | None:
    base = head.rsplit("::", 1)[-1]
    if not _FLASH.fullmatch(base):
        return None
    lib = "pytorch" if head.split("::")[0] in ("pytorch_flash", "at") else "flash-attention"
    return KernelFacts(library=lib, scheme="flash-attention", kind="attention", op=base)


# CUB's kernels live in cub::detail::<algorithm> (cub/device/dispatch/*.cuh); ncu sometimes prints
# only the last namespace. PyTorch wraps its CUB copy in at_cuda_detail (ATen/cuda/cub.cuh).
_CUB_NAMESPACES = frozenset({"radix_sort", "scan", "reduce", "unique_by_key", "select", "rle",
                             "histogram", "merge_sort", "segmented_sort", "for_each"})  # fmt: skip
_CUB_KERNEL = re.compile(r"Device\w+Kernel")
_CUB_KIND = re.compile(r"Device(Segmented)?(RadixSort|MergeSort|Reduce|Scan)")
_CUB_KINDS = {"RadixSort": "sort", "MergeSort": "sort", "Reduce": "reduction", "Scan": "scan"}


def _cub(name: str, head: str) -> KernelFacts | None:
    parts = head.split("::")
    base, namespace = parts[-1], (parts[-2] if len(parts) > 1 else "")
    evidence = "cub::" in name or "at_cuda_detail" in name or namespace in _CUB_NAMESPACES
    if "cub" in parts or parts[0] == "thrust":
        lib = "cub" if "cub" in parts else "thrust"
    elif evidence and _CUB_KERNEL.fullmatch(base):
        lib = "cub"
    else:
        return None
    m = _CUB_KIND.match(base)
    return KernelFacts(library=lib, scheme="cub", kind=_CUB_KINDS[m[2]] if m else None, op=base)


# --- PyTorch native kernels (ATen) --------------------------------------------------------------
_ELEMENTWISE = frozenset({
    "vectorized_elementwise_kernel", "unrolled_elementwise_kernel", "elementwise_kernel",
    "elementwise_kernel_with_index", "unrolled_elementwise_kernel_for_multi_outputs",
    "distribution_elementwise_grid_stride_kernel", "multi_tensor_apply_kernel",
    "index_elementwise_kernel",
})  # fmt: skip
_NORMS = "layer_norm|LayerNorm|GammaBetaBackward|batch_norm|BatchNorm|group_norm|GroupNorm"
_ATEN_KINDS = (  # matched at the start of the kernel's own name
    (re.compile(r"reduce_kernel\b"), "reduction"),
    (re.compile(r"softmax_warp_(forward|backward)|cunn_(Log)?SoftMax"), "softmax"),
    (re.compile(rf"\w{{0,40}}?({_NORMS})"), "normalization"),
    (re.compile(r"(max|avg|adaptive_max|adaptive_avg)_pool"), "pooling"),
    (re.compile(r"CatArrayBatchedCopy"), "copy"),
    (re.compile(r"nll_loss|cross_entropy"), "loss"),
)
_FUNCTOR_SKIP = frozenset({
    "AUnaryFunctor", "BUnaryFunctor", "BinaryFunctor", "gpu_kernel_impl_nocast",
    "gpu_kernel_impl", "array", "TensorListMetadata", "TensorListScalarListMetadata",
    "FusedOptimizerTensorListMetadata", "TrivialOffsetCalculator", "OffsetCalculator",
    "LoadWithCast", "StoreWithCast", "LoadWithoutCast", "StoreWithoutCast", "int", "void",
})  # fmt: skip
_IDENT_CALL = re.compile(r"\b([A-Za-z_]\w*(?:::\w+)*)(?=[<(])")
_ATEN_ARGS = re.compile(r"Functor|OffsetCalculator|at::|c10::|TensorList\w*Metadata|array<char")
# Loops.cuh: AUnaryFunctor/BUnaryFunctor hold a CPU scalar operand, BinaryFunctor two tensors;
# torchgen/dest/ufunc.py: CUDAFunctorOnSelf_<op>/OnOther_<op> hold the other operand as a scalar.
_SCALAR_WRAPPER = re.compile(r"\b[AB]UnaryFunctor<")
_SCALAR_FUNCTOR = re.compile(r"CUDAFunctorOn(Self|Other)_\w+|\w*_scalar|\w*Scalar(List)?Functor")
_TENSOR_PAIR = re.compile(r"\bBinaryFunctor<")
_COPY_OPS = re.compile(r"\w*copy_kernel_cuda")
_OPTIMIZER_OPS = re.compile(r"\w*(Adam|Adagrad|Sgd)")
_REDUCE_OP = re.compile(r"\b(\w+(?:Ops|_functor))\b")
_SUFFIX_FORMATS = ("channels_last", "nhwc", "nchw")


def _pytorch(name: str, head: str) -> KernelFacts | None:
    parts = head.split("::")
    base = parts[-1]
    args = name[name.find(base) + len(base) :][:4096]
    args = _ANON.sub("", args) if "unnamed>" in args or "anonymous" in args else args
    aten = parts[0] in ("at", "native", "c10", "torch") and len(parts) > 1
    # ncu sometimes prints these without namespaces; PyTorch's softmax kernels live in an
    # anonymous namespace (PersistentSoftmax.cuh).
    bare = len(parts) == 1 and (
        (base in _ELEMENTWISE and _ATEN_ARGS.search(args) is not None)
        or base in ("softmax_warp_forward", "softmax_warp_backward")
    )
    if not (aten or bare):
        return None
    if base in _ELEMENTWISE:
        return _pytorch_elementwise(base, args)
    kind = next((k for rx, k in _ATEN_KINDS if rx.match(base)), None)
    op = base
    if kind == "reduction" and (r := _REDUCE_OP.search(args)):
        op = r[1]
    elif kind == "softmax" and "LogSoftMax" in args:
        op = f"{base} (log_softmax)"
    memory = next((f for f in _SUFFIX_FORMATS if base.endswith(f) or f"_{f}_" in base), None)
    return KernelFacts(library="pytorch", scheme="aten", kind=kind, op=op, memory_layout=memory)


def _callees(args: str) -> list[str]:
    """The first two functors or functions in template arguments: `at::native::MulFunctor<float>`
    gives `MulFunctor`, `std::multiplies<float>` gives `std::multiplies`; wrappers are skipped."""
    out: list[str] = []
    for m in _IDENT_CALL.finditer(args):
        last = m[1].rsplit("::", 1)[-1]
        if last in _FUNCTOR_SKIP or last.startswith("operator"):
            continue
        out.append(f"std::{last}" if m[1].startswith("std::") else last)
        if len(out) == 2:
            break
    return out


def _pytorch_elementwise(base: str, args: str) -> KernelFacts:
    callees = _callees(args)
    functor = callees[0] if callees else None
    scalar: bool | None = None
    if _SCALAR_WRAPPER.search(args) or (functor and _SCALAR_FUNCTOR.fullmatch(functor)):
        scalar = True
    elif _TENSOR_PAIR.search(args) or (functor or "").startswith("CUDAFunctor_"):
        scalar = False
    kind = "elementwise"
    if functor and _COPY_OPS.fullmatch(functor):
        kind = "copy"
    elif functor and _OPTIMIZER_OPS.match(functor):
        kind = "optimizer"
    op = functor or base
    if base == "multi_tensor_apply_kernel" and len(callees) == 2:
        op = f"{functor}({callees[1]})"
    return KernelFacts(library="pytorch", scheme="aten", kind=kind, op=op, scalar_operand=scalar)


# --- entry points -------------------------------------------------------------------------------
_SCHEMES: tuple[Callable[[str, str], KernelFacts | None], ...] = (
    _nvjet, _xmma, _cudnn_generated, _cublas_legacy, _triton, _nccl, _cutlass_name,
    _cutlass_template, _cublaslt_cudnn, _convolve_sgemm, _flash, _cub, _pytorch,
)  # fmt: skip


def parse_kernel_name(name: str) -> KernelFacts:
    """The facts a demangled or plain kernel name states; every field None when it states none."""
    if not isinstance(name, str) or not name:
        return EMPTY
    return _parse(name[:_MAX_NAME].strip())


@functools.lru_cache(maxsize=8192)
def _parse(name: str) -> KernelFacts:
    head = _head(name)
    for scheme in _SCHEMES:
        try:
            facts = scheme(name, head)
        except (ValueError, IndexError, KeyError, TypeError):  # a name a scheme half-matches
            facts = None
        if facts is not None:
            return facts
    return EMPTY


# Tensor-core generations: a kernel built for an older one than the device's lacks the device's
# own matrix instructions (mma.sync m16n8k16 from sm_80, wgmma on sm_90, tcgen05 on sm_100).
_GENERATION = {70: 70, 72: 70, 75: 75, 80: 80, 86: 80, 87: 80, 89: 80, 90: 90, 100: 100,
               101: 100, 103: 100}  # fmt: skip
_MATRIX_KINDS = frozenset({"gemm", "conv", "conv-fprop", "conv-dgrad", "conv-wgrad"})


def fallback_reasons(facts: KernelFacts, device_cc: int) -> list[str]:
    """Why a GEMM/convolution kernel is a fallback on a device of compute capability `device_cc`
    (90 for sm_90): built for an older tensor-core generation, or aligned below 16 bytes."""
    if facts.kind not in _MATRIX_KINDS:
        return []
    reasons: list[str] = []
    kernel_gen, device_gen = _GENERATION.get(facts.arch or 0), _GENERATION.get(device_cc)
    if kernel_gen and device_gen and kernel_gen < device_gen:
        reasons.append(f"built for sm_{facts.arch}, older than this sm_{device_cc} GPU")
    in_type = facts.precision.inputs if facts.precision else None
    bits = _BITS.get(in_type or "")
    if facts.alignment and bits:
        need = 128 // bits
        low = [f"{_operand(o)} {v}" for o, v in facts.alignment.operands if v < need]
        if low:
            reasons.append(f"aligned to {', '.join(low)} element(s); {in_type} needs {need}")
    return reasons


def _operand(name: str) -> str:
    return "A/B" if name == "ab" else name.upper()


_LIBRARY_LABELS = {"cublas": "cuBLAS", "cublaslt": "cuBLASLt", "cutlass": "CUTLASS",
                   "cudnn": "cuDNN", "triton": "Triton", "pytorch": "PyTorch", "nccl": "NCCL",
                   "cub": "CUB", "thrust": "Thrust",
                   "flash-attention": "FlashAttention"}  # fmt: skip


def _x(dims: tuple[int, ...]) -> str:
    return "×".join(str(d) for d in dims)


def describe(facts: KernelFacts) -> list[tuple[str, str]]:
    """Label/value pairs for a kernel card, in display order; only what the name states."""
    rows: list[tuple[str, str]] = []
    if facts.library:
        rows.append(("Library", _LIBRARY_LABELS.get(facts.library, facts.library)))
    if facts.kind:
        rows.append(("Kind", facts.kind))
    if facts.op:
        rows.append(("Operation", facts.op + (", scalar operand" if facts.scalar_operand else "")))
    if facts.arch:
        rows.append(("Built for", f"sm_{facts.arch}"))
    if facts.tensor_core is not None:
        inst = f" ({facts.instruction_shape})" if facts.instruction_shape else ""
        rows.append(("Tensor cores", ("yes" if facts.tensor_core else "no") + inst))
    if facts.precision:
        rows.append(("Precision", _describe_precision(facts.precision)))
    if facts.tile:
        stages = f", {facts.stages} stages" if facts.stages else ""
        rows.append(("Tile", _x(facts.tile) + stages))
    dims = (("Cluster", facts.cluster), ("Warps", facts.warps), ("Warpgroups", facts.warpgroups))
    rows.extend((label, _x(d)) for label, d in dims if d)
    if facts.layout:
        norm = ", ".join(f"{o} {v}" for o, v in facts.operand_layouts or ())
        rows.append(("Layout", facts.layout + (f" ({norm})" if norm else "")))
    if facts.memory_layout:
        rows.append(("Memory format", facts.memory_layout))
    if facts.alignment:
        per = ", ".join(f"{_operand(o)} {v}" for o, v in facts.alignment.operands)
        rows.append(("Alignment", f"{per} element(s)"))
    rows.extend((label, v) for label, v in (("Split-K", facts.split_k),
                                            ("Stream-K", facts.stream_k)) if v)  # fmt: skip
    if facts.epilogue:
        rows.append(("Epilogue", ", ".join(facts.epilogue)))
    return rows


def _describe_precision(p: Precision) -> str:
    parts = [f"{v} {label}" for label, v in (("in", p.inputs), ("accumulate", p.accumulate),
                                             ("out", p.output)) if v]  # fmt: skip
    return f"{', '.join(parts)} ({p.printed})" if parts else p.printed


__all__ = [
    "EMPTY",
    "Alignment",
    "KernelFacts",
    "Precision",
    "describe",
    "fallback_reasons",
    "parse_kernel_name",
]
