"""Save and load a session directory: tidy tables as gzipped CSV plus a JSON manifest.

Floats are written with full precision and read back with pandas' round-trip parser, and each
column's dtype is recorded, so save -> load gives equal frames.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import zlib
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pandas as pd

from nsdiag.errors import InputError, OutputError
from nsdiag.model.canonical import canonical_metrics
from nsdiag.model.catalogue import CATALOGUE
from nsdiag.model.meta import SessionMeta
from nsdiag.model.schema import TABLES as SCHEMAS
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
    """A folder nsdiag wrote a session into: its session.json, or (that file deleted) its
    tables, which `load` reads on their own."""
    return path.is_dir() and ((path / MANIFEST).is_file() or has_tables(path))


def has_tables(path: Path) -> bool:
    """Every table file of a session is there (tables/NAME.csv.gz), and no save is under way
    or was cut short (its lock file is gone: the tables are one save's)."""
    if os.path.lexists(path / LOCK):
        return False
    return all((path / "tables" / f"{name}.csv.gz").is_file() for name in TABLES)


# A table written ahead of the save (collect/table_staging.py): the frame it was written from
# and the gzipped CSV; save() moves the file into place only if the session's table is that
# same content, and writes it otherwise.
Staged = Mapping[str, tuple[pd.DataFrame, Path]]


def save(
    session: Session, directory: Path, replace: bool = True, staged: Staged | None = None
) -> Path:
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
        _write(session, directory, staged or {})
    return directory


# zlib's own default level: 40% less time than gzip's 9 for 3% more bytes (the BERT session's
# tables: 0.93 -> 0.57 s, 2.66 -> 2.74 MB), at the end of every `nsdiag profile`.
_GZIP = {"method": "gzip", "compresslevel": 6, "mtime": 0}


def write_table(frame: pd.DataFrame, path: Path) -> None:
    """One table as save() writes it (atomically, never through a link)."""
    with replacing(path) as temporary:
        frame.to_csv(temporary, index=False, na_rep=MISSING, compression=_GZIP)


def _same_table(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Equal cells, columns and dtypes: the CSV written from one is the other's."""
    if a is b:
        return True
    return (
        a.shape == b.shape
        and list(a.columns) == list(b.columns)
        and a.dtypes.equals(b.dtypes)
        and a.equals(b)
    )


def _write(session: Session, directory: Path, staged: Staged) -> None:
    tables_dir = directory / "tables"
    _make_folder(tables_dir)
    dtypes: dict[str, dict[str, str]] = {}
    for name in TABLES:
        frame: pd.DataFrame = getattr(session, name)
        dtypes[name] = {str(c): str(t) for c, t in frame.dtypes.items()}
        target = tables_dir / f"{name}.csv.gz"
        ahead = staged.get(name)
        # a link in the way is refused by write_table, as always, not replaced
        if ahead is not None and not target.is_symlink() and _same_table(frame, ahead[0]):
            with contextlib.suppress(FileNotFoundError):
                os.replace(ahead[1], target)
                continue
        write_table(frame, target)
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
    manifest = (
        _manifest(directory)
        if os.path.lexists(directory / MANIFEST) or not has_tables(directory)
        else _manifest_from_tables(directory)
    )
    tables = _read_tables(directory, manifest)
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


def _manifest_from_tables(directory: Path) -> dict[str, Any]:
    """A manifest for a session folder whose session.json was deleted: each table's columns
    from its header, their types from the Session schema (text stays text) or, for the
    columns it does not name (the metrics), from the values; what nsdiag profile's files
    beside the tables say (command.json: the command line; device.json: the GPU); and a
    warning naming what only session.json held."""
    columns: dict[str, list[str]] = {}
    dtypes: dict[str, dict[str, str]] = {}
    device: dict[str, Any] = {}
    for name in TABLES:
        path = directory / "tables" / f"{name}.csv.gz"
        try:
            frame = pd.read_csv(
                path, keep_default_na=False, na_values=["", MISSING], low_memory=False
            )
        except pd.errors.EmptyDataError:  # an empty table is stored bare
            frame = pd.DataFrame()
        except (OSError, ValueError, EOFError, zlib.error) as exc:
            raise InputError(f"{path} is unreadable: {exc}", _REBUILD.format(directory)) from exc
        columns[name] = [str(c) for c in frame.columns]
        if name == "kernels" and len(frame):
            device = _kernels_device(frame)
        dtypes[name] = {str(c): _inferred(name, str(c), frame[c]) for c in frame.columns}
    warning = (
        f"{directory} has no {MANIFEST}: read from its tables (column types inferred; the "
        "Nsight Compute metrics' units and the nsys report's GPU clocks and bandwidth were only "
        f"in {MANIFEST}); {_REBUILD.format(directory)}"
    )
    meta: dict[str, Any] = {"warnings": [warning], **_profile_files(directory)}
    meta["device"] = {**device, **meta.get("device", {})} or None
    return {"schema": SCHEMA, "meta": SessionMeta.from_json(meta), "raw_units": {},
            "columns": columns, "dtypes": dtypes}  # fmt: skip


_REBUILD = (
    "to rebuild it, nsdiag load -o NEW_FOLDER {0}/reports/* (the reports nsdiag profile kept)"
)


def _inferred(table: str, column: str, values: pd.Series) -> str:
    """A column's dtype as session.json would have recorded it: the schema's for the columns
    it names (text as text, 'object' where values are missing), else the values' own."""
    declared = next((c.dtype for c in SCHEMAS[table].columns if c.name == column), None)
    if declared == "str" or (declared is None and values.dtype == object):
        return "object" if values.isna().any() else "str"
    if declared is not None and declared != "str" and values.dtype == object:
        return "object"  # not numbers after all: left as read
    return str(values.dtype) if declared is None or values.isna().any() else declared


def _kernels_device(kernels: pd.DataFrame) -> dict[str, Any]:
    """The GPU as the profiled launches name it (their first row): name, cc, SM count."""
    first = kernels.iloc[0]
    out: dict[str, Any] = {}
    if "device" in kernels and isinstance(first["device"], str) and first["device"]:
        out["name"] = first["device"]
    if "cc" in kernels and pd.notna(first["cc"]):
        out["cc"] = str(first["cc"])
    if "sm_count" in kernels and pd.notna(first["sm_count"]):
        out["sm_count"] = int(first["sm_count"])
    return out


def _profile_files(directory: Path) -> dict[str, Any]:
    """The command line and GPU that nsdiag profile's command.json and device.json record."""
    out: dict[str, Any] = {}
    try:
        command = json.loads((directory / "command.json").read_text())
        if isinstance(command, dict) and isinstance(command.get("program"), list):
            out["command"] = [str(w) for w in command["program"]]
            if isinstance(command.get("time"), str):
                out["profiled_at"] = command["time"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        pass
    try:
        device = json.loads((directory / "device.json").read_text())
        gpus = device.get("gpus") if isinstance(device, dict) else None
        if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
            out["device"] = {"name": str(gpus[0]["name"])}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        pass
    return out


def recorded_program(directory: Path) -> tuple[tuple[str, ...] | None, str | None]:
    """A session folder's profiled command line and GPU name, read cheaply (command.json and
    device.json, which nsdiag profile writes; else session.json's meta); None where unknown.
    What `explain` compares before merging several inputs."""
    known = _profile_files(directory)
    command, device = known.get("command"), (known.get("device") or {}).get("name")
    if command is None or device is None:
        try:
            meta = json.loads((directory / MANIFEST).read_text()).get("meta") or {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            meta = {}
        if command is None and isinstance(meta.get("command"), list):
            command = [str(w) for w in meta["command"]]
        if device is None and isinstance(meta.get("device"), dict):
            device = meta["device"].get("name")
    return (tuple(command) if command else None), (str(device) if device else None)


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


# Tables read side by side: gunzip and pandas' CSV tokenizer release the GIL, so on two cores a
# timeline and its API calls read in 70% of the time one after the other (idioms/optim_step:
# 336 -> 241 ms); more readers than this gain nothing on the six tables (two of them large).
READERS = 2
# Below this much gzipped CSV, tables are read one after the other: a second thread's start and
# its share of the GIL cost more than it reads in parallel (4 ms of an 0.04 MB session's 21;
# 0.5 MB reads alike either way, 1.1 MB 15% faster on two).
THREADED_BYTES = 500_000


def _read_tables(directory: Path, manifest: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The session's tables, largest first on up to READERS threads (each in the caller's
    context); an unreadable table raises as it would read in turn: the first in TABLES order."""
    paths = {name: directory / "tables" / f"{name}.csv.gz" for name in TABLES}

    def read(name: str) -> pd.DataFrame:
        return _read_table(paths[name], manifest["columns"][name], manifest["dtypes"][name])

    workers = min(READERS, _cores())
    sizes = {name: _size(paths[name]) for name in TABLES}
    if workers < 2 or sum(sizes.values()) < THREADED_BYTES:
        return {name: read(name) for name in TABLES}
    largest_first = sorted(TABLES, key=lambda name: -sizes[name])
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nsdiag-read") as pool:
        reading = {
            name: pool.submit(contextvars.copy_context().run, read, name) for name in largest_first
        }
        return {name: reading[name].result() for name in TABLES}


def _cores() -> int:
    """The cores this process may run on (its affinity, where the system says)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # read() says what is wrong with it
        return 0


def _read_table(path: Path, columns: list[str], dtypes: dict[str, str]) -> pd.DataFrame:
    if not columns:
        return pd.DataFrame()
    numeric = {c for c, t in dtypes.items() if _is_numeric(t)}  # a set: 900 raw columns
    # Strings keep "" as "" (only numeric cells read "" as missing); floats round-trip exactly
    # (pandas 3 does by default; pandas 2 needs the round-trip parser).
    options: dict[str, Any] = {} if _PANDAS_MAJOR >= 3 else {"float_precision": "round_trip"}
    try:
        frame = _read_wide(path, numeric, dtypes, options) if _is_wide(numeric, dtypes) else None
        if frame is None:
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
    if frame.columns.tolist() != columns and set(columns) <= set(frame.columns):
        frame = frame[columns]  # (a selection of 900 columns costs as much as reading them)
    # only the columns pandas did not read as their recorded dtype are converted: a raw table
    # has 850 columns, nearly all read as recorded, and a column set at a time costs 0.2 ms
    spelled: dict[Any, str] = {}  # each dtype written once: a raw table has three
    read_as = {
        str(c): spelled.get(t) or spelled.setdefault(t, str(t))
        for c, t in zip(frame.columns.tolist(), frame.dtypes.tolist(), strict=True)
    }
    for column, dtype in dtypes.items():
        if column in read_as and (dtype == "object" or read_as[column] != dtype):
            frame[column] = _restore(frame[column], dtype)
    return cast(pd.DataFrame, frame)


WIDE_COLUMNS = 100  # a table this wide with few text columns is read in two passes
TEXT_SHARE = 0.1


def _is_wide(numeric: set[str], dtypes: dict[str, str]) -> bool:
    return len(dtypes) >= WIDE_COLUMNS and len(dtypes) - len(numeric) <= TEXT_SHARE * len(dtypes)


def _read_wide(
    path: Path, numeric: set[str], dtypes: dict[str, str], options: dict[str, Any]
) -> pd.DataFrame | None:
    """A wide numeric table (raw: 900 metric columns, a handful of text ones) read as
    `_read_table`'s one pass reads it, in two that cost half: every column with "" missing (one
    list of missing values for all columns, where a dict of 900 costs pandas as much as the
    parse), then the text columns alone, where "" is text. None where the file is not the
    table the manifest describes (other columns, other rows): the one pass says what it is."""
    frame: pd.DataFrame = pd.read_csv(
        path, keep_default_na=False, na_values=["", MISSING], low_memory=False, **options
    )
    if set(map(str, frame.columns)) != set(dtypes) or len(frame.columns) != len(dtypes):
        return None
    text = [c for c in dtypes if c not in numeric]
    if not text or _read_as_text(frame, text):
        return frame
    texts = pd.read_csv(
        path,
        usecols=text,
        keep_default_na=False,
        na_values={c: [MISSING] for c in text},
        dtype=dict.fromkeys(text, "str"),
        low_memory=False,
        **options,
    )
    if len(texts) != len(frame):
        return None
    for column in text:
        frame[column] = texts[column]
    return frame


def _read_as_text(frame: pd.DataFrame, text: list[str]) -> bool:
    """Whether the first pass read every text column as the second would: as text (not as
    numbers or true/false), every cell there (a missing one was "" or MISSING, told apart only
    by the second pass). ncu's raw tables: all five are, and their second pass, a third of
    the read, is spared."""
    as_text = pd.Series([], dtype="str").dtype  # what read_csv's dtype="str" gives
    return all(frame[c].dtype == as_text and not frame[c].isna().any() for c in text)


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
