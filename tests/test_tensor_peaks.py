"""Dense tensor-core peaks (nsdiag.model.tensor_peaks) against published figures and ncu's own
peaks recorded on the H200."""

from __future__ import annotations

import csv
import gzip
import math
import re
from pathlib import Path

import pytest

from nsdiag.model import tensor_peaks as tp
from nsdiag.model.tensor_peaks import (
    DENSE_TENSOR_OPS_PER_SM_PER_CLOCK,
    NCU_DENSE_PEAK_METRICS_SM90,
    NCU_TENSOR_METRICS_VERIFIED_SM90,
    NCU_TENSOR_OPS_BY_PRECISION,
    NCU_TENSOR_OPS_GROUPS,
    PRECISIONS,
    TENSOR_PEAK_SOURCES,
    dense_ops_per_sm_per_clock,
    dense_tensor_peak,
    dominant_precision,
    parse_cc,
    precisions_for,
    tensor_ops,
)

DATA = Path(__file__).parent / "data"
#: ncu --csv --page raw --print-units base exports recorded on the H200 (cc 9.0, 132 SMs)
H200_RECORDINGS = (
    DATA / "programs" / "gemm_shapes.raw.csv.gz",
    DATA / "torch_cases" / "raw.csv.gz",
)

T = 1e12
P = 1e15

