"""Readers: real H200 exports (golden values) and synthetic edge cases."""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nsdiag
from nsdiag.errors import InputError, MissingDependencyError
from nsdiag.model.meta import Source
from nsdiag.readers import load as read_inputs

# CSV exports print two decimals; the .ncu-rep holds full precision.
ABS_TOL, REL_TOL = 0.0051, 1e-4


def _csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(gzip.open(path, "rt").read())))


def _launch(session: nsdiag.Session, fragment: str) -> pd.Series:
    rows = session.kernels[session.kernels["name"].str.contains(fragment, regex=False)]
    assert len(rows) == 1, f"{fragment}: {len(rows)} rows"
    return rows.iloc[0]


def assert_same_canonical(
    a: nsdiag.Session, b: nsdiag.Session, minimum_common: int, rtol: float = REL_TOL
) -> None:
    assert len(a.kernels) == len(b.kernels)
    common = [
        c
        for c in a.kernels.columns
        if c in b.kernels.columns
        and a.kernels[c].dtype.kind == "f"
        and b.kernels[c].dtype.kind == "f"
    ]
    assert len(common) >= minimum_common, common
    for column in common:
        np.testing.assert_allclose(
            a.kernels[column],
            b.kernels[column],
            rtol=rtol,
            atol=ABS_TOL,
            equal_nan=True,
            err_msg=column,
        )


def test_raw_csv_golden_values(data_dir: Path) -> None:
    """Values read straight from the recording's text with the csv module match the reader's."""
    path = data_dir / "reference/raw.csv.gz"
    rows = _csv_rows(path)
    header, units = rows[0], rows[1]
    row = next(r for r in rows[2:] if "float4_kernel" in r[header.index("Kernel Name")])
    session = nsdiag.load(path)
    launch = _launch(session, "nsdiag::float4_kernel")
    assert units[header.index("gpu__time_duration.sum")] == "ns"
    assert launch["duration_ns"] == float(
        row[header.index("gpu__time_duration.sum")].replace(",", "")
    )
    assert launch["dram_read_bytes"] == float(
        row[header.index("dram__bytes_read.sum")].replace(",", "")
    )
    assert launch["dram_throughput_pct"] == pytest.approx(83.71, abs=0.2)  # float4 at the DRAM roof
    assert launch["grid"] == "(16384, 1, 1)" and launch["block_size"] == 256
    assert launch["nvtx_range"] == "float4"
    assert len(session.kernels) == 42
    assert session.meta.device == {"name": "NVIDIA H200", "cc": "9.0", "sm_count": 132}


def test_base_and_auto_units_agree(data_dir: Path) -> None:
    for name in ("reference", "calib", "torch_cases"):
        base = nsdiag.load(data_dir / f"{name}/raw.csv.gz")
        auto = nsdiag.load(data_dir / f"{name}/raw_auto.csv.gz")
        # Auto units print few digits ("6.91 Kbyte", "4 Kbyte" for 4,352 bytes): equal to that.
        assert_same_canonical(base, auto, minimum_common=100, rtol=0.1)
        assert (
            base.raw_units["gpu__time_duration.sum"]
            == auto.raw_units["gpu__time_duration.sum"]
            == "ns"
        )


def test_details_page_agrees_with_raw_page(data_dir: Path) -> None:
    for name in ("reference", "calib", "torch_cases"):
        raw = nsdiag.load(data_dir / f"{name}/raw.csv.gz")
        details = nsdiag.load(data_dir / f"{name}/details.csv.gz")
        assert_same_canonical(raw, details, minimum_common=50)
        for key in (
            "duration_ns",
            "dram_throughput_pct",
            "sm_throughput_pct",
            "achieved_occupancy_pct",
            "registers_per_thread",
            "grid_size",
            "block_size",
            "memory_throughput_pct",
        ):
            assert details.kernels[key].notna().all(), key
        assert len(details.rule_results) > 100
        assert set(details.rule_results["type"]) <= {"OPT", "WRN", "INF", "ERR", "OK"}


def test_details_with_metric_names_agrees(data_dir: Path) -> None:
    raw = nsdiag.load(data_dir / "calib_small/raw.csv.gz")
    named = nsdiag.load(data_dir / "calib_small/details_names.csv.gz")
    assert_same_canonical(raw, named, minimum_common=100)


def test_ncu_rep_agrees_with_csv(data_dir: Path) -> None:
    pytest.importorskip("ncu_report")
    raw = nsdiag.load(data_dir / "calib_small/raw.csv.gz")
    rep = nsdiag.load(data_dir / "calib_small/report.ncu-rep.gz")
    assert_same_canonical(raw, rep, minimum_common=100)
    assert list(rep.kernels["name"]) == [
        "dram_bandwidth_saturated_bad",
        "uncoalesced_global_access_bad",
    ]
    assert (
        rep.kernels["demangled"].iloc[0].startswith("dram_bandwidth_saturated_bad(const float4 *")
    )
    details = nsdiag.load(data_dir / "calib_small/details.csv.gz")
    # Same rule results through both formats (ids, types and speedups).
    key = ["id", "rule", "type"]
    a = rep.rule_results.sort_values([*key, "speedup"]).reset_index(drop=True)
    b = details.rule_results.sort_values([*key, "speedup"]).reset_index(drop=True)
    assert list(a["rule"]) == list(b["rule"])
    np.testing.assert_allclose(a["speedup"], b["speedup"], atol=0.01, equal_nan=True)
    assert "@section" not in " ".join(a["message"])


