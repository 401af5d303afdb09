"""Dense tensor-core peaks per compute capability and precision, and ncu's tensor-op counters.

The roofline needs a tensor roof per precision. A peak is

    dense ops per clock per SM (this table) x SM count x SM clock

and nsdiag uses the SM clock ncu measured while the kernel ran
(`sm__cycles_elapsed.avg.per_second`), not a datasheet boost clock: under heavy tensor load the
clock drops well below boost (1.49-1.61 GHz for cuBLAS GEMMs on the H200, against 1.83 GHz in the
datasheet), and a roof at the boost clock would call a kernel at 96% of what the silicon can do
at its own clock "78%".

Operations count as ncu counts them: a multiply-add is 2 (FLOPs for floating point, OPs for
integers). "Dense" means without 2:4 structured sparsity, which doubles the effective rate and is
never used for a dense roof. fp16 and bf16 are with fp32 accumulation; where fp16 accumulation is
faster (GeForce parts), see `PART_VARIANTS`.

Each table cell has a `Source` in `TENSOR_PEAK_SOURCES`: the document, its URL, and how the
per-SM rate follows from the published figure (datasheet TFLOP/s / (SMs x the clock that figure
assumes)). The sm_90 row is also exactly what ncu reports as the dense per-SM peak on an H200
(`tests/test_tensor_peaks.py`). `docs/tensor-roofs.md` has the table, the sources and the cells
left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

CC = tuple[int, int]

#: Precisions of the table, in display order. fp8 covers e4m3 and e5m2 (same rate on every
#: arch); fp4 is e2m1 (NVFP4/MXFP4) on the fp4 path of Blackwell.
PRECISIONS: tuple[str, ...] = ("fp16", "bf16", "tf32", "fp8", "int8", "fp4", "fp64")

_ALIASES: dict[str, str] = {
    "fp16": "fp16",
    "f16": "fp16",
    "half": "fp16",
    "float16": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "tf32": "tf32",
    "tfloat32": "tf32",
    "fp8": "fp8",
    "f8": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int8": "int8",
    "s8": "int8",
    "u8": "int8",
    "fp4": "fp4",
    "e2m1": "fp4",
    "fp4_e2m1": "fp4",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
    "fp64": "fp64",
    "f64": "fp64",
    "double": "fp64",
    "float64": "fp64",
}


@dataclass(frozen=True)
class Source:
    """Where a per-SM rate comes from.

    `derivation` shows the arithmetic from the published figure to ops/clk/SM and names the
    clock the figure assumes; `check` is an independent confirmation (an ncu peak, another
    published table), empty where there is none.
    """

    title: str
    url: str
    derivation: str
    check: str = ""


# --- Sources --------------------------------------------------------------------------------

_A100_WP = (
    "NVIDIA A100 Tensor Core GPU Architecture (whitepaper), table 'Comparison of NVIDIA Data "
    "Center GPUs', A100 SXM4 column: 108 SMs, GPU Boost Clock 1410 MHz"
)
_A100_URL = (
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
    "nvidia-ampere-architecture-whitepaper.pdf"
)
_PYTORCH_LIMITS = (
    "PyTorch torch/cuda/_device_limits.py (GPULimits.get_fma_per_cycle_per_sm_tensor_cores) "
    "lists the same rate in FMA/clk/SM (x2 = ops)"
)
_GA102_WP = (
    "NVIDIA Ampere GA102 GPU Architecture (whitepaper v2.0, with RTX A6000 and A40): "
    "Appendix A (GeForce RTX 3090: 82 SMs, 1695 MHz boost) and Appendix C (RTX A6000: 84 SMs, "
    "1800 MHz boost)"
)
_GA102_URL = (
    "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
)
_A40_DS = (
    "NVIDIA A40 datasheet (84 SMs, 1740 MHz boost): FP16/BF16 Tensor 149.7, TF32 74.8 TFLOPS, "
    "INT8 299.3 TOPS dense (figures as reproduced in hmc-tech.com's A40 listing)"
)
_A40_URL = "https://hmc-tech.com/gpu/nvidia-a100-vs-nvidia-a40"
_ADA_WP = (
    "NVIDIA Ada GPU Architecture (whitepaper v2.02), Appendix A, GeForce RTX 4090: 128 SMs, "
    "GPU Boost Clock 2520 MHz"
)
_ADA_URL = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_ADA_PRO_WP = (
    "NVIDIA Ada Lovelace Professional GPU Architecture (whitepaper v1.1), RTX 6000 Ada "
    "Generation: 142 SMs, 2505 MHz boost"
)
_ADA_PRO_URL = (
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/technologies/"
    "NVIDIA-ADA-GPU-PROVIZ-Architecture-Whitepaper_1.1.pdf"
)
_L40S_DS = (
    "NVIDIA L40 and L40S datasheets (AD102, 142 SMs; the FP32 figures 90.5 and 91.6 TFLOPS = "
    "18,176 cores x 2 x 2490 / 2520 MHz fix the clocks), table as reproduced by a reseller"
)
_L40S_URL = "https://www.mullet.se/product.html?product_id=355414"
_H100_WP = (
    "NVIDIA H100 Tensor Core GPU Architecture (whitepaper V1.04, 'final GPU / memory clocks and "
    "final TFLOPS'), Table 3, H100 SXM5: 132 SMs; tensor figures at 1830 MHz, FP64 at 1980 MHz"
)
_H100_URL = (
    "https://nvdam.widen.net/s/95bdhpsgrs/nvidia_h100_tensor_core_gpu_architecture_whitepaper_v1.03"
)
_H200_NCU = (
    "ncu 2025.3.1 on an H200 (132 SMs): the dense per-path peak `.sum.peak_sustained` / 132 "
    "equals this rate exactly (tests/data/tensor_peaks, tests/data/torch_cases)"
)
_B200_DS = (
    "NVIDIA GB200 NVL72 / HGX B200 specifications, per GPU (sparse figures; dense = half): "
    "FP4 20/18, FP8 10/9, INT8 10/9, FP16/BF16 5/4.5, TF32 2.5/2.2 PFLOPS; B200 has 148 SMs"
)
_B200_URL = "https://glennklockwood.com/garden/processors/B200"


def _src(title: str, url: str, derivation: str, check: str = "") -> Source:
    return Source(title=title, url=url, derivation=derivation, check=check)


#: Dense tensor ops per clock per SM, by compute capability and precision. A precision missing
#: from a row has no tensor path on that arch (or no published rate: see the doc). Rows are the
#: professional/datacenter parts; parts of the same cc with lower rates are in PART_VARIANTS.
DENSE_TENSOR_OPS_PER_SM_PER_CLOCK: dict[CC, dict[str, float]] = {
    # A100 (GA100)
    (8, 0): {"fp16": 2048, "bf16": 2048, "tf32": 1024, "int8": 4096, "fp64": 128},
    # GA10x professional/datacenter (A40, A10, RTX A6000); GeForce fp32-accumulate is half
    (8, 6): {"fp16": 1024, "bf16": 1024, "tf32": 512, "int8": 2048},
    # Ada (L40S, L4, RTX 6000 Ada); GeForce fp32-accumulate and the L40 are half
    (8, 9): {"fp16": 1024, "bf16": 1024, "tf32": 512, "fp8": 2048, "int8": 2048},
    # Hopper (H100, H200, H800, GH200): wgmma rates; legacy mma.sync reaches 2/3 of these
    (9, 0): {"fp16": 4096, "bf16": 4096, "tf32": 2048, "fp8": 8192, "int8": 8192, "fp64": 256},
    # Blackwell datacenter (B200, GB200): tcgen05 rates
    (10, 0): {
        "fp16": 8192,
        "bf16": 8192,
        "tf32": 4096,
        "fp8": 16384,
        "int8": 16384,
        "fp4": 32768,
    },
}

#: One Source per table cell.
TENSOR_PEAK_SOURCES: dict[CC, dict[str, Source]] = {
    (8, 0): {
        "fp16": _src(
            _A100_WP,
            _A100_URL,
            "Peak FP16 Tensor TFLOPS (FP16 or FP32 accumulate) 312 / (108 SMs x 1410 MHz boost)"
            " = 2049 -> 2048 ops/clk/SM",
            _PYTORCH_LIMITS + " (fp16_80 = 1024)",
        ),
        "bf16": _src(
            _A100_WP,
            _A100_URL,
            "Peak BF16 Tensor TFLOPS 312 / (108 x 1410 MHz) = 2049 -> 2048",
            _PYTORCH_LIMITS + " (bf16 uses fp16_80 = 1024)",
        ),
        "tf32": _src(
            _A100_WP,
            _A100_URL,
            "Peak TF32 Tensor TFLOPS 156 / (108 x 1410 MHz) = 1024.5 -> 1024",
            _PYTORCH_LIMITS + " (fp32_80 = 512)",
        ),
        "int8": _src(
            _A100_WP,
            _A100_URL,
            "Peak INT8 Tensor TOPS 624 / (108 x 1410 MHz) = 4098 -> 4096",
            _PYTORCH_LIMITS + " (int8_80 = 2048)",
        ),
        "fp64": _src(
            _A100_WP,
            _A100_URL,
            "Peak FP64 Tensor TFLOPS 19.5 / (108 x 1410 MHz) = 128.1 -> 128 (DMMA)",
            _PYTORCH_LIMITS + " (fp64_80 = 64)",
        ),
    },
    (8, 6): {
        "fp16": _src(
            _GA102_WP,
            _GA102_URL,
            "RTX A6000 Peak FP16 Tensor TFLOPS 154.8 with FP16 and with FP32 accumulate / "
            "(84 SMs x 1800 MHz) = 1023.8 -> 1024; A40 149.7 / (84 x 1740 MHz) = 1024.2",
            "GeForce RTX 3090: 142 (FP16 accumulate) / (82 x 1695 MHz) = 1021.7 -> 1024, the "
            "same rate; its FP32-accumulate 71 is half (PART_VARIANTS)",
        ),
        "bf16": _src(
            _A40_DS,
            _A40_URL,
            "A40 BF16 Tensor 149.7 / (84 SMs x 1740 MHz) = 1024.2 -> 1024",
            "GA102 whitepaper: BF16 runs at the FP16 rate with FP32 accumulate (RTX 3090: 71 = "
            "its FP32-accumulate FP16 figure)",
        ),
        "tf32": _src(
            _A40_DS,
            _A40_URL,
            "A40 TF32 Tensor 74.8 / (84 SMs x 1740 MHz) = 511.8 -> 512",
            "half the FP16 rate, as on every Ampere part (A100: 156 vs 312)",
        ),
        "int8": _src(
            _A40_DS,
            _A40_URL,
            "A40 INT8 Tensor 299.3 TOPS / (84 SMs x 1740 MHz) = 2047.8 -> 2048",
            "GA102 whitepaper, RTX 3090 Peak INT8 Tensor TOPS 284 / (82 x 1695 MHz) = 2043 -> "
            "2048 (no GeForce reduction for INT8)",
        ),
    },
    (8, 9): {
        "fp16": _src(
            _ADA_PRO_WP,
            _ADA_PRO_URL,
            "RTX 6000 Ada Peak FP16 Tensor TFLOPS 364.2 (FP16 and FP32 accumulate) / (142 SMs x "
            "2505 MHz) = 1023.9 -> 1024",
            "L40S datasheet FP16 Tensor 362.05 / (142 x 2490 MHz) = 1024.0; RTX 4090 with FP16 "
            "accumulate 330.3 / (128 x 2520 MHz) = 1024.0 (Ada whitepaper)",
        ),
        "bf16": _src(
            _L40S_DS,
            _L40S_URL,
            "L40S BFLOAT16 Tensor 362.05 / (142 SMs x 2490 MHz) = 1024.0 -> 1024",
            "RTX 4090 BF16 (FP32 accumulate) 165.2 is half: PART_VARIANTS",
        ),
        "tf32": _src(
            _L40S_DS,
            _L40S_URL,
            "L40S TF32 Tensor 183 / (142 SMs x 2520 MHz) = 511.4 -> 512",
        ),
        "fp8": _src(
            _L40S_DS,
            _L40S_URL,
            "L40S FP8 Tensor 733 / (142 SMs x 2520 MHz) = 2048.4 -> 2048",
            "RTX 4090 Peak FP8 Tensor TFLOPS with FP16 Accumulate 660.6 / (128 x 2520 MHz) = "
            "2048.0 (Ada whitepaper v2.02; its FP32-accumulate figure, corrected to 330.3 in "
            "v2.02, is half)",
        ),
        "int8": _src(
            _L40S_DS,
            _L40S_URL,
            "L40S INT8 Tensor 733 TOPS / (142 SMs x 2520 MHz) = 2048.4 -> 2048",
            "RTX 4090 Peak INT8 Tensor TOPS 660.6 / (128 x 2520 MHz) = 2048.0 (Ada whitepaper)",
        ),
    },
    (9, 0): {
        "fp16": _src(
            _H100_WP,
            _H100_URL,
            "Peak FP16 Tensor TFLOPS with FP32 Accumulate 989.4 / (132 SMs x 1830 MHz) = 4095.9 "
            "-> 4096",
            _H200_NCU
            + ": sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained = 540672",
        ),
        "bf16": _src(
            _H100_WP,
            _H100_URL,
            "Peak BF16 Tensor TFLOPS with FP32 Accumulate 989.4 / (132 x 1830 MHz) = 4096",
            _H200_NCU + ": ..._hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained = 540672",
        ),
        "tf32": _src(
            _H100_WP,
            _H100_URL,
            "Peak TF32 Tensor TFLOPS 494.7 / (132 x 1830 MHz) = 2048",
            _H200_NCU + ": ..._hgmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained = 270336",
        ),
        "fp8": _src(
            _H100_WP,
            _H100_URL,
            "Peak FP8 Tensor TFLOPS 1978.9 / (132 x 1830 MHz) = 8192",
            _H200_NCU + ": sm__ops_path_tensor_src_fp8_sparsity_off.sum.peak_sustained = 1081344",
        ),
        "int8": _src(
            _H100_WP,
            _H100_URL,
            "Peak INT8 Tensor TOPS 1978.9 / (132 x 1830 MHz) = 8192",
            _H200_NCU + ": ..._igmma_src_int8_sparsity_off.sum.peak_sustained = 1081344",
        ),
        "fp64": _src(
            _H100_WP,
            _H100_URL,
            "Peak FP64 Tensor TFLOPS 66.9 / (132 x 1980 MHz, the FP64 clock) = 256.0 (DMMA); at "
            "1830 MHz it would be 277, not a rate the hardware has",
            _H200_NCU + ": sm__ops_path_tensor_src_fp64.sum.peak_sustained = 33792",
        ),
    },
    (10, 0): {
        "fp16": _src(
            _B200_DS,
            _B200_URL,
            "dense FP16 2.5 PFLOPS (GB200) / (148 SMs x 8192) implies a 2.06 GHz clock, 2.25 "
            "(HGX B200) implies 1.86 GHz; no clock is published, so the rate is from the check",
            _PYTORCH_LIMITS + " (fp16_100 = 4096); 2x the sm_90 rate per SM per clock",
        ),
        "bf16": _src(
            _B200_DS,
            _B200_URL,
            "BF16 = FP16 in every datasheet row (2.5 / 2.25 PFLOPS dense)",
            _PYTORCH_LIMITS + " (bf16 uses fp16_100 = 4096)",
        ),
        "tf32": _src(
            _B200_DS,
            _B200_URL,
            "dense TF32 1.25 PFLOPS (GB200) = half of FP16, so 4096 at the same implied clock",
            _PYTORCH_LIMITS + " (fp32_100 = 2048)",
        ),
        "fp8": _src(
            _B200_DS,
            _B200_URL,
            "dense FP8 5 PFLOPS (GB200) = 2x FP16, so 16384 at the same implied clock",
            _PYTORCH_LIMITS + " (fp8_100 = 8192)",
        ),
        "int8": _src(
            _B200_DS,
            _B200_URL,
            "dense INT8 5 POPS (GB200) = FP8, so 16384",
            _PYTORCH_LIMITS + " (int8_100 = 8192)",
        ),
        "fp4": _src(
            _B200_DS,
            _B200_URL,
            "dense FP4 10 PFLOPS (GB200) = 2x FP8, so 32768 at the same implied clock (the fp4 "
            "path, tcgen05 kind::mxf4/mxf4nvf4; fp4 operands of kind::f8f6f4 run at the FP8 rate)",
        ),
    },
}


@dataclass(frozen=True)
class PartVariant:
    """Parts of a compute capability whose tensor rates are lower than the table's row.

    `pattern` is a regular expression searched (case-insensitively) in the device name ncu
    reports (`device__attribute_display_name`). The lower fp16 and fp8 rates are for fp32
    accumulation: with an fp16 accumulator these parts run at the table's rate (published for
    the GeForce parts; for the L40, whose datasheet does not say, the higher rate keeps a kernel
    from being drawn above its roof).
    """

    cc: CC
    pattern: str
    description: str
    ops_per_sm_per_clock: Mapping[str, float]
    source: Source
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.pattern, re.IGNORECASE))

    def matches(self, device_name: str) -> bool:
        return self._regex.search(device_name) is not None


PART_VARIANTS: tuple[PartVariant, ...] = (
    PartVariant(
        cc=(8, 6),
        pattern=r"\bGeForce\b",
        description="GeForce RTX 30xx: fp16/bf16 with fp32 accumulation and tf32 at half rate",
        ops_per_sm_per_clock={"fp16": 512, "bf16": 512, "tf32": 256},
        source=_src(
            _GA102_WP,
            _GA102_URL,
            "RTX 3090 (82 SMs, 1695 MHz): FP16 with FP32 accumulate 71 -> 510.8 -> 512, BF16 71 "
            "-> 512, TF32 35.6 -> 256; FP16 with FP16 accumulate 142 -> 1024 and INT8 284 -> "
            "2048 are the table's rates",
        ),
    ),
    PartVariant(
        cc=(8, 9),
        pattern=r"\bGeForce\b",
        description="GeForce RTX 40xx: fp16/bf16/fp8 with fp32 accumulation and tf32 at half rate",
        ops_per_sm_per_clock={"fp16": 512, "bf16": 512, "tf32": 256, "fp8": 1024},
        source=_src(
            _ADA_WP,
            _ADA_URL,
            "RTX 4090 (128 SMs, 2520 MHz): FP16 and BF16 with FP32 accumulate 165.2 -> 512.1, "
            "TF32 82.6 -> 256.1, FP8 with FP32 accumulate 330.3 -> 1024 (v2.02 correction); "
            "FP16/FP8 with FP16 accumulate (330.3 / 660.6) and INT8 660.6 are the table's rates",
        ),
    ),
    PartVariant(
        cc=(8, 9),
        pattern=r"\bL40\b(?!S)",
        description="L40 (not L40S): every tensor precision at half the L40S rate",
        ops_per_sm_per_clock={"fp16": 512, "bf16": 512, "tf32": 256, "fp8": 1024, "int8": 1024},
        source=_src(
            _L40S_DS,
            _L40S_URL,
            "L40 (142 SMs, 2490 MHz): FP16/BF16 181.05 -> 512.1, TF32 90.5 -> 256, FP8 362 -> "
            "1024, INT8 362 TOPS -> 1024; the datasheet does not split by accumulator, so fp16 "
            "accumulation is given the table's (higher) rate",
        ),
    ),
)


# --- Lookups ----------------------------------------------------------------------------------

_CC_TEXT = re.compile(r"^(?:sm_?|compute_?)?(\d+)(?:\.(\d+))?[a-z]?$", re.IGNORECASE)


def parse_cc(cc: CC | str) -> CC | None:
    """(major, minor) from (9, 0), "9.0", "90", "sm_90", "sm_90a", "compute_100", "10.0"."""
    if isinstance(cc, tuple):
        if len(cc) == 2 and all(isinstance(v, int) and v >= 0 for v in cc):
            return (cc[0], cc[1])
        return None
    match = _CC_TEXT.match(cc.strip())
    if match is None:
        return None
    major, minor = match.group(1), match.group(2)
    if minor is not None:
        return (int(major), int(minor))
    if len(major) == 2:  # "90" -> 9.0, "86" -> 8.6
        return (int(major[0]), int(major[1]))
    if len(major) == 3:  # "100" -> 10.0, "120" -> 12.0
        return (int(major[:2]), int(major[2]))
    return None


def normalize_precision(precision: str) -> str:
    """The table's name for a precision ("bfloat16" -> "bf16", "e4m3" -> "fp8").

    Raises ValueError for a name nsdiag does not know, so that a typo is not read as "no tensor
    path".
    """
    key = _ALIASES.get(precision.strip().lower())
    if key is None:
        raise ValueError(f"unknown tensor precision {precision!r}; known: {', '.join(PRECISIONS)}")
    return key


def precisions_for(cc: CC | str) -> tuple[str, ...]:
    """The precisions with a dense tensor rate on this arch, in PRECISIONS order."""
    key = parse_cc(cc)
    row = DENSE_TENSOR_OPS_PER_SM_PER_CLOCK.get(key) if key is not None else None
    if row is None:
        return ()
    return tuple(p for p in PRECISIONS if p in row)


def part_variant(cc: CC | str, device_name: str | None) -> PartVariant | None:
    """The PartVariant that matches this device, if any."""
    key = parse_cc(cc)
    if key is None or not device_name:
        return None
    for variant in PART_VARIANTS:
        if variant.cc == key and variant.matches(device_name):
            return variant
    return None


def dense_ops_per_sm_per_clock(
    cc: CC | str,
    precision: str,
    *,
    device_name: str | None = None,
    accumulate: str = "fp32",
) -> float | None:
    """Dense tensor ops per clock per SM, or None where there is no tensor path for it.

    Without `device_name` this is the table's (professional/datacenter) rate. With it, a part
    listed in PART_VARIANTS gets its lower rate, except that `accumulate="fp16"` (fp16 or fp8
    inputs with an fp16 accumulator) keeps the table's rate: the reductions are for fp32
    accumulation.
    """
    key = parse_cc(cc)
    name = normalize_precision(precision)
    if accumulate not in ("fp32", "fp16"):
        raise ValueError(f"accumulate must be 'fp32' or 'fp16', not {accumulate!r}")
    row = DENSE_TENSOR_OPS_PER_SM_PER_CLOCK.get(key) if key is not None else None
    if row is None or name not in row:
        return None
    rate = row[name]
    variant = part_variant(cc, device_name)
    fp16_accumulator = accumulate == "fp16" and name in ("fp16", "fp8")
    if variant is not None and name in variant.ops_per_sm_per_clock and not fp16_accumulator:
        rate = variant.ops_per_sm_per_clock[name]
    return rate


def dense_tensor_peak(
    cc: CC | str,
    precision: str,
    sm_count: float,
    sm_clock_hz: float,
    *,
    device_name: str | None = None,
    accumulate: str = "fp32",
) -> float | None:
    """Dense tensor peak in ops/s: ops/clk/SM x SM count x SM clock.

    Pass the SM clock ncu measured during the kernel (`sm__cycles_elapsed.avg.per_second`), not
    a datasheet boost clock. Returns None when the compute capability is unknown, the arch has
    no tensor path for the precision, or the SM count or clock is missing (not a positive finite
    number). `device_name` and `accumulate` select a lower-rate part: see
    `dense_ops_per_sm_per_clock`.
    """
    rate = dense_ops_per_sm_per_clock(cc, precision, device_name=device_name, accumulate=accumulate)
    if rate is None or not _positive(sm_count) or not _positive(sm_clock_hz):
        return None
    return rate * sm_count * sm_clock_hz


def _positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


# --- ncu counters -----------------------------------------------------------------------------

_P = "sm__ops_path_tensor_"

#: Per precision, alternative sets of ncu `.sum` metrics, preferred first. Each set counts every
#: tensor operation of the precision exactly once (all instruction paths, both accumulators,
#: dense and sparse) on the GPUs where those names exist; use the first set of which any metric
#: was collected and add up its metrics. Never add metrics of two different sets: the aggregate
#: `sm__ops_path_tensor_src_fp16` already contains the per-path `..._op_hgmma_src_fp16_*`.
NCU_TENSOR_OPS_GROUPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "fp16": (
        (f"{_P}src_fp16.sum",),  # sm_90 (verified)
        (f"{_P}src_fp16_dst_fp16.sum", f"{_P}src_fp16_dst_fp32.sum"),  # sm_80/86/89
        (
            f"{_P}src_fp16_dst_fp16_sparsity_off.sum",
            f"{_P}src_fp16_dst_fp16_sparsity_on.sum",
            f"{_P}src_fp16_dst_fp32_sparsity_off.sum",
            f"{_P}src_fp16_dst_fp32_sparsity_on.sum",
        ),  # sm_89 with newer ncu
        (
            f"{_P}op_hgmma_src_fp16_sparsity_off.sum",
            f"{_P}op_hgmma_src_fp16_sparsity_on.sum",
            f"{_P}op_hmma_src_fp16_dst_fp16_sparsity_off.sum",
            f"{_P}op_hmma_src_fp16_dst_fp16_sparsity_on.sum",
            f"{_P}op_hmma_src_fp16_dst_fp32_sparsity_off.sum",
            f"{_P}op_hmma_src_fp16_dst_fp32_sparsity_on.sum",
        ),  # sm_90 per instruction path (verified)
        (f"{_P}op_utchmma_src_fp16_dst_fp32_sparsity_off.sum",),  # sm_100 tcgen05, dense
    ),
    "bf16": (
        (f"{_P}src_bf16_dst_fp32.sum",),  # sm_80..sm_90 (verified on sm_90)
        (f"{_P}src_bf16_dst_fp32_sparsity_off.sum", f"{_P}src_bf16_dst_fp32_sparsity_on.sum"),
        (
            f"{_P}op_hgmma_src_bf16_dst_fp32_sparsity_off.sum",
            f"{_P}op_hgmma_src_bf16_dst_fp32_sparsity_on.sum",
            f"{_P}op_hmma_src_bf16_dst_fp32_sparsity_off.sum",
            f"{_P}op_hmma_src_bf16_dst_fp32_sparsity_on.sum",
        ),  # sm_90 per instruction path (verified)
        (f"{_P}op_utchmma_src_bf16_dst_fp32_sparsity_off.sum",),  # sm_100 tcgen05, dense
    ),
    "tf32": (
        (f"{_P}src_tf32_dst_fp32.sum",),  # sm_80..sm_90 (verified on sm_90)
        (f"{_P}src_tf32_dst_fp32_sparsity_off.sum", f"{_P}src_tf32_dst_fp32_sparsity_on.sum"),
        (
            f"{_P}op_hgmma_src_tf32_dst_fp32_sparsity_off.sum",
            f"{_P}op_hgmma_src_tf32_dst_fp32_sparsity_on.sum",
            f"{_P}op_hmma_src_tf32_dst_fp32_sparsity_off.sum",
            f"{_P}op_hmma_src_tf32_dst_fp32_sparsity_on.sum",
        ),  # sm_90 per instruction path (verified)
    ),
    "fp8": (
        (f"{_P}src_fp8_sparsity_off.sum", f"{_P}src_fp8_sparsity_on.sum"),  # sm_90 (verified)
        (f"{_P}src_fp8.sum",),  # sm_89
        (f"{_P}src_fp8_dst_fp16.sum", f"{_P}src_fp8_dst_fp32.sum"),
        # sm_100: kind::f8f6f4 runs fp8, fp6 and fp4 operands at the fp8 rate, so its ops are
        # placed under the fp8 roof
        (
            f"{_P}op_utcqmma_src_fp4_fp6_fp8_dst_fp16.sum",
            f"{_P}op_utcqmma_src_fp4_fp6_fp8_dst_fp32.sum",
        ),
        (f"{_P}op_utcqmma_src_fp4_fp6_fp8_dst_fp32_sparsity_off.sum",),
    ),
    "int8": (
        (f"{_P}src_int8.sum",),  # sm_80..sm_90 (verified on sm_90)
        (
            f"{_P}op_igmma_src_int8_sparsity_off.sum",
            f"{_P}op_igmma_src_int8_sparsity_on.sum",
            f"{_P}op_imma_src_int8_sparsity_off.sum",
            f"{_P}op_imma_src_int8_sparsity_on.sum",
        ),  # sm_90 per instruction path (verified)
        (f"{_P}op_utcimma_src_int8_sparsity_off.sum",),  # sm_100 tcgen05, dense
    ),
    "fp4": ((f"{_P}op_utcomma_src_fp4_dst_fp32.sum",),),  # sm_100 kind::mxf4(nvf4)
    "fp64": (
        (f"{_P}src_fp64.sum",),  # sm_80, sm_90 (verified on sm_90)
        (f"{_P}src_fp64_dst_fp64.sum",),
    ),
}

#: Precision -> the ncu `.sum` metric names that count its operations, preferred first (the
#: flattened NCU_TENSOR_OPS_GROUPS). Read them with `tensor_ops`, which takes one set only and
#: so never counts an operation twice.
NCU_TENSOR_OPS_BY_PRECISION: dict[str, tuple[str, ...]] = {
    precision: tuple(name for group in groups for name in group)
    for precision, groups in NCU_TENSOR_OPS_GROUPS.items()
}

#: The names above that were seen in ncu output on the H200 (cc 9.0, ncu 2025.3.1). The others
#: come from public ncu command lines for other GPUs and are not verified here.
NCU_TENSOR_METRICS_VERIFIED_SM90: frozenset[str] = frozenset(
    {
        f"{_P}src_fp16.sum",
        f"{_P}src_bf16_dst_fp32.sum",
        f"{_P}src_tf32_dst_fp32.sum",
        f"{_P}src_fp8_sparsity_off.sum",
        f"{_P}src_fp8_sparsity_on.sum",
        f"{_P}src_int8.sum",
        f"{_P}src_fp64.sum",
    }
    | {
        f"{_P}op_{path}_src_{src}_sparsity_{state}.sum"
        for path, src in (
            ("hgmma", "fp16"),
            ("hgmma", "bf16_dst_fp32"),
            ("hgmma", "tf32_dst_fp32"),
            ("hmma", "fp16_dst_fp16"),
            ("hmma", "fp16_dst_fp32"),
            ("hmma", "bf16_dst_fp32"),
            ("hmma", "tf32_dst_fp32"),
            ("igmma", "int8"),
            ("imma", "int8"),
        )
        for state in ("off", "on")
    }
)

#: sm_90: the ncu metric whose `.sum.peak_sustained` / SM count is the dense rate of the table
#: (the wgmma path without sparsity; fp8 and fp64 have per-precision dense metrics). The
#: per-precision aggregates (`src_fp16`, `src_bf16_dst_fp32`, `src_tf32_dst_fp32`, `src_int8`)
#: report the sparse wgmma rate as their peak, twice the dense one.
NCU_DENSE_PEAK_METRICS_SM90: dict[str, str] = {
    "fp16": f"{_P}op_hgmma_src_fp16_sparsity_off.sum",
    "bf16": f"{_P}op_hgmma_src_bf16_dst_fp32_sparsity_off.sum",
    "tf32": f"{_P}op_hgmma_src_tf32_dst_fp32_sparsity_off.sum",
    "fp8": f"{_P}src_fp8_sparsity_off.sum",
    "int8": f"{_P}op_igmma_src_int8_sparsity_off.sum",
    "fp64": f"{_P}src_fp64.sum",
}


def _present(metrics: Mapping[str, float | None], name: str) -> float | None:
    value = metrics.get(name)
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def tensor_ops(metrics: Mapping[str, float | None], precision: str) -> float | None:
    """Tensor operations of one precision from ncu metrics (name -> value), or None if none of
    its counters was collected. Takes the first set of NCU_TENSOR_OPS_GROUPS with a collected
    metric and adds up that set only."""
    for group in NCU_TENSOR_OPS_GROUPS[normalize_precision(precision)]:
        values = [v for v in (_present(metrics, name) for name in group) if v is not None]
        if values:
            return sum(values)
    return None


def tensor_ops_by_precision(metrics: Mapping[str, float | None]) -> dict[str, float]:
    """Every precision with a collected counter -> its tensor operations (zeros included)."""
    found: dict[str, float] = {}
    for precision in NCU_TENSOR_OPS_GROUPS:
        ops = tensor_ops(metrics, precision)
        if ops is not None:
            found[precision] = ops
    return found


def dominant_precision(metrics: Mapping[str, float | None]) -> str | None:
    """The precision with the most tensor operations, or None if no tensor op was counted: the
    roof a kernel is placed against."""
    counted = {p: ops for p, ops in tensor_ops_by_precision(metrics).items() if ops > 0}
    if not counted:
        return None
    return max(counted, key=lambda p: counted[p])
