"""Reader-level checks for the nsys inputs of issue 27: older export schemas, binary TEXT cells,
the row and work limits, `.qdrep`, nsys stats summaries, rank merges that need a warning, and
`--kernel` (the command-line cases are in tests/bad_input_corpus_nsys.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsdiag.analysis.filters import keep_kernels
from nsdiag.analysis.kernel.signatures import aggregate
from nsdiag.analysis.program.ranks import _rows_by_rank
from nsdiag.collect.nsys_export import export_command
from nsdiag.errors import InputError
from nsdiag.readers import (
    load,
    nsys_sqlite,
    nsys_stats_csv,
    ranks,
    reader_for,
    source,
    sqlite_query,
)
from nsdiag.readers.nsys_summary import summary_lines
from tests.bad_input_corpus import plain_copy, rows_of, sqlite_copy
from tests.nsys_old_schemas import BINARY_CPU_TEXT, SCHEMAS, old_schema_export

RECORDINGS = ("nsys/sync_heavy.sqlite.gz", "nsys/pipeline.sqlite.gz")


@pytest.mark.parametrize("schema", sorted(SCHEMAS))
@pytest.mark.parametrize("recording", RECORDINGS)
def test_older_schemas_read_as_the_recording(
    schema: str, recording: str, data_dir: Path, tmp_path: Path
) -> None:
    """An export of each older schema, rebuilt from a current recording, reads to the same
    tables: every activity with its name, copy kind and launching call, every CUDA call and
    NVTX range, and the GPU."""
    current = nsys_sqlite.read(data_dir / recording)
    old = nsys_sqlite.read(old_schema_export(data_dir / recording, tmp_path / "old.sqlite", schema))
    assert old.meta.device is not None and old.meta.device["name"] == "NVIDIA H200"
    assert old.meta.device["sm_count"] == current.meta.device["sm_count"]  # type: ignore[index]
    for column in ("kind", "name", "start_ns", "end_ns", "stream", "copy_kind", "api_start_ns"):
        assert (
            current.timeline[column].fillna("").tolist() == old.timeline[column].fillna("").tolist()
        ), column
    assert current.api_calls["name"].tolist() == old.api_calls["name"].tolist()
    assert current.api_calls["is_sync"].tolist() == old.api_calls["is_sync"].tolist()
    assert current.nvtx_ranges["name"].tolist() == old.nvtx_ranges["name"].tolist()
    assert not old.meta.warnings


def test_binary_text_cells_are_replaced_not_refused(data_dir: Path, tmp_path: Path) -> None:
    path = old_schema_export(data_dir / RECORDINGS[0], tmp_path / "2022.sqlite", "2022.2")
    con = sqlite3.connect(path)
    con.text_factory = bytes
    (raw,) = con.execute(
        "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'CpuDescription'"
    ).fetchone()
    con.close()
    assert raw == BINARY_CPU_TEXT  # the file really holds bytes that are not UTF-8
    assert sqlite_query.text_of_cell(raw).startswith("Intel(R) Xeon(R) \ufffd")
    assert nsys_sqlite.read(path).meta.host == "vm"  # what nsdiag reads from that table


def test_row_limit_from_the_environment_and_load(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = plain_copy(data_dir / RECORDINGS[0], tmp_path / "sync_heavy.sqlite")
    monkeypatch.setenv(source.ENV_ROWS, "500")
    with pytest.raises(InputError) as refused:
        nsys_sqlite.read(export)
    assert "sync_heavy.sqlite" in refused.value.message and "500 rows" in refused.value.message
    assert source.ENV_ROWS in refused.value.hint
    monkeypatch.delenv(source.ENV_ROWS)
    assert len(load(export).api_calls) > 500  # the default reads it
    with pytest.raises(InputError, match="more than 100 rows"):
        load(export, max_input_rows=100)
    for bad in ("0", "nan", "inf", "-3"):
        monkeypatch.setenv(source.ENV_ROWS, bad)
        with pytest.raises(InputError, match="row limit"):
            source.limit_rows()


def test_a_view_that_computes_rows_is_stopped_by_the_work_budget(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view whose first row costs a billion steps (an aggregate over a large join) returns
    few rows: the row limit never trips, the work budget does."""
    export = sqlite_copy(
        data_dir / RECORDINGS[1],
        tmp_path / "costly.sqlite",
        "ALTER TABLE StringIds RENAME TO STRINGS",
        "CREATE VIEW StringIds AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
        "WHERE i < 1000000000) SELECT s.id, s.value FROM STRINGS AS s "
        "WHERE (SELECT count(*) FROM n) > 0",
    )
    monkeypatch.setenv(source.ENV_ROWS, "10000")
    with pytest.raises(InputError, match="more work than reading 10,000 rows"):
        nsys_sqlite.read(export)


def test_null_where_not_null_is_declared_drops_the_row(data_dir: Path, tmp_path: Path) -> None:
    from tests.bad_input_corpus_nsys import null_in_not_null

    (path,) = null_in_not_null(tmp_path)
    session = nsys_sqlite.read(Path(path))
    current = nsys_sqlite.read(data_dir / RECORDINGS[1])
    assert len(session.timeline) == len(current.timeline) - 2
    assert any("2 GPU activities have no valid interval" in w for w in session.meta.warnings)