def test_ncu_rep_without_package_gives_install_hint(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "ncu_report":
            raise ImportError("no ncu_report")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingDependencyError, match="ncu-report"):
        nsdiag.load(data_dir / "calib_small/report.ncu-rep.gz")


def test_console_output_with_program_noise(data_dir: Path) -> None:
    """CSV printed to the console by `ncu --csv` with ==PROF== lines and program output around
    it."""
    session = nsdiag.load(data_dir / "console/basic_raw.csv.gz")
    assert len(session.kernels) == 12
    assert session.kernels["duration_ns"].gt(0).all()
    durations = nsdiag.load(data_dir / "console/duration_raw.csv.gz")
    assert len(durations.kernels) == 40
    assert set(durations.kernels.columns) & {"dram_throughput_pct"} == set()


def test_several_inputs_merge(data_dir: Path) -> None:
    merged = nsdiag.load([data_dir / "reference/raw.csv.gz", data_dir / "calib/raw.csv.gz"])
    assert len(merged.kernels) == 42 + 53
    assert merged.kernels["id"].is_unique
    assert len(merged.meta.sources) == 2


HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","gpu__time_duration.sum",'
    '"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed","dram__bytes_read.sum"'
)


def _write(tmp_path: Path, text: str, name: str = "x.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_synthetic_separators_na_and_noise(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "==PROF== Connected to process 1 (/bin/app)",
            "app says hello",
            HEADER,
            '"","","","","","","","","","","","usecond","%","Mbyte"',
            '"0","11","app","h","k1<int>(float *)","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0",'
            '"1,130.5","n/a","2,000.5"',
            '"1","12","app2","h","k2","1","7","(32, 1, 1)","(4, 2, 1)","0","9.0","2.5","81.8",'
            '"0.5"',
            "==PROF== Disconnected from process 1",
            "",
        ]
    )
    session = nsdiag.load(_write(tmp_path, text))
    k = session.kernels
    assert list(k["duration_ns"]) == [1_130_500.0, 2_500.0]
    assert np.isnan(k["dram_throughput_pct"].iloc[0]) and k["dram_throughput_pct"].iloc[1] == 81.8
    assert list(k["dram_read_bytes"]) == [2_000_500_000.0, 500_000.0]
    assert list(k["process_id"]) == ["11", "12"]
    assert list(k["grid_size"]) == [1.0, 8.0]  # from "(4, 2, 1)" when launch__grid_size is absent


def test_synthetic_older_header_without_launch_columns(tmp_path: Path) -> None:
    text = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context",'
        '"Stream","gpu__time_duration.sum"\n'
        '"","","","","","","","","nsecond"\n"0","1","a","h","k","2023-01-01","1","7","100"\n'
    )
    session = nsdiag.load(_write(tmp_path, text))
    assert session.kernels["duration_ns"].iloc[0] == 100.0


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "not a CSV export nsdiag knows"),
        ("garbage,1,2\n3,4,5\n", "not a CSV export nsdiag knows"),
        (HEADER + "\n" + '"","","","","","","","","","","","ns","%","byte"\n', "no kernel rows"),
    ],
)
def test_unreadable_inputs_raise_input_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        nsdiag.load(_write(tmp_path, text, "bad.csv"))


def test_truncated_gzip_and_missing_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(gzip.compress(b"x" * 1000)[:20])
    with pytest.raises(InputError, match="gzip"):
        nsdiag.load(broken)
    with pytest.raises(InputError, match="does not exist"):
        nsdiag.load(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="unknown input type"):
        nsdiag.load(_write(tmp_path, "x", "report.bin"))


def test_nsys_rep_is_read_through_an_export_readers_never_run(
    tmp_path: Path, data_dir: Path
) -> None:
    """Readers start no process: a `.nsys-rep` reads through the fresh export beside it, or the
    export function passed in (nsdiag.load passes collect's); without either, a clear error."""
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"report")
    with pytest.raises(InputError, match="no SQLite export next to it") as info:
        read_inputs(report)
    assert "nsdiag.load" in info.value.hint and "nsys export --type sqlite" in info.value.hint
    recorded = gzip.decompress((data_dir / "nsys" / "sync_heavy.sqlite.gz").read_bytes())

    def export(rep: Path, output: Path) -> Path:
        assert rep == report and output.parent != tmp_path  # a temporary folder
        output.write_bytes(recorded)
        return output

    exported = read_inputs(report, export_nsys_rep=export)
    assert exported.meta.sources == (Source(str(report), "nsys-rep"),)
    sibling = tmp_path / "run.sqlite"
    sibling.write_bytes(recorded)
    assert len(read_inputs(report).timeline) == len(exported.timeline)  # fresh: read as it is
    os.utime(sibling, (0, 0))  # older than the report: not used
    with pytest.raises(InputError, match="no SQLite export next to it"):
        read_inputs(report)
