"""The reading layer (readers/source.py, readers/csv_table.py, readers/validate.py): what it
refuses before reading, the limit the user sets, the CSV header it looks for, the values it
leaves out; and property tests: a CSV export built from a recording, with random cells, rows or
cuts, is read and diagnosed or refused with nsdiag's own error, nothing else."""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsdiag.analysis.engine import diagnose
from nsdiag.errors import InputError, NsdiagError
from nsdiag.readers import load, source, validate
from nsdiag.readers.csv_header import header_kind
from nsdiag.readers.csv_table import open_table
from tests.bad_input_corpus import REFERENCE_RAW, SMALL_RAW, TRACE, text_of


def test_check_file_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    os.symlink("/dev/null", tmp_path / "null.csv")
    with pytest.raises(InputError, match="named pipe"):
        source.check_file(tmp_path / "p")
    with pytest.raises(InputError, match="character device"):
        source.check_file(tmp_path / "null.csv")
    with pytest.raises(InputError, match="folder"):
        source.check_file(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        source.check_file(tmp_path / "absent.csv")


def test_limit_from_option_environment_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(source.ENV_LIMIT, raising=False)
    assert source.limit_bytes("text") == source.DEFAULT_LIMIT_MB["text"] * source.MB
    monkeypatch.setenv(source.ENV_LIMIT, "10")
    assert source.limit_bytes("sqlite") == 10 * source.MB
    with source.input_limit(2.5):  # the command-line option wins over the environment
        assert source.limit_bytes("text") == int(2.5 * source.MB)
    assert source.limit_bytes("text") == 10 * source.MB


def test_gzip_is_streamed_and_bounded(tmp_path: Path) -> None:
    """The limit counts decompressed bytes: a small file that inflates past it is refused while
    reading, without inflating the rest."""
    path = tmp_path / "x.csv.gz"
    path.write_bytes(gzip.compress(b"a,b\n" + b"1,2\n" * 1_000_000))  # 4 MB inflated, 10 kB
    with (
        source.input_limit(1),
        pytest.raises(InputError, match="decompresses to more"),
        source.open_binary(path) as handle,
    ):
        while handle.read(1 << 16):
            pass
    with source.input_limit(5), source.open_binary(path) as handle:
        assert len(handle.read()) == 4_000_004


def test_header_kinds_and_what_is_expected(tmp_path: Path) -> None:
    assert header_kind('"ID","Process ID","Kernel Name"\n') == "ncu-raw"
    assert header_kind("ID,Process ID,Section Name,Metric Name,Metric Value\n") == "ncu-details"
    assert header_kind(text_of(TRACE).splitlines()[0]) == "nsys-stats"
    path = tmp_path / "other.csv"
    path.write_text("name,value\nx,1\n")
    with pytest.raises(InputError) as error:
        open_table(path)
    assert "'name,value'" in str(error.value) and 'starts with "ID"' in str(error.value)


def test_header_found_after_console_output_within_the_prefix(tmp_path: Path) -> None:
    path = tmp_path / "console.csv"
    path.write_text("program says hello\n" * 1000 + text_of(SMALL_RAW))
    with open_table(path) as table:
        assert table.kind == "ncu-raw" and table.header[0] == "ID"


def test_numeric_metrics_leave_out_one_cell_not_the_column() -> None:
    raw = pd.DataFrame(
        {
            "gpu__time_duration.sum": ["1,000", "-nan", "3000", "-5"],
            "device__attribute_display_name": ["NVIDIA H200"] * 4,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": [1.0, np.inf, 3.0, -2.0],
        }
    )
    units = {
        "gpu__time_duration.sum": "ns",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": "%",
    }
    out, warnings = validate.numeric_metrics(raw, units, "f.csv", ["0", "1", "2", "3"])
    assert out["gpu__time_duration.sum"].tolist()[::2] == [1000.0, 3000.0]
    assert out["gpu__time_duration.sum"].isna().tolist() == [False, True, False, True]
    assert out["device__attribute_display_name"].tolist() == ["NVIDIA H200"] * 4
    # a negative percentage is not impossible for every ncu metric; only times and sizes
    assert out["sm__throughput.avg.pct_of_peak_sustained_elapsed"].tolist()[3] == -2.0
    assert np.isnan(out["sm__throughput.avg.pct_of_peak_sustained_elapsed"][1])
    text = " ".join(warnings)
    assert "'-nan' at row 2 (ID 1)" in text and "-5 ns at row 4 (ID 3)" in text and "inf" in text


def test_intervals_drop_reversed_and_missing() -> None:
    frame = pd.DataFrame({"start_ns": [0, 10, 20, np.nan], "end_ns": [5, 5, 25, 30]})
    kept, warnings = validate.intervals(frame, "GPU activities", "t.sqlite")
    assert kept["start_ns"].tolist() == [0, 20] and "2 GPU activities" in warnings[0]


# ------------------------------------------------------------------------------ properties

_HEADER, _UNITS, *_ROWS = list(csv.reader(io.StringIO(text_of(SMALL_RAW))))
_TRACE_ROWS = list(csv.reader(io.StringIO(text_of(TRACE))))[:40]
_CELLS = st.one_of(
    st.sampled_from(["-nan", "nan", "inf", "-inf", "n/a", "", "-5", "1e308", '"', ",", "ID"]),
    st.text(max_size=12),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)
_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _write(path: Path, rows: list[list[str]], cut: int | None, quoting: int) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, quoting=quoting, lineterminator="\n").writerows(rows)
    text = buffer.getvalue()
    path.write_text(text[:cut] if cut is not None else text)


