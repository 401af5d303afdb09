"""Timeline (Nsight Systems) readers and program analyses, on the H200 recordings in
tests/data/nsys/ and on small synthetic exports built here for the edge cases.

Recordings (see tests/data/README.md): pipeline = reference_kernels/run_all.py --variants
stream_split,serial_pageable; tiny_burst and sync_heavy = tests/calibration/timeline_cases.py.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from nsdiag.analysis.diagnosis import Diagnosis
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
from nsdiag.analysis.program.timeline import overlap_summary, prepare
from nsdiag.analysis.rules.spec import default_rules, find_rule
from nsdiag.errors import InputError
from nsdiag.model.intervals import enclosing
from nsdiag.readers import load, nsys_sqlite, nsys_stats_csv, reader_for
from tests.conftest import DATA

TIMELINE_RULES = {
    "NSD401": "pageable-memcpy",
    "NSD402": "no-copy-compute-overlap",
    "NSD403": "sync-heavy",
    "NSD404": "gpu-idle-gaps",
    "NSD405": "launch-overhead",
}


@pytest.fixture(scope="module")
def recordings(data_dir: Path) -> dict[str, tuple]:
    out = {}
    for name in ("pipeline", "tiny_burst", "sync_heavy"):
        session = load(data_dir / "nsys" / f"{name}.sqlite.gz")
        out[name] = (session, diagnose(session))
    return out


def found(diagnosis: Diagnosis) -> set[tuple[str, str | None]]:
    return {(f.cause, f.range) for f in diagnosis.program_findings}


def by(diagnosis: Diagnosis, cause: str, rng: str | None):
    return next(f for f in diagnosis.program_findings if f.cause == cause and f.range == rng)


# ---------------------------------------------------------------- readers on the recordings


def test_pipeline_tables(recordings: dict) -> None:
    session, _ = recordings["pipeline"]
    t = session.timeline
    assert t["kind"].value_counts().to_dict() == {"memcpy": 62, "kernel": 29}
    assert (
        t["start_ns"].is_monotonic_increasing
        and (t["duration_ns"] == t["end_ns"] - t["start_ns"]).all()
    )
    serial = t[(t["nvtx_range"] == "serial_pageable") & (t["kind"] == "memcpy")]
    assert set(zip(serial["copy_kind"], serial["src_kind"], serial["dst_kind"], strict=True)) == {
        ("HtoD", "pageable", "device"),
        ("DtoH", "device", "pageable"),
    }
    assert serial["bytes"].sum() == 6 * 50331648
    split = t[t["nvtx_range"] == "stream_split"]
    assert set(split.loc[split["kind"] == "memcpy", "src_kind"]) | set(
        split.loc[split["kind"] == "memcpy", "dst_kind"]
    ) == {"pinned", "device"}
    assert (
        split["stream"].nunique() == 3 and len(split) == 72
    )  # 3 calls x 8 chunks x (H2D, kernel, D2H)
    assert session.nvtx_ranges["name"].value_counts().to_dict() == {
        "stream_split": 3,
        "serial_pageable": 3,
    }
    device = session.meta.device or {}
    assert (device["name"], device["sm_count"], device["cc"]) == ("NVIDIA H200", 132, "9.0")
    assert (session.meta.nsys_version or "").startswith("2025.3")


def test_activities_attributed_to_their_launching_range(recordings: dict) -> None:
    tiny, _ = recordings["tiny_burst"]
    counts = tiny.timeline[tiny.timeline["kind"] == "kernel"]["nvtx_range"].value_counts(
        dropna=False
    )
    assert counts["tiny_burst"] == 2000 and counts["batched"] == 1
    sync, _ = recordings["sync_heavy"]
    assert sync.timeline["nvtx_range"].value_counts().to_dict() == {
        "sync_every_op": 500,
        "sync_once": 500,
    }
    launched = sync.timeline[sync.timeline["api_start_ns"] > 0]
    assert (
        launched["api_start_ns"] <= launched["start_ns"]
    ).all()  # a launch call precedes its kernel


def test_api_calls_blocking_syncs(recordings: dict) -> None:
    sync, _ = recordings["sync_heavy"]
    api = sync.api_calls
    assert not api["name"].str.contains(r"_v\d+$").any()  # version suffixes stripped
    every = api[(api["nvtx_range"] == "sync_every_op") & api["is_sync"]]
    assert len(every) == 500 and set(every["name"]) == {"cudaDeviceSynchronize"}
    assert not api.loc[api["name"] == "cudaLaunchKernel", "is_sync"].any()
    pipe, _ = recordings["pipeline"]
    calls = pipe.api_calls
    assert not calls.loc[
        calls["name"] == "cudaStreamWaitEvent", "is_sync"
    ].any()  # orders streams, host runs on
    assert calls.loc[calls["name"] == "cudaStreamSynchronize", "is_sync"].all()
    assert not calls.loc[calls["name"] == "cudaMemcpyAsync", "is_sync"].any()


# ---------------------------------------------------------------- findings on the recordings


def test_pipeline_flags_the_serial_twin_not_the_stream_split(recordings: dict) -> None:
    _, d = recordings["pipeline"]
    # The analysed region is the part of the run the NVTX ranges cover (the two variants each
    # run three times, interleaved); the program's set-up before it (run_all.py's pageable
    # .cpu() of the inputs, the GPU idle while it pins host buffers with cudaHostAlloc, 46 ms)
    # is start-up, summarised and not ranked.
    assert d.region is not None and d.region.method == "nvtx-annotated"
    assert found(d) == {
        ("pageable-memcpy", "serial_pageable"),
        ("no-copy-compute-overlap", "serial_pageable"),
    }
    assert d.startup is not None and any(
        p.name == "memory allocation" and "cudaHostAlloc" in p.detail and p.time_ns > 40e6
        for p in d.startup.parts
    )
    pageable = by(d, "pageable-memcpy", "serial_pageable")
    h2d = pageable.details["directions"]["h2d"]
    assert (
        h2d["achieved_gb_per_s"] < 12 and h2d["pinned_gb_per_s"] > 45
    )  # pinned copies in stream_split
    assert 0.5 < pageable.impact < 0.9  # of the 60 ms the NVTX ranges cover
    overlap = by(d, "no-copy-compute-overlap", "serial_pageable")
    assert overlap.details["overlap_fraction"] == 0.0 and overlap.details["copy_streams"] == [7]
    measured = {m["range"]: m["overlap_fraction"] for m in overlap.details["overlap_by_range"]}
    assert measured["stream_split"] > 0.6 and measured["serial_pageable"] == 0.0


def test_stream_split_overlap_is_measured(recordings: dict) -> None:
    session, _ = recordings["pipeline"]
    summary = {s.range: s for s in overlap_summary(prepare(session))}
    split = summary["stream_split"]
    assert 0.6 < split.overlap_fraction < 0.95
    assert split.copy_streams != split.kernel_streams and len(split.copy_streams) == 2
    assert split.union_ns < split.h2d_ns + split.d2h_ns + split.kernel_ns
    assert summary["serial_pageable"].overlap_fraction == 0.0


def test_tiny_burst_is_launch_bound_and_batched_is_not(recordings: dict) -> None:
    _, d = recordings["tiny_burst"]
    # Module loading (cuLibraryLoadData) and lazy kernel loading before the ranges are start-up.
    assert found(d) == {("launch-overhead", "tiny_burst")}
    f = by(d, "launch-overhead", "tiny_burst")
    assert f.details["kernels"] == 2000
    assert f.details["gap_ns"] > 10 * f.details["busy_ns"]
    assert 0.8 < f.impact < 1.0  # of the 30 ms the two ranges cover


def test_sync_every_op_is_sync_heavy_and_sync_once_is_not(recordings: dict) -> None:
    _, d = recordings["sync_heavy"]
    # sync_once's 500 tiny launches are launch-bound (14 us apart), as tiny_burst's are: that
    # finding is right. The syncs' gaps are claimed by sync-heavy, so sync_every_op has no
    # launch-overhead finding (no double counting).
    assert found(d) == {("sync-heavy", "sync_every_op"), ("launch-overhead", "sync_once")}
    f = by(d, "sync-heavy", "sync_every_op")
    assert f.details["sync_calls"] == 500 and f.details["median_work_ns"] < 2000
    assert 0.1 < f.impact < 0.4  # of the 23 ms the two ranges cover


@pytest.mark.parametrize("name", ["pipeline", "tiny_burst", "sync_heavy"])
def test_impacts_add_up_to_at_most_the_time_that_exists(recordings: dict, name: str) -> None:
    _, d = recordings[name]
    timeline = [f for f in d.program_findings if f.rule in TIMELINE_RULES]
    assert timeline and all(0 < f.impact <= 1 and 0 <= f.recoverable <= 1 for f in timeline)
    assert sum(f.impact for f in timeline) <= 1.0
    spans = {f.details["span_ns"] for f in timeline}
    assert len(spans) == 1 and sum(f.saved_ns for f in timeline) <= spans.pop()


def test_json_program_findings_carry_the_range(recordings: dict) -> None:
    _, d = recordings["pipeline"]
    doc = json.loads(json.dumps(d.to_json()))
    # every program finding carries "range", null for work outside any NVTX range
    assert all("range" in f for f in doc["program_findings"])
    ranges = {(f["cause"], f["range"]) for f in doc["program_findings"]}
    assert ("pageable-memcpy", "serial_pageable") in ranges
    assert doc["device"]["name"] == "NVIDIA H200"
    # The whole timeline, asked for: the set-up copies outside every range come back, null range.
    whole = json.loads(
        json.dumps(diagnose(load(DATA / "nsys/pipeline.sqlite.gz"), region="all").to_json())
    )
    assert whole["region"]["method"] == "user"
    assert ("pageable-memcpy", None) in {
        (f["cause"], f["range"]) for f in whole["program_findings"]
    }


# ---------------------------------------------------------------- nsys stats CSV


def test_stats_gpu_trace_matches_the_sqlite_timeline(data_dir: Path, recordings: dict) -> None:
    path = data_dir / "nsys" / "tiny_burst_stats_cuda_gpu_trace.csv.gz"
    assert reader_for(path) is nsys_stats_csv.read
    session = load(path)
    t = session.timeline
    assert len(t) == len(recordings["tiny_burst"][0].timeline) == 2049
    sqlite_starts = recordings["tiny_burst"][0].timeline["start_ns"].to_numpy()
    np.testing.assert_array_equal(np.sort(t["start_ns"].to_numpy()), np.sort(sqlite_starts))
    copy = t[t["kind"] == "memcpy"].iloc[0]
    assert (copy["copy_kind"], copy["src_kind"], copy["dst_kind"], copy["bytes"]) == (
        "DtoH",
        "device",
        "pinned",
        4.0,
    )
    assert t.loc[t["kind"] == "kernel", "grid"].iloc[1] == "(2000, 1, 1)"
    assert (session.meta.device or {})["name"] == "NVIDIA H200"
    d = diagnose(session)  # no NVTX in a stats trace: the burst is found, unattributed
    assert ("launch-overhead", None) in found(d)


def test_stats_summaries_go_to_meta(data_dir: Path) -> None:
    session = load(
        [
            data_dir / "nsys" / "sync_heavy_stats_cuda_gpu_kern_sum.csv.gz",
            data_dir / "nsys" / "sync_heavy_stats_cuda_api_sum.csv.gz",
        ]
    )
    kernels = session.meta.nsys_cuda_gpu_kern_sum or ()
    assert sum(k["instances"] for k in kernels) == 1042
    assert kernels[0]["total_time_ns"] == 824799
    api = {a["name"]: a for a in session.meta.nsys_cuda_api_sum or ()}
    assert api["cudaDeviceSynchronize"]["num_calls"] == 507
    assert not session.has_timeline()


# ---------------------------------------------------------------- synthetic exports

SCHEMA = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER"
        " NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY "
        "INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT "
        "NULL, blockZ INTEGER NOT NULL"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid "
        "INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER"
        " NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes "
        "INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT, globalTid "
        "INTEGER, textId INTEGER, domainId INTEGER"
    ),
    "TARGET_INFO_GPU": (
        "id INTEGER, name TEXT, smCount INTEGER, computeMajor INTEGER, computeMinor INTEGER"
    ),
}
PID = (1 << 24 | 77) << 24  # serialised global pid 77 on vm 1
TID = PID | 78  # its thread 78


def make_db(
    path: Path, rows: dict[str, list[tuple]], tables: tuple[str, ...] | None = None
) -> Path:
    con = sqlite3.connect(path)
    for table in tables or tuple(SCHEMA):
        con.execute(f"CREATE TABLE {table} ({SCHEMA[table]})")
    for table, values in rows.items():
        if values:
            con.executemany(
                f"INSERT INTO {table} VALUES ({', '.join('?' * len(values[0]))})", values
            )
    con.commit()
    con.close()
    return path


def kernel(start: int, end: int, corr: int, stream: int = 7) -> tuple:
    return (start, end, 0, 1, stream, corr, PID, 1, 2, 4, 1, 1, 128, 1, 1)


STRINGS = [
    (0, "cudaLaunchKernel_v7000"),
    (1, "void add<float>(float*)"),
    (2, "add"),
    (3, "cudaDeviceSynchronize_v3020"),
    (4, "registered_range"),
]


def test_nested_and_start_end_ranges_and_null_ends(tmp_path: Path) -> None:
    rows = {
        "StringIds": STRINGS,
        "CUPTI_ACTIVITY_KIND_KERNEL": [
            kernel(1500, 1600, 1),
            kernel(2500, 2600, 2),
            kernel(3500, 3600, 3),
            kernel(9500, 9600, 4),
        ],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            (1000, 1100, 0, TID, 1, 0, 0),
            (2000, 2100, 0, TID, 2, 0, 0),
            (3000, 3100, 0, TID, 3, 0, 0),
            (9000, 9100, 0, TID, 4, 0, 0),
        ],
        "NVTX_EVENTS": [
            (500, 5000, 59, "outer", TID, None, 0),  # push/pop
            (1800, 2200, 59, None, TID, 4, 0),  # registered string via textId
            (2900, 3200, 60, "start_end", TID, None, 0),  # start/end range
            (2950, None, 34, "a mark", TID, None, 0),
        ],  # instant marker: no end, skipped
        "TARGET_INFO_GPU": [(0, "Test GPU", 10, 8, 6)],
    }
    session = nsys_sqlite.read(make_db(tmp_path / "t.sqlite", rows))
    assert list(session.timeline["nvtx_range"].fillna("-")) == [
        "outer",
        "registered_range",
        "start_end",
        "-",
    ]
    nvtx = session.nvtx_ranges.set_index("name")
    assert "a mark" not in nvtx.index and nvtx.loc["registered_range", "depth"] == 1
    assert (nvtx.loc["outer", "process_id"], nvtx.loc["outer", "thread_id"]) == (77, 78)
    assert (
        session.timeline["grid"].iloc[0] == "(4, 1, 1)"
        and session.timeline["name"].iloc[0] == "void add<float>(float*)"
    )
    assert session.meta.device == {"id": 0, "name": "Test GPU", "sm_count": 10, "cc": "8.6"}


def test_missing_tables_are_tolerated(tmp_path: Path) -> None:
    rows = {
        "StringIds": STRINGS,
        "CUPTI_ACTIVITY_KIND_KERNEL": [
            kernel(100 + 20_000 * i, 1100 + 20_000 * i, i) for i in range(100)
        ],
    }
    path = make_db(tmp_path / "k.sqlite", rows, tables=("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL"))
    session = nsys_sqlite.read(path)
    assert len(session.timeline) == 100 and session.timeline["nvtx_range"].isna().all()
    assert session.api_calls.empty and session.nvtx_ranges.empty and session.meta.device is None
    assert (session.timeline["api_start_ns"] == -1).all()
    d = diagnose(session)
    assert all(f.range is None for f in d.program_findings)
    assert ("launch-overhead", None) in found(d)  # 100 x 1 us kernels 19 us apart


def test_empty_timeline_skips_the_timeline_rules(tmp_path: Path) -> None:
    session = nsys_sqlite.read(
        make_db(tmp_path / "e.sqlite", {"TARGET_INFO_GPU": [(0, "Test GPU", 10, 9, 0)]})
    )
    assert not session.has_timeline() and (session.meta.device or {})["name"] == "Test GPU"
    d = diagnose(session)
    assert not d.program_findings
    skipped = {s.rule: s.reason for s in d.skipped_rules}
    assert all("timeline" in skipped[r] for r in TIMELINE_RULES)


def test_enum_tables_absent_use_cupti_values_and_gz_is_read(tmp_path: Path) -> None:
    rows = {
        "CUPTI_ACTIVITY_KIND_MEMCPY": [
            (0, 1000, 0, 1, 7, 1, PID, 4096, 1, 0, 2),
            (2000, 2500, 0, 1, 7, 2, PID, 4096, 2, 2, 1),
        ]
    }
    plain = make_db(tmp_path / "m.sqlite", rows, tables=("CUPTI_ACTIVITY_KIND_MEMCPY",))
    packed = tmp_path / "m.sqlite.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert reader_for(packed) is nsys_sqlite.read
    t = load(packed).timeline
    assert list(zip(t["copy_kind"], t["src_kind"], t["dst_kind"], strict=True)) == [
        ("HtoD", "pageable", "device"),
        ("DtoH", "device", "pinned"),
    ]
    assert list(t["name"]) == ["[CUDA memcpy Host-to-Device]", "[CUDA memcpy Device-to-Host]"]


def test_unreadable_inputs_raise_input_errors(tmp_path: Path) -> None:
    garbage = tmp_path / "bad.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(InputError) as bad:
        nsys_sqlite.read(garbage)
    assert "nsys export" in bad.value.hint
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="no Nsight Systems tables"):
        nsys_sqlite.read(other)


def test_sync_gaps_are_not_also_launch_overhead(tmp_path: Path) -> None:
    """Tiny kernels each followed by a blocking sync: sync-heavy claims the gaps, launch-overhead
    does not; impacts stay within the span."""
    kernels, calls = [], []
    for i in range(200):
        t0 = 10_000 + i * 30_000
        kernels.append(kernel(t0 + 8_000, t0 + 9_000, 2 * i + 1))
        calls += [
            (t0, t0 + 5_000, 0, TID, 2 * i + 1, 0, 0),
            (t0 + 7_000, t0 + 10_000, 0, TID, 2 * i + 2, 3, 0),
        ]
    session = nsys_sqlite.read(
        make_db(
            tmp_path / "s.sqlite",
            {
                "StringIds": STRINGS,
                "CUPTI_ACTIVITY_KIND_KERNEL": kernels,
                "CUPTI_ACTIVITY_KIND_RUNTIME": calls,
            },
        )
    )
    d = diagnose(session)
    assert found(d) == {("sync-heavy", None)}
    assert sum(f.impact for f in d.program_findings) <= 1


def test_enclosing_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        starts = np.sort(rng.integers(0, 1000, n))
        ends = starts + rng.integers(0, 300, n)
        times = rng.integers(-10, 1400, 200)
        got = enclosing(starts, ends, times)
        for t, g in zip(times, got, strict=True):
            inside = [i for i in range(n) if starts[i] <= t <= ends[i]]
            assert g == (max(inside) if inside else -1)


# ---------------------------------------------------------------- rules


def test_timeline_rules_load_and_are_registered() -> None:
    rules = {r.id: r for r in default_rules()}
    for rule_id, cause in TIMELINE_RULES.items():
        rule = rules[rule_id]
        assert (rule.cause, rule.scope) == (cause, "program")
        assert PROGRAM_ANALYSES[rule.analysis].needs == "timeline"
    # No idle gap may count both as launch overhead and as an idle gap.
    assert find_rule("NSD405").params["max_gap_ns"] <= find_rule("NSD404").params["min_gap_ns"]


# ---------------------------------------------------------------- the scale benchmark's generator


def test_benchmark_generator_makes_a_launch_bound_export(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "bench_timeline", Path(__file__).parents[1] / "benchmarks" / "bench_timeline.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.generate(tmp_path / "b.sqlite", 20_000)
    session = nsys_sqlite.read(tmp_path / "b.sqlite")
    assert (session.timeline["kind"] == "kernel").sum() == 20_000 and len(
        session.nvtx_ranges
    ) == 1100
    d = diagnose(session)
    assert ("launch-overhead", "burst") in found(d) and sum(
        f.impact for f in d.program_findings
    ) <= 1
