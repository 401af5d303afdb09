"""The CSV table inside a profiler's text export: its header found in a bounded prefix, its rows
streamed to pandas without holding the file's text.

ncu prints ==PROF== and ==WARNING== lines and the program's own output around its table (and,
with --print-details all, free-form section tables inside it). A row of the table starts with a
quote (ncu quotes every cell), a digit (the same export re-saved with minimal quoting, or an
nsys stats report) or a comma (ncu's units row); other lines are skipped. A quoted cell may span
lines (a line break in a kernel name). A last line without its end of line and with fewer cells
than the header is a row cut off mid-way: it is dropped with a warning. ncu names each column
once: a header that repeats a name is refused.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from nsdiag.errors import InputError
from nsdiag.readers import source
from nsdiag.readers.csv_header import EXPECTED_HEADERS, cells, header_kind

HEADER_SCAN_CHARS = 16 * source.MB  # how far into a file its header may start
MAX_LINE_CHARS = 16 * source.MB  # a 2,200-metric raw header is ~150 kB; no real line nears this
_ROW_STARTS = ('"', ",", *"0123456789")


class _Rows:
    """A file-like object pandas reads the table from: the header line, then the rows.

    A quoted cell may hold a line break (a kernel name): a row whose quotes are not balanced
    continues on the next line. With `whole_rows`, a row with fewer cells than the header is no
    row of this table (a raw page's rows are complete: another export pasted below it) and is
    left out, counted in `short`."""

    def __init__(
        self, text: io.TextIOBase, path: Path, header: str, line_no: int, whole_rows: bool = False
    ) -> None:
        self._text, self._path = text, path
        self._pending: list[str] = [header]
        self._fields = len(cells(header))
        self._whole_rows = whole_rows
        self.line_no = line_no  # of the last line read, 1-based
        self.skipped = 0  # lines that are not rows (console messages, section tables)
        self.cut_row: int | None = None  # line number of a row cut off at the end of the file
        self.short: list[int] = []  # line numbers of rows with fewer cells than the header
        self.short_cells = 0  # cells of the first of them

    def _line(self) -> str:
        line = self._text.readline(MAX_LINE_CHARS)
        if len(line) >= MAX_LINE_CHARS and not line.endswith("\n"):
            raise InputError(
                f"{self._path}: line {self.line_no + 1} is longer than "
                f"{MAX_LINE_CHARS // source.MB} MB, which no profiler export has",
                "check that this is the profiler's CSV export",
            )
        if line:
            self.line_no += 1
        return line

    def _next_row(self) -> str | None:
        while True:
            line = self._line()
            if not line:
                return None
            if line.startswith('"') and line.count('"') % 2:  # a cell goes on
                line = self._whole_quotes(line)
            if not line.endswith(("\n", "\r")):
                if line.count('"') % 2 or len(cells(line)) < self._fields:
                    self.cut_row = self.line_no
                    continue
                line += "\n"
            if line.startswith(_ROW_STARTS):
                # a units row (empty ID cell) may leave its trailing empty cells out
                units = line.startswith(('""', ","))
                if self._whole_rows and not units and self._is_short(line):
                    continue
                return line
            if line.strip():
                self.skipped += 1

    def _whole_quotes(self, line: str) -> str:
        """`line` with the lines its open quoted cell continues on (a line break in a cell)."""
        parts, length = [line], len(line)
        quotes = line.count('"')
        while quotes % 2 and parts[-1].endswith(("\n", "\r")):
            more = self._line()
            if not more:  # the file ends inside the cell: a row cut off (see _next_row)
                return "".join(parts).rstrip("\r\n")
            parts.append(more)
            quotes += more.count('"')
            length += len(more)
            if length >= MAX_LINE_CHARS:
                raise InputError(
                    f"{self._path}: a quoted cell from line {self.line_no - len(parts) + 2} on "
                    f"is not closed within {MAX_LINE_CHARS // source.MB} MB",
                    "check that this is the profiler's CSV export",
                )
        return "".join(parts)

    def _is_short(self, line: str) -> bool:
        """Fewer cells than the header (counted cheaply: a fully quoted row's separators are
        '","'; only a row that may be short is split)."""
        fields = self._fields
        if line.count('","' if line.startswith('"') else ",") + 1 >= fields:
            return False
        count = len(cells(line))
        if count >= fields:
            return False
        if not self.short:
            self.short_cells = count
        self.short.append(self.line_no)
        return True

    def peek(self) -> str:
        """The first row after the header ('' when there is none), left to be read."""
        if len(self._pending) < 2:
            row = self._next_row()
            self._pending.append(row if row is not None else "")
        return self._pending[1]

    def read(self, size: int = -1) -> str:
        out, n = [line for line in self._pending if line], 0
        self._pending = []
        n = sum(map(len, out))
        while size < 0 or n < size:
            row = self._next_row()
            if row is None:
                break
            out.append(row)
            n += len(row)
        return "".join(out)

    def __iter__(self) -> _Rows:
        return self

    def __next__(self) -> str:
        text = self.read(1)
        if not text:
            raise StopIteration
        return text


@dataclass
class CsvTable:
    """An open CSV export: its kind, header cells and rows (read them once, with `frame`)."""

    path: Path
    kind: str  # ncu-raw, ncu-details or nsys-stats
    header_line: str
    rows: _Rows
    text: io.TextIOBase
    warnings: list[str] = field(default_factory=list)

    @property
    def header(self) -> list[str]:
        return cells(self.header_line)

    def frame(self, what: str, hint: str, **options: Any) -> pd.DataFrame:
        """The table as a DataFrame (`pandas.read_csv` `options`); a malformed table is an
        InputError naming the file; a cut-off last row becomes a warning."""
        try:
            with warnings.catch_warnings():
                # mixed types in a column are the readers' business (readers/validate.py)
                warnings.simplefilter("ignore", pd.errors.DtypeWarning)
                frame: pd.DataFrame = pd.read_csv(self.rows, **options)  # type: ignore[call-overload]
        except (ValueError, pd.errors.ParserError, UnicodeError, OverflowError) as exc:
            raise InputError(
                f"{self.path}: cannot parse the {what} ({str(exc).strip().splitlines()[0]})",
                hint,
            ) from exc
        finally:
            self.close()
        if self.rows.cut_row is not None:
            self.warnings.append(
                f"{self.path} ends in the middle of a row (line {self.rows.cut_row}): "
                "the file was cut off; that row is left out"
            )
        short = self.rows.short
        if short:
            self.warnings.append(
                f"{self.path}: {len(short):,} line(s) from line {short[0]} on have fewer cells "
                f"than the header ({self.rows.short_cells:,}, not {len(self.header):,}): they are "
                "not rows of this table (another export pasted into the file?) and are left out"
            )
        return frame

    def close(self) -> None:
        self.text.close()

    def __enter__(self) -> CsvTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_table(path: Path, expect: str | None = None) -> CsvTable:
    """Open a CSV export and find its header within its first HEADER_SCAN_CHARS characters."""
    text = source.open_text(path)
    try:
        scanned, line_no = 0, 0
        first = ""
        while scanned < HEADER_SCAN_CHARS:
            line = text.readline(MAX_LINE_CHARS)
            if not line:
                break
            line_no += 1
            scanned += len(line)
            first = first or line.strip()
            kind = header_kind(line)
            if kind is not None:
                if not line.endswith(("\n", "\r")):
                    line += "\n"
                rows = _Rows(text, path, line, line_no, whole_rows=kind == "ncu-raw")
                table = CsvTable(path, kind, line, rows, text)
                if kind.startswith("ncu"):
                    _check_unique(path, table.header)
                if expect is not None and kind != expect:
                    raise InputError(
                        f"{path} is an {_NAMES[kind]}, not an {_NAMES[expect]}",
                        "pass it to nsdiag as it is: the right reader is picked for it",
                    )
                return table
    except BaseException:
        text.close()
        raise
    text.close()
    seen = f"its first line is {first[:80]!r}" if first else "it is empty"
    raise InputError(
        f"{path} is not a CSV export nsdiag knows: no header line found ({seen})",
        f"{EXPECTED_HEADERS}",
    )


def _check_unique(path: Path, header: list[str]) -> None:
    """ncu names each column once; a repeated name (a hand-edited or concatenated file) would
    make one cell of each row two values."""
    seen: dict[str, int] = {}
    for number, cell in enumerate(header, 1):
        if cell and cell in seen:
            raise InputError(
                f"{path}: column {cell!r} appears twice in the header (columns {seen[cell]} and "
                f"{number}), which no ncu export has",
                "re-export the report with ncu --csv, or remove the repeated column",
            )
        seen[cell] = number


_NAMES = {
    "ncu-raw": "ncu raw-page CSV export",
    "ncu-details": "ncu details-page CSV export",
    "nsys-stats": "nsys stats CSV report",
}
