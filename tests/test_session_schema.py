"""The Session's schema (nsdiag/model/schema.py) and its typed meta (nsdiag/model/meta.py): every
recording passes; a reader that breaks the contract is refused, naming the column; session
folders of other versions load; meta is frozen."""

from __future__ import annotations

import dataclasses
import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsdiag.analysis.engine import diagnose
from nsdiag.errors import InputError, MissingDependencyError
from nsdiag.model import store
from nsdiag.model.catalogue import IDENTITY_COLUMNS
from nsdiag.model.meta import Rank, SessionMeta, Source, first_present
from nsdiag.model.schema import (
    COPY_KINDS,
    KERNELS,
    MEMORY_KINDS,
    SYNC_TYPES,
    TABLES,
    UNKNOWN,
    SchemaError,
    known,
)
from nsdiag.model.session import Session, check_session, session_problems
from nsdiag.readers import load, nsys_sqlite, nsys_stats_csv, nsys_tables

DATA = Path(__file__).parent / "data"
SUFFIXES = (".csv", ".csv.gz", ".sqlite", ".sqlite.gz", ".ncu-rep", ".ncu-rep.gz")
SESSION_FOLDERS = sorted(p.parent for p in DATA.rglob("session.json"))
PIPELINE = DATA / "nsys" / "pipeline.sqlite.gz"  # kernels, copies of three kinds, memsets


def _recordings() -> list[Path]:
    """Every input under tests/data: session folders and the exports outside them."""
    exports = [
        p
        for p in sorted(DATA.rglob("*"))
        if p.is_file()
        and p.name.endswith(SUFFIXES)
        and not any(folder in p.parents for folder in SESSION_FOLDERS)
    ]
    return [*SESSION_FOLDERS, *exports]


@pytest.mark.parametrize("path", _recordings(), ids=lambda p: str(p.relative_to(DATA)))
def test_every_recording_passes_the_schema(path: Path) -> None:
    try:
        session = load(path)  # checks as it reads: a break is a SchemaError
    except MissingDependencyError:
        pytest.skip("needs the ncu-report package")
    assert session_problems(session) == []


def test_the_schema_names_the_catalogue_identity_columns() -> None:
    names = [c.name for c in KERNELS.columns]
    assert names[: len(IDENTITY_COLUMNS)] == list(IDENTITY_COLUMNS)
    assert set(KERNELS.required) == {"id", "name", "demangled", "source"}
    for table in TABLES.values():
        for column in table.columns:
            assert column.meaning and column.dtype in ("int64", "float64", "str", "bool")


def test_the_readers_labels_are_in_the_vocabularies() -> None:
    assert set(nsys_tables.MEMCPY_KINDS.values()) <= set(COPY_KINDS)
    assert set(nsys_tables.MEM_KINDS.values()) <= set(MEMORY_KINDS)
    assert set(nsys_tables.SYNC_TYPE_CODES.values()) <= set(SYNC_TYPES)
    assert set(nsys_stats_csv._COPY_KINDS.values()) <= set(COPY_KINDS)
    assert known("HtoD", COPY_KINDS) == "HtoD" and known(None, COPY_KINDS) is None
    assert known("HtoQ", COPY_KINDS) == UNKNOWN


# ---------------------------------------------------------------- a reader breaking the contract


def _patched_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[Session], None]
) -> Path:
    """nsys_sqlite.read made to break its output; a copy of PIPELINE to read (the tests' cache
    of the recordings does not hold it)."""
    real = nsys_sqlite.read

    def read(path: Path) -> Session:
        session = real(path)
        change(session)
        return session

    monkeypatch.setattr(nsys_sqlite, "read", read)
    copy = tmp_path / PIPELINE.name
    shutil.copyfile(PIPELINE, copy)
    return copy


def test_a_missing_required_column_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def drop(session: Session) -> None:
        session.timeline = session.timeline.drop(columns=["stream"])

    path = _patched_read(monkeypatch, tmp_path, drop)
    with pytest.raises(SchemaError) as error:
        load(path)
    message = str(error.value)
    assert "internal error" in message and str(path) in message
    assert "timeline lacks the required column(s) stream" in message
    assert error.value.problems == ("timeline lacks the required column(s) stream",)


