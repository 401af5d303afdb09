"""Save and load a session directory: tidy tables as gzipped CSV plus a JSON manifest.

Floats are written with full precision and read back with pandas' round-trip parser, and each
column's dtype is recorded, so save -> load gives equal frames.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pandas as pd

from nsdiag.errors import InputError, OutputError
from nsdiag.model.canonical import canonical_metrics
from nsdiag.model.catalogue import CATALOGUE
from nsdiag.model.meta import SessionMeta
from nsdiag.model.schema import SchemaError
from nsdiag.model.session import Session, check_session
from nsdiag.safe_write import os_error_hint, replacing, write_atomically

MANIFEST = "session.json"
LOCK = "session.json.lock"  # present while a session is being written into the folder
SCHEMA = "nsdiag.session/1"
MISSING = "#N/A"  # written for missing cells, so an empty string stays an empty string
_PANDAS_MAJOR = int(pd.__version__.split(".")[0])
TABLES = ("kernels", "raw", "rule_results", "timeline", "api_calls", "nvtx_ranges")


def is_session_dir(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def save(session: Session, directory: Path, replace: bool = True) -> Path:
    """Write the tidy tables into `directory` (created if needed; other files there are kept).

    Each file is written safely (nsdiag/safe_write.py: never through a link, atomic), the
    manifest last, so an interrupted save leaves no half session behind a new manifest.
    `replace=False` refuses a folder that already holds a session. While it writes, the folder
    holds a lock file (created exclusively): a second save into it, from another nsdiag running
    at the same time, is refused instead of both succeeding with their tables mixed."""
    _prepare(directory, replace)
    with _writing(directory):
        if not replace and os.path.lexists(directory / MANIFEST):  # written since the check
            raise _holds_session(directory)
        _write(session, directory)
    return directory


# zlib's own default level: 40% less time than gzip's 9 for 3% more bytes (the BERT session's
# tables: 0.93 -> 0.57 s, 2.66 -> 2.74 MB), at the end of every `nsdiag profile`.
_GZIP = {"method": "gzip", "compresslevel": 6, "mtime": 0}


def _write(session: Session, directory: Path) -> None:
    tables_dir = directory / "tables"
    _make_folder(tables_dir)
    dtypes: dict[str, dict[str, str]] = {}
    for name in TABLES:
        frame: pd.DataFrame = getattr(session, name)
        dtypes[name] = {str(c): str(t) for c, t in frame.dtypes.items()}
        with replacing(tables_dir / f"{name}.csv.gz") as temporary:
            frame.to_csv(temporary, index=False, na_rep=MISSING, compression=_GZIP)
    manifest = {
        "schema": SCHEMA,
        "meta": session.meta.to_json(),
        "raw_units": session.raw_units,
        "dtypes": dtypes,
        "columns": {name: [str(c) for c in getattr(session, name).columns] for name in TABLES},
    }
    write_atomically(directory / MANIFEST, json.dumps(manifest, indent=1, default=str).encode())


@contextlib.contextmanager
def _writing(directory: Path) -> Iterator[None]:
    """Hold the folder's lock file while a session is written into it."""
    lock = directory / LOCK
    try:
        os.close(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError as exc:
        raise OutputError(
            f"another nsdiag is writing a session into {directory} (it holds {lock})",
            "wait for it to finish or choose another folder; if no nsdiag is running, "
            f"delete {lock}",
        ) from exc
    except OSError as exc:
        raise OutputError(f"cannot write {lock}: {exc.strerror}", os_error_hint(exc)) from exc
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)


def _holds_session(directory: Path) -> OutputError:
    return OutputError(
        f"{directory} already holds a session ({MANIFEST})",
        "give a new folder, or delete that one first to replace it",
    )


def _prepare(directory: Path, replace: bool) -> None:
    """The session folder exists (made if needed) and may take the session."""
    try:
        exists, is_dir = os.path.lexists(directory), directory.is_dir()
        holds_session = is_dir and os.path.lexists(directory / MANIFEST)
    except OSError as exc:
        raise OutputError(f"cannot write {directory}: {exc.strerror}", os_error_hint(exc)) from exc
    if exists and not is_dir:
        raise OutputError(
            f"{directory} exists and is not a folder",
            "give a new or existing folder for the session",
        )
    if holds_session and not replace:
        raise _holds_session(directory)
    _make_folder(directory)