# Published figures: (part, cc, precision, SMs, the clock the figure assumes in Hz, published
# dense ops/s, device name, accumulator). Every one must come out within 2%.
DATASHEET: list[tuple[str, str, str, int, float, float, str | None, str]] = [
    # A100 whitepaper, A100 SXM4 at its 1410 MHz boost clock
    ("A100 SXM4", "8.0", "fp16", 108, 1410e6, 312 * T, None, "fp32"),
    ("A100 SXM4", "8.0", "bf16", 108, 1410e6, 312 * T, None, "fp32"),
    ("A100 SXM4", "8.0", "tf32", 108, 1410e6, 156 * T, None, "fp32"),
    ("A100 SXM4", "8.0", "int8", 108, 1410e6, 624 * T, None, "fp32"),
    ("A100 SXM4", "8.0", "fp64", 108, 1410e6, 19.5 * T, None, "fp32"),
    # H100 whitepaper V1.04, H100 SXM5: tensor figures at 1830 MHz, FP64 at 1980 MHz
    ("H100 SXM5", "9.0", "fp16", 132, 1830e6, 989.4 * T, None, "fp32"),
    ("H100 SXM5", "9.0", "bf16", 132, 1830e6, 989.4 * T, None, "fp32"),
    ("H100 SXM5", "9.0", "tf32", 132, 1830e6, 494.7 * T, None, "fp32"),
    ("H100 SXM5", "9.0", "fp8", 132, 1830e6, 1978.9 * T, None, "fp32"),
    ("H100 SXM5", "9.0", "int8", 132, 1830e6, 1978.9 * T, None, "fp32"),
    ("H100 SXM5", "9.0", "fp64", 132, 1980e6, 66.9 * T, None, "fp32"),
    # GA102 whitepaper v2.0 (RTX A6000, RTX 3090) and the A40 datasheet
    ("RTX A6000", "8.6", "fp16", 84, 1800e6, 154.8 * T, "NVIDIA RTX A6000", "fp32"),
    ("A40", "8.6", "fp16", 84, 1740e6, 149.7 * T, "NVIDIA A40", "fp32"),
    ("A40", "8.6", "bf16", 84, 1740e6, 149.7 * T, "NVIDIA A40", "fp32"),
    ("A40", "8.6", "tf32", 84, 1740e6, 74.8 * T, "NVIDIA A40", "fp32"),
    ("A40", "8.6", "int8", 84, 1740e6, 299.3 * T, "NVIDIA A40", "fp32"),
    ("RTX 3090", "8.6", "fp16", 82, 1695e6, 71 * T, "NVIDIA GeForce RTX 3090", "fp32"),
    ("RTX 3090", "8.6", "fp16", 82, 1695e6, 142 * T, "NVIDIA GeForce RTX 3090", "fp16"),
    ("RTX 3090", "8.6", "bf16", 82, 1695e6, 71 * T, "NVIDIA GeForce RTX 3090", "fp32"),
    ("RTX 3090", "8.6", "tf32", 82, 1695e6, 35.6 * T, "NVIDIA GeForce RTX 3090", "fp32"),
    ("RTX 3090", "8.6", "int8", 82, 1695e6, 284 * T, "NVIDIA GeForce RTX 3090", "fp32"),
    # Ada whitepaper v2.02 (RTX 4090), Ada professional whitepaper (RTX 6000 Ada), L40/L40S
    ("RTX 4090", "8.9", "fp16", 128, 2520e6, 165.2 * T, "NVIDIA GeForce RTX 4090", "fp32"),
    ("RTX 4090", "8.9", "fp16", 128, 2520e6, 330.3 * T, "NVIDIA GeForce RTX 4090", "fp16"),
    ("RTX 4090", "8.9", "bf16", 128, 2520e6, 165.2 * T, "NVIDIA GeForce RTX 4090", "fp32"),
    ("RTX 4090", "8.9", "tf32", 128, 2520e6, 82.6 * T, "NVIDIA GeForce RTX 4090", "fp32"),
    ("RTX 4090", "8.9", "fp8", 128, 2520e6, 330.3 * T, "NVIDIA GeForce RTX 4090", "fp32"),
    ("RTX 4090", "8.9", "fp8", 128, 2520e6, 660.6 * T, "NVIDIA GeForce RTX 4090", "fp16"),
    ("RTX 4090", "8.9", "int8", 128, 2520e6, 660.6 * T, "NVIDIA GeForce RTX 4090", "fp32"),
    ("RTX 6000 Ada", "8.9", "fp16", 142, 2505e6, 364.2 * T, "NVIDIA RTX 6000 Ada", "fp32"),
    ("L40S", "8.9", "fp16", 142, 2490e6, 362.05 * T, "NVIDIA L40S", "fp32"),
    ("L40S", "8.9", "bf16", 142, 2490e6, 362.05 * T, "NVIDIA L40S", "fp32"),
    ("L40S", "8.9", "tf32", 142, 2520e6, 183 * T, "NVIDIA L40S", "fp32"),
    ("L40S", "8.9", "fp8", 142, 2520e6, 733 * T, "NVIDIA L40S", "fp32"),
    ("L40S", "8.9", "int8", 142, 2520e6, 733 * T, "NVIDIA L40S", "fp32"),
    ("L40", "8.9", "fp16", 142, 2490e6, 181.05 * T, "NVIDIA L40", "fp32"),
    ("L40", "8.9", "bf16", 142, 2490e6, 181.05 * T, "NVIDIA L40", "fp32"),
    ("L40", "8.9", "tf32", 142, 2490e6, 90.5 * T, "NVIDIA L40", "fp32"),
    ("L40", "8.9", "fp8", 142, 2490e6, 362 * T, "NVIDIA L40", "fp32"),
    ("L40", "8.9", "int8", 142, 2490e6, 362 * T, "NVIDIA L40", "fp32"),
]


@pytest.mark.parametrize(
    ("part", "cc", "precision", "sms", "clock", "published", "device", "accumulate"),
    DATASHEET,
    ids=[f"{c[0]}-{c[2]}-acc{c[7]}" for c in DATASHEET],
)
def test_published_figures_reproduced_within_2_percent(
    part: str,
    cc: str,
    precision: str,
    sms: int,
    clock: float,
    published: float,
    device: str | None,
    accumulate: str,
) -> None:
    peak = dense_tensor_peak(cc, precision, sms, clock, device_name=device, accumulate=accumulate)
    assert peak is not None, part
    assert peak == pytest.approx(published, rel=0.02), f"{part} {precision}: {peak / T:.1f} TOPS"