def test_qdrep_is_an_nsys_report(tmp_path: Path) -> None:
    from nsdiag.readers import nsys_rep

    report = tmp_path / "my run.qdrep"
    report.write_bytes(b"x")
    assert reader_for(report) is nsys_rep.read
    with pytest.raises(InputError) as refused:
        nsys_rep.read(report)
    assert f"nsys export --type sqlite -o '{tmp_path}/my run.sqlite'" in refused.value.message
    assert export_command(report) == (
        f"nsys export --type sqlite -o '{tmp_path}/my run.sqlite' '{tmp_path}/my run.qdrep'"
    )


def test_kernel_summary_is_a_kernel_table_by_total_time(data_dir: Path) -> None:
    path = data_dir / "nsys/tiny_burst_stats_cuda_gpu_kern_sum.csv.gz"
    rows = rows_of(path)
    header = rows[0]
    session = nsys_stats_csv.read(path)
    kernels = session.kernels
    assert kernels["demangled"].tolist() == [r[header.index("Name")] for r in rows[1:]]
    signatures = aggregate(kernels)
    assert signatures["launches"].tolist() == [int(r[header.index("Instances")]) for r in rows[1:]]
    assert signatures["total_duration_ns"].tolist() == [
        float(r[header.index("Total Time (ns)")]) for r in rows[1:]
    ]
    assert kernels["duration_ns"].tolist() == [float(r[header.index("Avg (ns)")]) for r in rows[1:]]
    assert session.meta.nsys_cuda_gpu_kern_sum is not None
    assert any("no per-launch metrics" in w for w in session.meta.warnings)


def test_other_summaries_name_what_took_the_most_time(data_dir: Path) -> None:
    path = data_dir / "nsys/tiny_burst_stats_cuda_api_sum.csv.gz"
    rows = rows_of(path)
    header = rows[0]
    session = nsys_stats_csv.read(path)
    (line,) = [w for w in session.meta.warnings if "cuda_api_sum" in w]
    first = rows[1]
    assert f"{first[header.index('Name')]} {float(first[header.index('Time (%)')]):.1f}%" in line
    assert summary_lines("nvtx_sum", [], "x.csv") == [
        "x.csv is an nsys stats summary (nvtx_sum) with no rows"
    ]


def test_rank_merge_warnings(data_dir: Path, tmp_path: Path) -> None:
    rank0 = nsys_sqlite.read(data_dir / "multi_gpu/ddp_straggler_rank0.sqlite.gz")
    other = nsys_sqlite.read(data_dir / "multi_gpu/verify2/ddp_balanced_rank0.sqlite.gz")
    paths = [Path("a.sqlite"), Path("b.sqlite")]
    numbers, how = ranks.file_ranks([rank0, other], paths)
    assert (numbers, how) == ([0, 1], "file-order")
    (warning,) = ranks.rank_warnings([rank0, other], paths, how)
    assert "rank 0" in warning and "file order" in warning
    kept, kept_paths, copies = ranks.distinct_reports([rank0, rank0, other], [*paths, Path("c")])
    assert len(kept) == 2 and kept_paths == [paths[0], Path("c")] and len(copies) == 1
    assert ranks.name_rank(Path("rep_20261130123456.sqlite")) is None  # a date, not a rank
    assert ranks.name_rank(Path("rep_rank12.sqlite")) == 12


def test_rows_by_rank_of_no_rows() -> None:
    assert _rows_by_rank(np.zeros(0, dtype="int64")) == {}
    parts = _rows_by_rank(np.array([1, 0, 1], dtype="int64"))
    assert {k: v.tolist() for k, v in parts.items()} == {0: [1], 1: [0, 2]}


def test_kernel_filter_on_string_arrays_ignores_case(data_dir: Path) -> None:
    """pandas' string dtype (the default in pandas 3) has no `|` between its arrays."""
    session = load(data_dir / "reference/raw.csv.gz")
    session.kernels["name"] = session.kernels["name"].astype("string")
    session.kernels["demangled"] = session.kernels["demangled"].astype(pd.StringDtype())
    kept = keep_kernels(session, "COPY_FLOAT4")
    assert kept.kernels["name"].str.contains("copy_float4").all() and len(kept.kernels) == 1
    with pytest.raises(InputError, match="no kernel matches"):
        keep_kernels(session, "no_such_kernel")


def test_worker_processes_read_under_the_callers_limits(data_dir: Path, tmp_path: Path) -> None:
    """Eight reports or more are read in worker processes: `max_input_rows` (and
    `max_input_mb`) given to load hold there too."""
    gz = (data_dir / RECORDINGS[1]).read_bytes()
    paths = []
    for i in range(ranks.PARALLEL_FROM):
        path = tmp_path / f"rep_rank{i}.sqlite.gz"
        path.write_bytes(gz)
        paths.append(path)
    with pytest.raises(InputError, match="more than 10 rows"):
        load(paths, max_input_rows=10)
