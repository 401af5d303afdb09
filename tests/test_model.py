"""Session model: catalogue, units, save/load round trip."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas.testing as pdt
import pytest

import nsdiag
from nsdiag.errors import InputError
from nsdiag.model import store
from nsdiag.model.catalogue import CATALOGUE, STALL_REASONS
from nsdiag.model.units import parse_unit


def test_catalogue_is_well_formed() -> None:
    for name, spec in CATALOGUE.items():
        assert name == spec.name and name.islower() and " " not in name
        assert spec.ncu or spec.pattern, name
        assert spec.description
    public = {
        "duration_ns",
        "dram_throughput_pct",
        "memory_throughput_pct",
        "sm_throughput_pct",
        "achieved_occupancy_pct",
        "registers_per_thread",
        "grid_size",
        "block_size",
    }
    assert public <= set(CATALOGUE)
    assert {f"stall_{r}" for r in STALL_REASONS} <= set(CATALOGUE)


def test_full_set_recording_resolves_the_catalogue(data_dir: Path) -> None:
    """On a real ncu 2025.3 full-set export, every catalogue metric but a known few is found."""
    session = nsdiag.load(data_dir / "calib/raw.csv.gz")
    absent = {n for n in CATALOGUE if n not in session.kernels}
    # Not collected by ncu 2025.3's full set on Hopper (fallbacks for other versions):
    expected_absent = {
        "l2_atomic_throughput_pct",
        "dram_bytes",
        "global_load_sectors_per_request",
        "global_store_sectors_per_request",
        "dram_bytes_peak_per_second",
        *(
            f"{op}_thread_inst"
            for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")
        ),
    }
    assert absent <= expected_absent, absent - expected_absent


@pytest.mark.parametrize(
    "unit, base, factor",
    [
        ("ns", "ns", 1),
        ("nsecond", "ns", 1),
        ("us", "ns", 1e3),
        ("usecond", "ns", 1e3),
        ("ms", "ns", 1e6),
        ("byte", "byte", 1),
        ("Kbyte", "byte", 1e3),
        ("Mbyte", "byte", 1e6),
        ("Gbyte", "byte", 1e9),
        ("Kibyte", "byte", 1024),
        ("byte/s", "byte/s", 1),
        ("Gbyte/s", "byte/s", 1e9),
        ("Tbyte/second", "byte/s", 1e12),
        ("sector/ns", "sector/s", 1e9),
        ("sector/us", "sector/s", 1e6),
        ("Kbyte/block", "byte/block", 1e3),
        ("%/Kbyte", "%/byte", 1e-3),
        ("Ghz", "hz", 1e9),
        ("hz", "hz", 1),
        ("%", "%", 1),
        ("", "", 1),
        ("Kinst", "inst", 1e3),
        ("register/thread", "register/thread", 1),
    ],
)
def test_units(unit: str, base: str, factor: float) -> None:
    got_base, got_factor = parse_unit(unit)
    assert got_base == base and got_factor == pytest.approx(factor)


@pytest.mark.parametrize(
    "inputs",
    [
        ["calib/raw.csv.gz"],
        ["torch_cases/details.csv.gz"],
        ["reference/raw.csv.gz", "calib_small/details.csv.gz"],
    ],
)
def test_session_round_trip(tmp_path: Path, data_dir: Path, inputs: list[str]) -> None:
    session = nsdiag.load([data_dir / i for i in inputs])
    store.save(session, tmp_path / "s")
    again = nsdiag.load(tmp_path / "s")
    for table in store.TABLES:
        pdt.assert_frame_equal(
            getattr(session, table), getattr(again, table), check_dtype=True, obj=table
        )
    assert again.raw_units == session.raw_units
    assert again.meta == session.meta


@pytest.mark.parametrize("readers", [1, 2])
def test_tables_read_side_by_side_as_in_turn(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, readers: int
) -> None:
    """store.load's reader threads give the frames reading them one by one gives; of two
    damaged tables the error names the first in TABLES order, as reading in turn does."""
    folder = data_dir / "idioms" / "copy_feed"
    monkeypatch.setattr(store, "READERS", 1)
    in_turn = store.load(folder)
    monkeypatch.setattr(store, "READERS", readers)
    monkeypatch.setattr(store, "_cores", lambda: 2)
    side_by_side = store.load(folder)
    for table in store.TABLES:
        pdt.assert_frame_equal(getattr(in_turn, table), getattr(side_by_side, table), obj=table)
    damaged = tmp_path / "damaged"
    shutil.copytree(folder, damaged)
    # gzip cut short; api_calls left the larger, so it is read first (timeline is first in TABLES)
    for table, kept in (("api_calls", 6000), ("timeline", 3000)):
        path = damaged / "tables" / f"{table}.csv.gz"
        path.write_bytes(path.read_bytes()[:kept])
    with pytest.raises(InputError, match=r"timeline\.csv\.gz is unreadable"):
        store.load(damaged)


def test_save_keeps_other_files(tmp_path: Path, data_dir: Path) -> None:
    target = tmp_path / "s"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    store.save(nsdiag.load(data_dir / "calib_small/raw.csv.gz"), target)
    assert (target / "notes.txt").read_text() == "mine"


def test_bad_session_folders(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not an nsdiag session"):
        nsdiag.load(tmp_path / "empty")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "session.json").write_text("{not json")
    with pytest.raises(InputError, match="unreadable"):
        nsdiag.load(broken)


def test_identity_columns_present(data_dir: Path) -> None:
    kernels = nsdiag.load(data_dir / "reference/raw.csv.gz").kernels
    assert {
        "id",
        "name",
        "demangled",
        "grid",
        "block",
        "device",
        "cc",
        "stream",
        "nvtx_range",
    } <= set(kernels)