def _read_and_diagnose(path: Path) -> None:
    try:
        session = load(path)
        diagnosis = diagnose(session)
        diagnosis.to_json()
    except NsdiagError:
        pass  # refused with a message: fine; anything else fails the test


@pytest.mark.slow
@_SETTINGS
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(_ROWS) - 1), st.integers(0, len(_HEADER) - 1), _CELLS),
        max_size=12,
    ),
    drop_units=st.booleans(),
    cut=st.one_of(st.none(), st.integers(0, len(text_of(SMALL_RAW)))),
    quoting=st.sampled_from([csv.QUOTE_ALL, csv.QUOTE_MINIMAL]),
)
# found by CI: a cell of 3.9e305 made a weighted mean infinite, and int(inf) raised
@example(edits=[(0, 91, "3.8611973520773574e+305")], drop_units=False, cut=None, quoting=1)
@example(edits=[(0, 254, "1e308")], drop_units=False, cut=None, quoting=1)  # an infinite share
def test_raw_export_with_random_cells(
    tmp_path: Path,
    edits: list[tuple[int, int, str]],
    drop_units: bool,
    cut: int | None,
    quoting: int,
) -> None:
    rows = [list(r) for r in _ROWS]
    for row, column, value in edits:
        rows[row][column] = value
    table = [_HEADER, *([] if drop_units else [_UNITS]), *rows]
    _write(tmp_path / "raw.csv", table, cut, quoting)
    _read_and_diagnose(tmp_path / "raw.csv")


@_SETTINGS
@given(
    lines=st.lists(st.text(max_size=40), max_size=5),
    where=st.integers(0, 40),
    cells=st.lists(st.tuples(st.integers(1, 39), st.integers(0, 20), _CELLS), max_size=10),
)
def test_nsys_stats_trace_with_random_rows(
    tmp_path: Path, lines: list[str], where: int, cells: list[tuple[int, int, str]]
) -> None:
    rows = [list(r) for r in _TRACE_ROWS]
    for row, column, value in cells:
        rows[row][column % len(rows[row])] = value
    rows[where:where] = [[line] for line in lines]
    _write(tmp_path / "trace.csv", rows, None, csv.QUOTE_MINIMAL)
    _read_and_diagnose(tmp_path / "trace.csv")


_SMALL = load(SMALL_RAW)
_NUMERIC = [
    c
    for c in _SMALL.raw.columns
    if pd.api.types.is_float_dtype(_SMALL.raw[c]) and _SMALL.raw[c].notna().all()
]


@pytest.mark.slow
@_SETTINGS
@given(
    column=st.sampled_from(_NUMERIC),
    row=st.integers(0, len(_ROWS) - 1),
    garbage=st.sampled_from(["-nan", "nan", "NaN", "inf", "-inf", "abc", "1.2.3", "--", "#N/A"]),
)
def test_one_bad_cell_leaves_the_rest_of_its_column(
    tmp_path: Path, column: str, row: int, garbage: str
) -> None:
    """A cell that is not a number is missing, with a warning naming its column and row; the
    column's other cells keep their values (one '-nan' used to blank the whole column)."""
    rows = [list(r) for r in _ROWS]
    rows[row][_HEADER.index(column)] = garbage
    _write(tmp_path / "raw.csv", [_HEADER, _UNITS, *rows], None, csv.QUOTE_ALL)
    session = load(tmp_path / "raw.csv")
    values = session.raw[column]
    assert np.isnan(values[row])
    others = [i for i in range(len(rows)) if i != row]
    # (the same text read by pandas' parser or by float(): equal to the last digit or two)
    np.testing.assert_allclose(values[others], _SMALL.raw[column][others], rtol=1e-12)
    assert any(column in w and f"row {row + 1}" in w for w in session.meta.warnings)


def test_reference_raw_reads_the_same_through_every_layer(tmp_path: Path) -> None:
    """Plain, gzipped, BOM-prefixed: one Session."""
    plain = tmp_path / "raw.csv"
    plain.write_text(text_of(REFERENCE_RAW))
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    frames = [load(p).kernels for p in (REFERENCE_RAW, plain, bom)]
    for frame in frames[1:]:
        pd.testing.assert_frame_equal(
            frame.drop(columns="source"), frames[0].drop(columns="source")
        )