# Blackwell: NVIDIA publishes per-GPU figures (dense = half the sparse one) but no clock. The
# table's rates must give every precision the same implied clock, and a plausible one.
B200_SMS = 148
BLACKWELL = {
    "GB200": {"fp16": 2.5 * P, "bf16": 2.5 * P, "tf32": 1.25 * P, "fp8": 5 * P, "int8": 5 * P,
              "fp4": 10 * P},
    "HGX B200": {"fp16": 2.25 * P, "bf16": 2.25 * P, "fp8": 4.5 * P, "int8": 4.5 * P,
                 "fp4": 9 * P},
}  # fmt: skip


@pytest.mark.parametrize("part", sorted(BLACKWELL))
def test_sm100_rates_imply_one_clock_per_part(part: str) -> None:
    clocks = {
        precision: published / (B200_SMS * (dense_ops_per_sm_per_clock("10.0", precision) or 0))
        for precision, published in BLACKWELL[part].items()
    }
    reference = clocks["fp16"]
    assert 1.7e9 < reference < 2.2e9, clocks
    for precision, clock in clocks.items():
        assert clock == pytest.approx(reference, rel=0.02), (part, precision, clocks)


# --- ncu peaks recorded on the H200 -----------------------------------------------------------


def _read_raw(path: Path) -> list[dict[str, str]]:
    """Rows of an ncu `--csv --page raw` export (header, units row, then one row per kernel)."""
    with gzip.open(path, "rt", newline="") as handle:
        table = list(csv.reader(handle))
    header = table[0]
    return [dict(zip(header, row, strict=True)) for row in table[2:]]


def _num(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "n/a"):
        return None
    return float(text.replace(",", ""))


def _device(row: dict[str, str]) -> tuple[tuple[int, int], float]:
    major = int(row["device__attribute_compute_capability_major"])
    minor = int(row["device__attribute_compute_capability_minor"])
    sms = _num(row["device__attribute_multiprocessor_count"])
    assert sms is not None
    return (major, minor), sms


_PEAK = re.compile(
    r"^sm__ops_path_tensor_(?:op_(?P<path>[a-z]+)_)?src_(?P<src>[a-z0-9_]+?)"
    r"(?:_sparsity_(?P<sparsity>off|on))?\.sum\.peak_sustained$"
)
_SRC = {
    "fp16": "fp16",
    "fp16_dst_fp16": "fp16",
    "fp16_dst_fp32": "fp16",
    "bf16_dst_fp32": "bf16",
    "tf32_dst_fp32": "tf32",
    "fp8": "fp8",
    "int8": "int8",
    "fp64": "fp64",
    "int1": "int1",
}
#: ncu's peak on Hopper as a multiple of the table's dense rate, by instruction path and
#: sparsity. wgmma (hgmma, igmma) reaches the table's rate, twice that with sparsity; the legacy
#: mma.sync paths (hmma, imma) reach two thirds of it dense and the wgmma dense rate sparse.
_FACTOR = {
    ("hgmma", "off"): 1.0,
    ("hgmma", "on"): 2.0,
    ("igmma", "off"): 1.0,
    ("igmma", "on"): 2.0,
    ("hmma", "off"): 2 / 3,
    ("hmma", "on"): 1.0,
    ("imma", "off"): 2 / 3,
    ("imma", "on"): 1.0,
    (None, "off"): 1.0,  # src_fp8_sparsity_off
    (None, "on"): 2.0,  # src_fp8_sparsity_on
    (None, None): 1.0,  # src_fp64 (no sparse DMMA)
}