def test_an_unknown_copy_kind_is_refused_naming_the_column(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def misname(session: Session) -> None:
        copies = session.timeline["kind"] == "memcpy"
        session.timeline.loc[copies.idxmax(), "copy_kind"] = "HostToGPU"

    path = _patched_read(monkeypatch, tmp_path, misname)
    with pytest.raises(SchemaError, match=r"timeline\.copy_kind holds 'HostToGPU'"):
        load(path)


def test_the_error_names_the_reader_and_every_broken_column() -> None:
    session = load(PIPELINE)
    session.timeline = session.timeline.assign(
        src_kind="registered", start_ns=session.timeline["start_ns"].astype(str)
    )
    session.api_calls = session.api_calls.drop(columns=["is_sync"])
    with pytest.raises(SchemaError) as error:
        check_session(session, "nsdiag.readers.example")
    assert error.value.reader == "nsdiag.readers.example"
    assert "nsdiag.readers.example handed over" in str(error.value)
    text = str(session.timeline["start_ns"].dtype)  # str (pandas 3) or object
    assert sorted(error.value.problems) == [
        "api_calls lacks the required column(s) is_sync",
        "timeline.src_kind holds 'registered', not in its vocabulary (pageable, pinned, device, "
        "array, managed, device_static, managed_static, unknown)",
        f"timeline.start_ns has dtype {text}, not int64",
    ]


def test_the_error_crosses_a_worker_process_whole() -> None:
    error = SchemaError("nsdiag.readers.example", ["timeline lacks the required column(s) kind"])
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.problems == error.problems


def test_a_catalogue_metric_must_be_a_number() -> None:
    session = load(DATA / "programs" / "gemm_shapes.raw.csv.gz")
    session.kernels["duration_ns"] = "slow"
    text = str(session.kernels["duration_ns"].dtype)
    assert session_problems(session) == [f"kernels.duration_ns has dtype {text}, not float64"]


def test_empty_tables_and_missing_values_pass() -> None:
    assert session_problems(Session()) == []
    session = load(PIPELINE)
    # a column of missing values is compatible with any dtype; missing codes are allowed
    session.timeline["copy_kind"] = np.nan
    session.timeline["device"] = None
    assert session_problems(session) == []
    session.timeline = pd.DataFrame()  # an empty table may lack its columns
    assert session_problems(session) == []


def test_a_session_folder_with_broken_tables_is_an_input_error(tmp_path: Path) -> None:
    session = load(PIPELINE)
    session.timeline["kind"] = "copy"
    store.save(session, tmp_path / "s")
    with pytest.raises(InputError, match=r"break the Session schema: timeline\.kind holds"):
        store.load(tmp_path / "s")


# ---------------------------------------------------------------- meta on disk


def _folder_with_meta(tmp_path: Path, edit: Callable[[dict[str, object]], None]) -> Path:
    folder = tmp_path / "session"
    shutil.copytree(DATA / "diff_demo" / "naive", folder)
    manifest = json.loads((folder / store.MANIFEST).read_text())
    edit(manifest["meta"])
    (folder / store.MANIFEST).write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize("folder", SESSION_FOLDERS, ids=lambda p: str(p.relative_to(DATA)))
def test_every_session_json_reads_and_writes_back_the_same_keys(folder: Path) -> None:
    meta = json.loads((folder / store.MANIFEST).read_text())["meta"]
    typed = SessionMeta.from_json(meta)
    assert typed.to_json() == meta and list(typed.to_json()) == list(meta)
    assert typed.extra == {}


def test_an_unknown_meta_key_is_kept(tmp_path: Path) -> None:
    future = {"gpu_clocks_locked": True, "levels": [1, 2]}
    folder = _folder_with_meta(tmp_path, lambda meta: meta.update(future_key=future))
    session = store.load(folder)
    assert session.meta.extra == {"future_key": future}
    assert session.meta.command and session.meta.device  # the known keys are read as before
    store.save(session, tmp_path / "again")
    written = json.loads((tmp_path / "again" / store.MANIFEST).read_text())["meta"]
    assert written["future_key"] == future


def test_missing_meta_keys_load_and_diagnose(tmp_path: Path) -> None:
    def strip(meta: dict[str, object]) -> None:
        for key in ("device", "devices", "tools", "command", "profiled_at", "nsys_version"):
            meta.pop(key)

    session = store.load(_folder_with_meta(tmp_path, strip))
    assert session.meta.device is None and session.meta.command is None
    assert session.meta.sources  # what was there is read
    diagnosis = diagnose(session)
    assert diagnosis.device == {} and "command" not in diagnosis.meta


def test_an_empty_meta_loads(tmp_path: Path) -> None:
    session = store.load(_folder_with_meta(tmp_path, lambda meta: meta.clear()))
    assert session.meta == SessionMeta()


@pytest.mark.parametrize(
    "key, value", [("ranks", "two"), ("sources", {"path": "x"}), ("session_start_utc_ns", "1")]
)
def test_a_meta_value_of_the_wrong_type_is_a_malformed_folder(
    tmp_path: Path, key: str, value: object
) -> None:
    folder = _folder_with_meta(tmp_path, lambda meta: meta.update({key: value}))
    with pytest.raises(InputError, match="malformed"):
        store.load(folder)


def test_ranks_round_trip_as_their_json() -> None:
    data = {
        "ranks": [Rank(1, 42, 1, "vm", "r1.sqlite", "env").to_json()],
        "rank_env": {"RANK": 1},
        "command": "python train.py",
    }
    meta = SessionMeta.from_json(data)
    assert meta.ranks == (Rank(1, 42, 1, "vm", "r1.sqlite", "env"),)
    assert meta.command == "python train.py" and meta.to_json() == data


# ---------------------------------------------------------------- typed and frozen


def test_meta_is_frozen() -> None:
    meta = load(PIPELINE).meta
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.warnings = ("changed",)  # type: ignore[misc]
    changed = dataclasses.replace(meta, warnings=("changed",))
    assert changed.warnings == ("changed",) and meta.warnings != changed.warnings


def test_a_session_takes_only_a_session_meta() -> None:
    with pytest.raises(TypeError, match="SessionMeta"):
        Session(meta={"device": {}})  # type: ignore[arg-type]


def test_merged_meta_takes_each_field_from_the_first_input_that_has_it() -> None:
    a = SessionMeta(sources=(Source("a", "ncu-raw-csv"),), device={}, warnings=("w",))
    b = SessionMeta(
        sources=(Source("b", "nsys-sqlite"),),
        device={"name": "GPU"},
        nsys_version="2025.3",
        extra={"k": 2},
    )
    merged = first_present([a, b])
    assert merged.sources == a.sources and merged.device == {} and merged.warnings == ("w",)
    assert merged.nsys_version == "2025.3" and merged.extra == {"k": 2}
