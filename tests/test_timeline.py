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
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.program import context
from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
from nsdiag.analysis.program.timeline.host_wait import (
    CPU_BOUND,
    IDLE_OTHER,
    LAUNCH_BOUND,
    SYNC_BOUND,
)
from nsdiag.analysis.program.timeline.overlap import overlap_summary
from nsdiag.analysis.program.timeline.view import prepare
from nsdiag.analysis.program.timeline.waits import CATEGORIES, WaitAccount
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.analysis.records.findings import Finding
from nsdiag.analysis.rules.spec import RuleSpec
from nsdiag.analysis.ruleset import default_rules, find_rule
from nsdiag.errors import InputError
from nsdiag.model.intervals import enclosing, enclosing_disjoint
from nsdiag.model.session import Session
from nsdiag.readers import load, nsys_sqlite, nsys_stats_csv, reader_for
from tests.conftest import DATA

TIMELINE_RULES = {
    "NSD401": "pageable-memcpy",
    "NSD402": "no-copy-compute-overlap",
    "NSD403": "sync-heavy",
    "NSD404": "gpu-idle-gaps",
    "NSD406": "launch-bound",
    "NSD407": "cpu-bound",
}
# The four host-wait findings (timeline/host_wait.py): each reports its own part of the wait
# account, the column(s) of WaitAccount.gaps it reads.
HOST_WAIT = {
    "NSD403": ("sync_ns",),
    "NSD406": ("launch",),
    "NSD407": ("cpu",),
    "NSD404": ("alloc", "wait", "unknown"),
}
ACCOUNT_KEYS = {"sync_ns": "sync_ns", **{c: f"{c}_ns" for c in CATEGORIES}}