@pytest.mark.parametrize("path", H200_RECORDINGS, ids=lambda p: p.parent.name)
def test_sm90_row_reproduces_every_ncu_tensor_peak_on_the_h200(path: Path) -> None:
    rows = _read_raw(path)
    cc, sms = _device(rows[0])
    assert (cc, sms) == ((9, 0), 132)
    row90 = DENSE_TENSOR_OPS_PER_SM_PER_CLOCK[cc]
    dense_checked: set[str] = set()
    for column in rows[0]:
        if not (
            column.startswith("sm__ops_path_tensor_") and column.endswith(".sum.peak_sustained")
        ):
            continue
        match = _PEAK.match(column)
        assert match is not None, f"unclassified tensor peak column {column}"
        precision = _SRC[match["src"]]
        values = {_num(row[column]) for row in rows}
        assert len(values) == 1, column  # a peak does not depend on the kernel
        per_sm = (values.pop() or 0) / sms
        if precision == "int1":  # binary MMA: not a roof nsdiag draws
            assert "int1" not in PRECISIONS
            continue
        path_name, sparsity = match["path"], match["sparsity"]
        if path_name is None and precision in ("fp16", "bf16", "tf32", "int8"):
            # The per-precision metric's peak is its fastest path, the sparse wgmma one: twice
            # the dense rate. The dense roof is the sparsity_off wgmma path.
            assert per_sm == 2 * row90[precision], column
            continue
        factor = _FACTOR[(path_name, sparsity)]
        assert per_sm == pytest.approx(row90[precision] * factor, rel=1e-12), column
        if path_name in (None, "hgmma", "igmma") and sparsity != "on":
            assert per_sm == row90[precision], column  # the dense roof, exactly
            dense_checked.add(precision)
    assert dense_checked == {"fp16", "bf16", "tf32", "fp8", "int8", "fp64"}
    for precision, metric in NCU_DENSE_PEAK_METRICS_SM90.items():
        peak = _num(rows[0][metric + ".peak_sustained"])
        assert peak == row90[precision] * sms, metric


def test_hopper_legacy_mma_sync_peak_is_two_thirds_of_wgmma() -> None:
    """Recorded note: on the H200 ncu gives mma.sync (hmma) a dense peak of 360,448 ops/cycle
    (2730.7/SM), two thirds of wgmma's 540,672 (4096/SM). A Turing/Ampere-style kernel on
    Hopper therefore cannot pass 67% of the fp16 tensor roof."""
    row = _read_raw(H200_RECORDINGS[0])[0]
    hmma = _num(
        row["sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32_sparsity_off.sum.peak_sustained"]
    )
    wgmma = _num(row["sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained"])
    assert (hmma, wgmma) == (360448, 540672)
    assert hmma is not None and wgmma is not None
    assert hmma / wgmma == pytest.approx(2 / 3, rel=1e-12)


def _kernel_metrics(row: dict[str, str]) -> dict[str, float | None]:
    return {name: _num(value) for name, value in row.items() if name.startswith("sm__ops_path")}


@pytest.mark.parametrize("path", H200_RECORDINGS, ids=lambda p: p.parent.name)
def test_percent_of_roof_at_the_kernels_clock_is_ncus_own_figure(path: Path) -> None:
    """ops/s / (table rate x SMs x sm__cycles_elapsed.avg.per_second) is exactly ncu's
    pct_of_peak_sustained_elapsed of the dense wgmma path; against the datasheet clock the same
    kernel would look further from its roof than it is."""
    checked = 0
    for row in _read_raw(path):
        cc, sms = _device(row)
        clock = _num(row["sm__cycles_elapsed.avg.per_second"])
        seconds = (_num(row["gpu__time_duration.sum"]) or 0) * 1e-9
        assert clock is not None and seconds > 0
        for precision in ("fp16", "bf16"):
            metric = NCU_DENSE_PEAK_METRICS_SM90[precision]
            ops = _num(row[metric])
            if not ops:
                continue
            peak = dense_tensor_peak(cc, precision, sms, clock)
            boost_peak = dense_tensor_peak(cc, precision, sms, 1830e6)
            assert peak is not None and boost_peak is not None
            pct = 100 * ops / seconds / peak
            ncu_pct = _num(row[metric + ".pct_of_peak_sustained_elapsed"])
            assert ncu_pct is not None
            assert pct == pytest.approx(ncu_pct, abs=0.011), row["Kernel Name"]
            assert 100 * ops / seconds / boost_peak < pct  # every kernel ran below 1830 MHz
            checked += 1
    assert checked >= 6


