"""Opening an input safely: once, only regular files, bounded in size, gzip streamed.

Every reader opens its file here. The checks come before any byte is read: `os.stat` says what
the path is without opening it (a named pipe would block `open`, `/dev/zero` never ends), the
size must be plausible for the input's kind, and a gzipped input is decompressed as a stream
whose output is counted, so a small file that inflates without end (a gzip bomb) stops at the
same limit as a large plain one. The limit is raised with `--max-input-mb` or NSDIAG_MAX_INPUT_MB.
"""

from __future__ import annotations

import contextlib
import contextvars
import gzip
import io
import math
import os
import shutil
import stat
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from nsdiag.errors import InputError

ENV_LIMIT = "NSDIAG_MAX_INPUT_MB"
ENV_ROWS = "NSDIAG_MAX_INPUT_ROWS"
# Rows read from one table of an export: ten million launches or calls is hours of a busy trace
# (and gigabytes of tables); a view that yields more is refused, not read for hours.
DEFAULT_ROWS = 10_000_000
MB = 1 << 20
# What an input of each kind may hold, uncompressed, before nsdiag calls it implausible.
# Text exports are parsed in memory (about twice their size at peak); a .ncu-rep is loaded whole
# by NVIDIA's reader; an nsys SQLite database is queried on disk, table by table.
DEFAULT_LIMIT_MB = {"text": 4096, "ncu-rep": 4096, "sqlite": 32768}
GZIP_MAGIC = b"\x1f\x8b"

_override_mb: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "nsdiag_max_input_mb", default=None
)
_override_rows: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "nsdiag_max_input_rows", default=None
)


@contextlib.contextmanager
def input_limit(max_mb: float | None, max_rows: float | None = None) -> Iterator[None]:
    """Inputs read inside this block may hold up to `max_mb` MB each, and `max_rows` rows per
    table of an export (None: the default or the environment's)."""
    token = _override_mb.set(max_mb)
    rows_token = _override_rows.set(max_rows)
    try:
        yield
    finally:
        _override_rows.reset(rows_token)
        _override_mb.reset(token)


def chosen_limits() -> tuple[float | None, float | None]:
    """The limits `input_limit` set here (MB, rows), to hand to a worker process."""
    return _override_mb.get(), _override_rows.get()


def _env_number(name: str, hint: str) -> float | None:
    """The environment variable `name` as a number (None when unset or empty)."""
    text = os.environ.get(name)
    if not text:
        return None
    try:
        return float(text)
    except ValueError as exc:
        raise InputError(f"{name}={text!r} is not a number", hint) from exc


def limit_bytes(kind: str) -> int:
    """The most bytes (uncompressed) an input of `kind` may hold."""
    chosen = _override_mb.get()
    if chosen is None:
        chosen = _env_number(ENV_LIMIT, "set it to the largest input size to accept, in MB")
    if chosen is not None and not (math.isfinite(chosen) and chosen > 0):
        raise InputError(
            f"the input size limit must be positive, not {chosen:g} MB",
            f"give --max-input-mb or {ENV_LIMIT} a finite number of MB",
        )
    return int((chosen if chosen is not None else DEFAULT_LIMIT_MB[kind]) * MB)


def limit_rows() -> int:
    """The most rows nsdiag reads from one table of a database input (an nsys export): bounds
    the work where the size limit cannot, as a view may yield far more rows than its file holds
    bytes."""
    chosen = _override_rows.get()
    if chosen is None:
        chosen = _env_number(
            ENV_ROWS, "set it to the most rows to read from one table of an export"
        )
    if chosen is not None and not (math.isfinite(chosen) and chosen >= 1):
        raise InputError(f"the input row limit must be a positive number, not {chosen:g}", "")
    return int(chosen) if chosen is not None else DEFAULT_ROWS


def too_many_rows(path: Path | str, table: str, rows: int, by_file: bool = False) -> InputError:
    """`table` yields more than `rows` rows: the row limit, or (`by_file`) more than a table of a
    file this size can hold."""
    if by_file:
        return InputError(
            f"{path}: {table} yields more than the {rows:,} rows a table of a file this size can "
            "hold: it computes them (a view or a join)",
            COMPUTED_ROWS_HINT,
        )
    return InputError(
        f"{path}: {table} holds more than {rows:,} rows, the most nsdiag reads from one table",
        f"if it really is a profiler export, raise the limit with {ENV_ROWS}",
    )