def _make_folder(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise OutputError(
            f"{directory} exists and is not a folder", "remove it or write elsewhere"
        ) from exc
    except OSError as exc:
        raise OutputError(f"cannot create {directory}: {exc.strerror}", os_error_hint(exc)) from exc


def load(directory: Path) -> Session:
    manifest = _manifest(directory)
    tables = {
        name: _read_table(
            directory / "tables" / f"{name}.csv.gz",
            manifest["columns"][name],
            manifest["dtypes"][name],
        )
        for name in TABLES
    }
    tables["kernels"] = _with_new_catalogue_metrics(tables["kernels"], tables["raw"])
    try:
        session = Session(**tables, raw_units=manifest["raw_units"], meta=manifest["meta"])
        return check_session(session, f"the session folder {directory}")
    except SchemaError as exc:  # tables no nsdiag writes: damaged, or edited by hand
        raise InputError(
            f"{directory} holds tables that break the Session schema: " + "; ".join(exc.problems),
            "re-create the session with nsdiag load or nsdiag profile",
        ) from exc
    except ValueError as exc:  # the tables disagree (raw rows against kernel rows)
        raise InputError(
            f"{directory} holds inconsistent tables: {exc}",
            "re-create the session with nsdiag load or nsdiag profile",
        ) from exc


def _manifest(directory: Path) -> dict[str, Any]:
    """session.json, checked: every field load reads has the type it expects; its meta read
    into a SessionMeta (keys this version does not know kept in its `extra`)."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{path} is unreadable: {exc}", "re-create the session with nsdiag profile"
        ) from exc
    schema = manifest.get("schema") if isinstance(manifest, dict) else None
    if schema != SCHEMA:
        raise InputError(
            f"{directory} was written by an incompatible nsdiag ({schema})",
            f"this nsdiag reads {SCHEMA}",
        )
    manifest.setdefault("raw_units", {})
    manifest.setdefault("meta", {})
    fields_ok = (
        isinstance(manifest.get("columns"), dict)
        and isinstance(manifest.get("dtypes"), dict)
        and all(isinstance(manifest["columns"].get(name), list) for name in TABLES)
        and all(isinstance(manifest["dtypes"].get(name), dict) for name in TABLES)
        and isinstance(manifest["raw_units"], dict)
        and isinstance(manifest["meta"], dict)
        and isinstance(manifest["meta"].get("warnings", []), list)
    )
    try:
        manifest["meta"] = SessionMeta.from_json(manifest["meta"]) if fields_ok else None
    except ValueError:
        fields_ok = False
    if not fields_ok:
        raise InputError(
            f"{path} is malformed (columns, dtypes, raw_units or meta missing or of the wrong "
            "type)",
            "re-create the session with nsdiag load or nsdiag profile",
        )
    return cast(dict[str, Any], manifest)


def _with_new_catalogue_metrics(kernels: pd.DataFrame, raw: pd.DataFrame) -> pd.DataFrame:
    """A session saved by an older nsdiag lacks the catalogue metrics added since: read them
    from its raw table (same rows, same order), as the readers would have."""
    inputs = _new_metric_inputs(kernels, raw) if len(raw) == len(kernels) else []
    if raw.empty or not inputs:
        return kernels
    canonical = canonical_metrics(raw[inputs])
    new = [c for c in canonical.columns if c not in kernels.columns]
    if not new:
        return kernels
    return pd.concat([kernels, canonical[new].set_axis(kernels.index)], axis=1)


def _new_metric_inputs(kernels: pd.DataFrame, raw: pd.DataFrame) -> list[str]:
    """The raw columns of the catalogue metrics `kernels` lacks and `raw` can give (their ncu
    names, groups or pattern): canonical_metrics of those columns alone holds the same new
    metrics as of the whole raw table, at a fraction of its 0.05-0.2 s (850 columns)."""
    have, available = set(kernels.columns), set(raw.columns)
    needed: set[str] = set()
    for spec in CATALOGUE.values():
        if spec.name in have:
            continue
        if spec.pattern:
            needed.update(c for c in raw.columns if re.search(spec.pattern, str(c)))
        elif any(n in available for n in spec.ncu):
            needed.update(n for n in spec.ncu if n in available)
            needed.update(n for group in spec.groups for n in group if n in available)
    return [c for c in raw.columns if c in needed]  # in the raw table's order, as it sums them


def _read_table(path: Path, columns: list[str], dtypes: dict[str, str]) -> pd.DataFrame:
    if not columns:
        return pd.DataFrame()
    numeric = [c for c, t in dtypes.items() if _is_numeric(t)]
    # Strings keep "" as "" (only numeric cells read "" as missing); floats round-trip exactly
    # (pandas 3 does by default; pandas 2 needs the round-trip parser).
    options: dict[str, Any] = {} if _PANDAS_MAJOR >= 3 else {"float_precision": "round_trip"}
    try:
        frame = pd.read_csv(
            path,
            keep_default_na=False,
            na_values={c: ["", MISSING] if c in numeric else [MISSING] for c in dtypes},
            dtype={c: "str" for c in dtypes if c not in numeric},
            low_memory=False,
            **options,
        )
    except (OSError, ValueError, EOFError, zlib.error) as exc:  # gzip cut short or damaged too
        raise InputError(
            f"{path} is unreadable: {exc}", "re-create the session with nsdiag profile"
        ) from exc
    frame = frame[columns] if set(columns) <= set(frame.columns) else frame
    # only the columns pandas did not read as their recorded dtype are converted: a raw table
    # has 850 columns, nearly all read as recorded, and a column set at a time costs 0.2 ms
    read_as = {str(c): str(t) for c, t in frame.dtypes.items()}
    for column, dtype in dtypes.items():
        if column in read_as and (dtype == "object" or read_as[column] != dtype):
            frame[column] = _restore(frame[column], dtype)
    return cast(pd.DataFrame, frame)


def _is_numeric(dtype: str) -> bool:
    return dtype.startswith(("int", "float", "uint", "bool", "Int", "Float", "UInt"))


def _restore(series: pd.Series, dtype: str) -> Any:
    if dtype == "object":
        return (
            series.astype(object).where(series.notna(), None)
            if series.isna().any()
            else series.astype(object)
        )
    try:
        return series.astype(cast(Any, dtype))
    except (TypeError, ValueError):
        return series