@pytest.mark.parametrize("path", H200_RECORDINGS, ids=lambda p: p.parent.name)
def test_ncu_counter_sets_count_each_operation_once(path: Path) -> None:
    """On the H200 the per-precision metric equals the sum of its per-path metrics, and
    tensor_ops reads one set only (no double counting)."""
    for row in _read_raw(path):
        metrics = _kernel_metrics(row)
        for precision, groups in NCU_TENSOR_OPS_GROUPS.items():
            collected = [g for g in groups if all(name in metrics for name in g)]
            if len(collected) < 2:
                continue
            totals = [sum(metrics[name] or 0 for name in g) for g in collected]
            assert totals == [totals[0]] * len(totals), (precision, row["Kernel Name"])
            assert tensor_ops(metrics, precision) == totals[0]


def test_dominant_precision_of_recorded_kernels() -> None:
    rows = _read_raw(H200_RECORDINGS[0])
    seen = {}
    for row in rows:
        name = row["Kernel Name"]
        seen[name[:48]] = dominant_precision(_kernel_metrics(row))
        if "bf16" in name or "_tst_" in name:
            assert seen[name[:48]] == "bf16", name
        else:
            assert seen[name[:48]] == "fp16", name
    assert len(seen) >= 4
    assert dominant_precision({"sm__ops_path_tensor_src_fp16.sum": 0.0}) is None
    assert dominant_precision({}) is None


def test_ncu_metric_names_verified_on_the_h200_exist_there() -> None:
    for path in H200_RECORDINGS:
        header = set(_read_raw(path)[0])
        missing = sorted(NCU_TENSOR_METRICS_VERIFIED_SM90 - header)
        assert not missing, (path.name, missing)
    flat = [name for names in NCU_TENSOR_OPS_BY_PRECISION.values() for name in names]
    assert len(flat) == len(set(flat))  # no metric is counted under two precisions
    assert set(flat) >= NCU_TENSOR_METRICS_VERIFIED_SM90
    assert set(NCU_DENSE_PEAK_METRICS_SM90.values()) <= NCU_TENSOR_METRICS_VERIFIED_SM90
    assert set(NCU_TENSOR_OPS_BY_PRECISION) == set(PRECISIONS)


def test_tensor_ops_uses_the_first_collected_set_only() -> None:
    aggregate = "sm__ops_path_tensor_src_fp16.sum"
    part = "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum"
    assert tensor_ops({aggregate: 10.0, part: 10.0}, "fp16") == 10.0
    assert tensor_ops({part: 7.0}, "half") == 7.0
    fp8 = {"sm__ops_path_tensor_src_fp8_sparsity_off.sum": 3.0,
           "sm__ops_path_tensor_src_fp8_sparsity_on.sum": 4.0}  # fmt: skip
    assert tensor_ops(fp8, "e4m3") == 7.0
    assert tensor_ops({aggregate: math.nan}, "fp16") is None
    assert tensor_ops({}, "fp64") is None


# --- lookups ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cc", [(7, 0), (7, 5), (8, 7), (10, 3), (12, 0), "sm_75", "bogus", "7"])
def test_unknown_compute_capability_gives_none(cc: tuple[int, int] | str) -> None:
    assert dense_tensor_peak(cc, "fp16", 100, 1.5e9) is None
    assert precisions_for(cc) == ()


@pytest.mark.parametrize(
    ("cc", "precision"),
    [
        ((8, 0), "fp8"),
        ((8, 0), "fp4"),
        ((8, 6), "fp8"),
        ((8, 6), "fp64"),
        ((8, 9), "fp64"),
        ((8, 9), "fp4"),
        ((9, 0), "fp4"),
        ((10, 0), "fp64"),
    ],
)
def test_precision_the_arch_lacks_gives_none(cc: tuple[int, int], precision: str) -> None:
    assert dense_tensor_peak(cc, precision, 132, 1.8e9) is None
    assert precision not in precisions_for(cc)