def too_much_work(path: Path | str, table: str, rows: int, by_file: bool = False) -> InputError:
    """Reading `table` took more work than reading `rows` rows would (a view that computes
    them)."""
    most = "a table of a file this size can hold" if by_file else "nsdiag reads from one table"
    return InputError(
        f"{path}: reading {table} takes more work than reading {rows:,} rows would, the most "
        f"{most} (a view or a join that computes its rows?)",
        COMPUTED_ROWS_HINT
        if by_file
        else f"if it really is a profiler export, raise the limit with {ENV_ROWS}",
    )


COMPUTED_ROWS_HINT = (
    "nsdiag reads the tables nsys export writes: export the report again with "
    "nsys export --type sqlite report.nsys-rep"
)


def _too_large(path: Path, what: str, limit: int) -> InputError:
    return InputError(
        f"{path} {what}, more than the {limit / MB:,.0f} MB nsdiag accepts for this kind of input",
        f"if it really is a profiler export, raise the limit with --max-input-mb or {ENV_LIMIT}",
    )


def _kind_of_file(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_file(path: Path, kind: str = "text") -> os.stat_result:
    """The file's status, after refusing what is not a plausible input (never opens it)."""
    try:
        info = os.stat(path)  # follows symlinks: a link to /dev/zero is a device
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist", "check the path") from exc
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}", "check the path and its permissions"
        ) from exc
    if not stat.S_ISREG(info.st_mode):
        raise InputError(
            f"{path} is {_kind_of_file(info.st_mode)}, not a file nsdiag can read",
            "save the profiler's output to a regular file and pass that",
        )
    limit = limit_bytes(kind)
    if info.st_size > limit:
        raise _too_large(path, f"holds {info.st_size / MB:,.0f} MB", limit)
    return info


def _open_regular(path: Path, kind: str) -> BinaryIO:
    """The file opened for reading, checked again after opening (it may have been swapped)."""
    check_file(path, kind)
    try:
        # O_NONBLOCK: should a pipe appear at the path after the check, opening it cannot hang.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}", "check the path and its permissions"
        ) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path} is not a regular file", "pass a profiler export")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


class _Bounded(io.RawIOBase):
    """A byte stream that stops with an InputError past `limit` bytes, and turns a truncated or
    corrupted gzip stream into one."""

    def __init__(self, inner: BinaryIO, file: BinaryIO, path: Path, limit: int) -> None:
        # `inner` reads `file` (the same object, or a GzipFile over it, which leaves it open)
        self._inner, self._file, self._path, self._limit = inner, file, path, limit
        self._gzipped = inner is not file
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            data = self._inner.read(len(buffer))
        except (EOFError, OSError, zlib.error) as exc:
            if not self._gzipped:
                raise InputError(f"cannot read {self._path}: {exc}", "check the file") from exc
            raise InputError(
                f"{self._path} is gzipped but truncated or corrupted ({exc})",
                "copy or re-export the file again",
            ) from exc
        self.count += len(data)
        if self.count > self._limit:
            raise _too_large(
                self._path,
                "decompresses to more" if self._gzipped else "holds more",
                self._limit,
            )
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        self._file.close()
        super().close()


def open_binary(path: Path, kind: str = "text") -> BinaryIO:
    """The input's bytes, uncompressed when it is gzipped (told by its first bytes, not its name),
    bounded by the kind's limit."""
    handle = _open_regular(path, kind)
    gzipped = handle.read(2) == GZIP_MAGIC
    handle.seek(0)
    inner = cast(BinaryIO, gzip.GzipFile(fileobj=handle, mode="rb")) if gzipped else handle
    return cast(BinaryIO, io.BufferedReader(_Bounded(inner, handle, path, limit_bytes(kind)), MB))


def open_text(path: Path, kind: str = "text") -> io.TextIOWrapper:
    """The input as text: UTF-8 (a byte-order mark, as Excel writes, is skipped), undecodable
    bytes replaced, line ends kept for the CSV parser."""
    return io.TextIOWrapper(
        open_binary(path, kind), encoding="utf-8-sig", errors="replace", newline=""
    )


def is_gzipped(path: Path) -> bool:
    with _open_regular(path, "sqlite") as handle:
        return handle.read(2) == GZIP_MAGIC


@contextlib.contextmanager
def plain_file(path: Path, kind: str, name: str) -> Iterator[Path]:
    """A path to the input uncompressed: the file itself, or its gzip content decompressed into
    a temporary `name` (bounded; for readers that need a real file, such as SQLite)."""
    if not is_gzipped(path):
        check_file(path, kind)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="nsdiag-") as tmp:
        target = Path(tmp) / name
        with open_binary(path, kind) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, MB)
        yield target