def diagnose_with_account(
    session: Session, rules: Iterable[RuleSpec] | None = None
) -> tuple[Diagnosis, WaitAccount | None]:
    """The diagnosis, and the wait account its host-wait analyses read (ProgramContext.waits;
    None where none of them ran)."""
    built: list[WaitAccount] = []
    real = context.account

    def spy(*args: object, **kwargs: object) -> WaitAccount:
        built.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return built[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(context, "account", spy)
        diagnosis = diagnose(session, rules)
    assert len(built) <= 1, "the wait account is built once per diagnosis"
    return diagnosis, (built[0] if built else None)


def check_host_wait_is_disjoint(diagnosis: Diagnosis, waits: WaitAccount) -> dict[int, float]:
    """Every idle nanosecond of the account is in one column (a category or the syncs' claim),
    each host-wait analysis saves its own column(s) of one lane in all its findings there (one
    per NVTX range; NSD406 less the graph's node gap per idle gap it touches), and on no lane do
    the four analyses save more than its idle time. Returns the four analyses' saving per lane."""
    gap = find_rule("NSD406").params["graph_node_gap_ns"]
    gaps = waits.gaps
    columns = [*CATEGORIES, "sync_ns"]
    assert (gaps[columns] >= -1e-6).all().all()
    np.testing.assert_allclose(gaps[columns].sum(axis=1), gaps["idle_ns"], rtol=1e-9, atol=1e-3)
    lanes = {int(lane): group for lane, group in gaps.groupby("device")}
    saved: dict[int, float] = dict.fromkeys(lanes, 0.0)
    by_rule: dict[tuple[str, int], float] = {}
    for finding in diagnosis.program_findings:
        if finding.rule not in HOST_WAIT:
            continue
        lane = _lane_of(finding, lanes)
        by_rule[(finding.rule, lane)] = by_rule.get((finding.rule, lane), 0.0) + float(
            finding.saved_ns or 0.0
        )
    ranges = {f.range for f in diagnosis.program_findings if f.rule in HOST_WAIT}
    for (rule, lane), total in by_rule.items():
        group = lanes[lane]
        own = float(group[list(HOST_WAIT[rule])].sum().sum())
        # a range too small to report alone is left out, and the optimizer's steps (NSD413)
        # may hold some of launch-bound's and CPU-bound's time: at most the lane's column(s)
        if rule == "NSD406":
            touched = int((group["launch"] > 0).sum())
            assert total <= max(own - gap * touched, 0.0) + 1.0
        elif ranges:
            assert total <= own + 1.0
        else:
            assert total == pytest.approx(own, rel=1e-9, abs=1.0)
        saved[lane] += total
    for lane, group in lanes.items():
        assert saved[lane] <= float(group["idle_ns"].sum()) + 1.0, lane
    return saved


def _lane_of(finding: Finding, lanes: dict[int, object]) -> int:
    """The lane of the account whose idle time by column the finding's details show."""
    shown = finding.details["account"]
    matches = [
        lane
        for lane, group in lanes.items()
        if all(
            float(group[column].sum()) == pytest.approx(shown[key], rel=1e-9, abs=1.0)
            for column, key in ACCOUNT_KEYS.items()
        )
    ]
    assert matches, (finding.rule, shown)
    return matches[0]


@pytest.fixture(scope="module")
def diagnosed(data_dir: Path) -> dict[str, tuple[Session, Diagnosis, WaitAccount | None]]:
    out = {}
    for name in ("pipeline", "tiny_burst", "sync_heavy"):
        session = load(data_dir / "nsys" / f"{name}.sqlite.gz")
        out[name] = (session, *diagnose_with_account(session))
    return out


@pytest.fixture(scope="module")
def recordings(diagnosed: dict) -> dict[str, tuple]:
    return {name: (session, d) for name, (session, d, _) in diagnosed.items()}


@pytest.fixture(scope="module")
def accounts(diagnosed: dict) -> dict[str, WaitAccount]:
    return {name: waits for name, (_, _, waits) in diagnosed.items()}


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


def test_pipeline_flags_the_serial_twin_not_the_stream_split(
    recordings: dict, accounts: dict
) -> None:
    _, d = recordings["pipeline"]
    # The analysed region is the part of the run the NVTX ranges cover (the two variants each
    # run three times, interleaved); the program's set-up before it (run_all.py's pageable
    # .cpu() of the inputs, the GPU idle while it pins host buffers with cudaHostAlloc, 46 ms)
    # is start-up, summarised and not ranked.
    assert d.region is not None and d.region.method == "nvtx-annotated"
    copies = {f for f in found(d) if f[0] in ("pageable-memcpy", "no-copy-compute-overlap")}
    assert copies == {
        ("pageable-memcpy", "serial_pageable"),
        ("no-copy-compute-overlap", "serial_pageable"),
    }
    # The GPU idles 3.7 ms in the region (6.5%), two thirds of it before serial_pageable's
    # work: the host-wait findings share that idle time and name serial_pageable too; the
    # stream split gets no finding at all.
    assert {rng for _, rng in found(d)} == {"serial_pageable"}
    idle = accounts["pipeline"].idle_ns
    assert 3e6 < idle < 4.5e6
    waits = [f for f in d.program_findings if f.rule in HOST_WAIT]
    assert sum(f.saved_ns for f in waits) <= idle and all(f.impact < 0.05 for f in waits)
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


def test_tiny_burst_is_launch_bound_and_batched_is_not(recordings: dict, accounts: dict) -> None:
    _, d = recordings["tiny_burst"]
    # Module loading (cuLibraryLoadData) and lazy kernel loading before the ranges are start-up.
    assert found(d) == {("launch-bound", "tiny_burst")}
    f = by(d, "launch-bound", "tiny_burst")
    assert f.details["launches"] == 2001  # the device's kernels in the region: 2000 + batched's 1
    assert f.details["launch_idle_ns"] > 10 * f.details["gpu_busy_ns"]
    assert f.details["graph_launches"] == 0 and "CUDA graphs (" not in f.message
    # A graph still leaves graph_node_gap_ns (1 us) in each of the range's 1999 gaps between
    # launches (the gap before batched's launch is batched's, too small to report alone).
    assert f.saved_ns == pytest.approx(f.details["launch_idle_ns"] - 1999 * 1000, abs=1.0)
    assert 0.8 < f.impact < 1.0  # of the 30 ms the two ranges cover
    # The launch-bound idle time ends in the burst; batched's one kernel ends 0.5% of it.
    gaps = accounts["tiny_burst"].gaps
    by_range = gaps.groupby("next_range")["launch"].sum()
    assert by_range["batched"] < 0.01 * by_range["tiny_burst"]
    assert (
        by_range["tiny_burst"]
        > 0.95 * gaps.loc[gaps["next_range"] == "tiny_burst", "idle_ns"].sum()
    )


def test_sync_every_op_is_sync_heavy_and_sync_once_is_not(recordings: dict, accounts: dict) -> None:
    session, d = recordings["sync_heavy"]
    # Both ranges run 500 tiny launches; sync_every_op synchronises after each. The device's
    # launch-bound idle time (14 us between launches even without syncs, as in tiny_burst) is
    # one finding; the syncs' share of the idle time is sync-heavy's, taken out of it first.
    assert {cause for cause, _ in found(d)} == {"sync-heavy", "launch-bound"}
    f = by(d, "sync-heavy", "sync_every_op")
    # its own 500: sync_once's one and the 2 between the ranges are not sync_every_op's
    # (issue 39: a range's syncs were once credited to another range)
    assert f.details["sync_calls"] == 500 and "cudaDeviceSynchronize x500" in f.message
    # What dropping the syncs saves: sync_every_op would run at sync_once's pace, 7.2 ms less.
    walls = session.nvtx_ranges.set_index("name")["duration_ns"]
    faster = float(walls["sync_every_op"] - walls["sync_once"])
    assert 0.7 * faster < f.saved_ns < 1.05 * faster
    assert f.saved_ns > 2 * f.details["host_slack_ns"]  # the round trips, not only the slack
    assert 0.2 < f.impact < 0.35  # of the 23 ms the two ranges cover
    # The syncs' claim lies in the gaps sync_every_op's syncs drained; sync_once's one sync
    # claims almost nothing.
    claimed = accounts["sync_heavy"].gaps.groupby("next_range")["sync_ns"].sum()
    assert claimed["sync_every_op"] == pytest.approx(f.saved_ns, rel=1e-9)
    assert claimed["sync_once"] < 0.02 * claimed["sync_every_op"]


@pytest.mark.parametrize("name", ["pipeline", "tiny_burst", "sync_heavy"])
def test_impacts_add_up_to_at_most_the_time_that_exists(
    recordings: dict, accounts: dict, name: str
) -> None:
    _, d = recordings[name]
    timeline = [f for f in d.program_findings if f.rule in TIMELINE_RULES]
    assert timeline and all(0 < f.impact <= 1 and 0 <= f.recoverable <= 1 for f in timeline)
    assert sum(f.impact for f in timeline) <= 1.0
    spans = {f.details["span_ns"] for f in timeline}
    assert len(spans) == 1 and sum(f.saved_ns for f in timeline) <= spans.pop()
    # The host-wait findings save disjoint parts of the idle time, never more than there is.
    waits = accounts[name]
    saved = check_host_wait_is_disjoint(d, waits)
    assert sum(saved.values()) <= waits.idle_ns and any(saved.values())


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
    # No NVTX and no CUDA API table in a stats trace: the idle time is found, unattributed, and
    # what the host did is unknown (never guessed as launching, CPU work or syncs).
    d, waits = diagnose_with_account(session)
    assert found(d) == {("gpu-idle-gaps", None)}
    (f,) = d.program_findings
    assert waits is not None and not waits.has_api
    assert waits.total("unknown") == pytest.approx(waits.idle_ns) and waits.idle_ns > 0
    assert (
        f.saved_ns == pytest.approx(f.details["unknown_idle_ns"])
        and f.details["alloc_idle_ns"] == 0
    )
    assert "unknown (no CUDA API record)" in f.message
    # about the idle time of the SQLite export's account (its region is the NVTX ranges, the
    # stats trace's the kernel sequence)
    sqlite_idle = recordings["tiny_burst"][1].program_findings[0].details["account"]
    assert f.saved_ns == pytest.approx(sum(sqlite_idle.values()), rel=0.1)


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
    # 100 x 1 us kernels 19 us apart: without CUDA API records the host is unknown, so the idle
    # time is NSD404's, and the analyses that read the host's calls are skipped, saying why.
    assert found(d) == {("gpu-idle-gaps", None)}
    (f,) = d.program_findings
    assert f.saved_ns == f.details["unknown_idle_ns"]
    assert 95 * 19_000 <= f.saved_ns <= 99 * 19_000  # (nearly) all 99 gaps, 19 us each
    skipped = {s.rule: s.reason for s in d.skipped_rules}
    for rule in ("NSD403", "NSD406", "NSD407"):
        assert "CUDA API" in skipped[rule], skipped.get(rule)


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


def test_sync_gaps_are_not_counted_again_as_launch_bound(tmp_path: Path) -> None:
    """Tiny kernels each followed by a blocking sync, 30 us apart: each gap the sync drains is
    29 us idle; the syncs claim their round trip (the sync's 3 us plus the next launch's 8 us of
    latency), launch-bound only what is left; impacts stay within the span."""
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
    d, waits = diagnose_with_account(session)
    assert found(d) == {("sync-heavy", None), ("launch-bound", None)}
    assert waits is not None
    drained = waits.gaps[waits.gaps["opened"]]
    assert len(drained) >= 195 and (drained["idle_ns"] == 29_000).all()
    sync = by(d, "sync-heavy", None)
    assert sync.saved_ns == pytest.approx(len(drained) * 11_000, abs=1.0)
    launch = by(d, "launch-bound", None)
    # what the syncs claim is not launch-bound idle time too
    assert launch.details["launch_idle_ns"] == pytest.approx(
        waits.idle_ns - sync.saved_ns - waits.total("wait"), abs=1.0
    )
    assert launch.details["launch_idle_ns"] < len(drained) * (29_000 - 11_000)
    check_host_wait_is_disjoint(d, waits)
    assert sum(f.saved_ns for f in d.program_findings) <= waits.idle_ns
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


def test_enclosing_disjoint_is_enclosing_on_the_outermost_ranges() -> None:
    """The outermost of nested ranges (code_sites.py's `top`: each starts at or after every
    earlier range's end), with ranges that touch and zero-length ones: the last start is the
    enclosing range's."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        starts = np.sort(rng.integers(0, 400, n))
        ends = starts + rng.integers(0, 40, n) * rng.integers(0, 2, n)  # some zero-length
        reach = np.maximum.accumulate(np.concatenate([[np.iinfo("int64").min], ends[:-1]]))
        top = np.flatnonzero(starts >= reach)
        times = np.concatenate([rng.integers(-10, 460, 100), starts, ends])
        assert (
            enclosing_disjoint(starts[top], ends[top], times)
            == enclosing(starts[top], ends[top], times)
        ).all()


# ---------------------------------------------------------------- rules


def test_timeline_rules_load_and_are_registered() -> None:
    rules = {r.id: r for r in default_rules()}
    for rule_id, cause in TIMELINE_RULES.items():
        rule = rules[rule_id]
        assert (rule.cause, rule.scope) == (cause, "program")
        assert PROGRAM_ANALYSES[rule.analysis].needs == "timeline"
    # The tiny-kernel runs of NSD405 are gone: launch-bound idle time is NSD406's.
    assert "NSD405" not in rules
    # The four host-wait rules run the four analyses of host_wait.py, and no idle time counts
    # twice: the syncs' share is taken out before the other three read theirs.
    records = {a.name for a in (LAUNCH_BOUND, CPU_BOUND, SYNC_BOUND, IDLE_OTHER)}
    assert {rules[r].analysis for r in HOST_WAIT} == records
    assert set(SYNC_BOUND.claims_before) == {"launch_bound", "cpu_bound", "gpu_idle_gaps"}
    assert find_rule("NSD406").params["graph_node_gap_ns"] == 1000


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
    d, waits = diagnose_with_account(session)
    assert ("launch-bound", "burst") in found(d) and sum(f.impact for f in d.program_findings) <= 1
    assert waits is not None
    check_host_wait_is_disjoint(d, waits)