def test_precisions_for() -> None:
    assert precisions_for("sm_80") == ("fp16", "bf16", "tf32", "int8", "fp64")
    assert precisions_for("8.9") == ("fp16", "bf16", "tf32", "fp8", "int8")
    assert precisions_for((9, 0)) == ("fp16", "bf16", "tf32", "fp8", "int8", "fp64")
    assert precisions_for("sm_100a") == ("fp16", "bf16", "tf32", "fp8", "int8", "fp4")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9.0", (9, 0)),
        ("90", (9, 0)),
        ("sm_90a", (9, 0)),
        ("sm90", (9, 0)),
        ("compute_86", (8, 6)),
        ("10.0", (10, 0)),
        ("100", (10, 0)),
        ("sm_100a", (10, 0)),
        ("8.9", (8, 9)),
        ((8, 0), (8, 0)),
    ],
)
def test_parse_cc(text: tuple[int, int] | str, expected: tuple[int, int]) -> None:
    assert parse_cc(text) == expected


def test_peak_is_rate_times_sms_times_clock() -> None:
    assert dense_tensor_peak("9.0", "bf16", 132, 1.5e9) == 4096 * 132 * 1.5e9
    assert dense_tensor_peak("sm_90", "float8_e4m3fn", 132, 1e9) == 8192 * 132 * 1e9
    assert dense_tensor_peak("10.0", "nvfp4", 148, 1e9) == 32768 * 148 * 1e9


@pytest.mark.parametrize(("sms", "clock"), [(132, 0.0), (132, -1.0), (0, 1.5e9), (132, math.nan)])
def test_missing_sm_count_or_clock_gives_none(sms: float, clock: float) -> None:
    assert dense_tensor_peak("9.0", "fp16", sms, clock) is None


def test_unknown_precision_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown tensor precision"):
        dense_tensor_peak("9.0", "fp12", 132, 1.5e9)
    with pytest.raises(ValueError, match="accumulate"):
        dense_tensor_peak("9.0", "fp16", 132, 1.5e9, accumulate="fp64")


def test_part_variants_only_lower_the_rates_they_name() -> None:
    geforce = "NVIDIA GeForce RTX 4090"
    assert dense_ops_per_sm_per_clock("8.9", "int8", device_name=geforce) == 2048
    assert dense_ops_per_sm_per_clock("8.9", "fp8", device_name=geforce) == 1024
    assert dense_ops_per_sm_per_clock("8.9", "bf16", device_name=geforce, accumulate="fp16") == 512
    assert dense_ops_per_sm_per_clock("8.9", "int8", device_name="NVIDIA L40") == 1024
    assert dense_ops_per_sm_per_clock("8.9", "int8", device_name="NVIDIA L40S") == 2048
    assert dense_ops_per_sm_per_clock("8.9", "fp16", device_name="NVIDIA L4") == 1024
    # no variant for other arches, whatever the name
    assert dense_ops_per_sm_per_clock("9.0", "fp16", device_name="NVIDIA GeForce X") == 4096
    for variant in tp.PART_VARIANTS:
        row = DENSE_TENSOR_OPS_PER_SM_PER_CLOCK[variant.cc]
        for precision, rate in variant.ops_per_sm_per_clock.items():
            assert rate < row[precision], (variant.description, precision)
        assert variant.source.title and variant.source.url.startswith("https://")


def test_every_cell_has_a_source() -> None:
    assert set(TENSOR_PEAK_SOURCES) == set(DENSE_TENSOR_OPS_PER_SM_PER_CLOCK)
    for cc, row in DENSE_TENSOR_OPS_PER_SM_PER_CLOCK.items():
        assert set(TENSOR_PEAK_SOURCES[cc]) == set(row), cc
        assert set(row) <= set(PRECISIONS)
        for precision, rate in row.items():
            source = TENSOR_PEAK_SOURCES[cc][precision]
            assert source.title and source.derivation, (cc, precision)
            assert source.url.startswith("https://"), (cc, precision)
            assert rate > 0 and float(rate).is_integer()
    for precision, source in TENSOR_PEAK_SOURCES[(9, 0)].items():
        assert "ncu" in source.check, precision  # the H200 row is checked against ncu
