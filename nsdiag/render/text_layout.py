"""The terminal page the text renderer writes on: a rich console into a string, wrapped
paragraphs with a hanging indent, clipped to a number of lines in the short view, every
program-supplied string made printable, and colour only when asked for."""

from __future__ import annotations

import io
import re
import textwrap
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table
from rich.text import Text

from nsdiag.model.names import ELLIPSIS
from nsdiag.render import fmt

WIDTH = 100  # columns when the caller does not say (a file, a pipe)
MIN_WIDTH = 60

# Styles (rich style strings); with colour off the console draws none of them.
TITLE = "bold"
SECTION = "bold cyan"
WARNING = "bold red"
RULE = "yellow"
SAVING = "bold green"
FIX = "green"
NAME = "cyan"
DIM = "dim"


@dataclass
class Page:
    """A console writing into a string at a fixed width, with or without colour."""

    width: int = WIDTH
    color: bool = False
    buffer: io.StringIO = field(default_factory=io.StringIO)

    def __post_init__(self) -> None:
        self.width = max(self.width, MIN_WIDTH)
        self.console = Console(
            file=self.buffer,
            width=self.width,
            force_terminal=self.color,
            color_system="standard" if self.color else None,
            highlight=False,
            emoji=False,
            markup=False,
            no_color=not self.color,
        )

    def text(self) -> str:
        """What was written, without the spaces rich pads lines with."""
        lines = self.buffer.getvalue().splitlines()
        return "".join(_TRAILING.sub(r"\1", line) + "\n" for line in lines)

    def blank(self) -> None:
        self.console.print()

    def line(self, *parts: tuple[str, str] | str) -> None:
        """One line of (text, style) parts, clipped at the width; texts made printable."""
        pieces = [(fmt.printable(p), "") if isinstance(p, str) else (fmt.printable(p[0]), p[1])
                  for p in parts]  # fmt: skip
        self.console.print(Text.assemble(*pieces), no_wrap=True, overflow="ellipsis")

    def para(
        self,
        text: str,
        label: str = "",
        indent: int = 0,
        style: str = "",
        label_style: str = "",
        lines: int | None = None,
        lead: str = "",
        lead_style: str = "",
        whole_sentence: bool = False,
    ) -> None:
        """`label lead text` wrapped at the width, later lines under the lead's start; `lines`:
        at most that many, the last ending in … when the text goes on. The label and the lead
        (the first words of the text) have styles of their own."""
        prefix = " " * indent + fmt.printable(label)
        lead = fmt.printable(lead)
        body = fmt.printable(text)
        wrapped = wrap(f"{lead}{body}" if lead else body, self.width, prefix, lines, whole_sentence)
        for i, row in enumerate(wrapped):
            parts: list[tuple[str, str]] = []
            if i == 0:
                parts.append((prefix, label_style))
                row = row[len(prefix) :]
                if lead:
                    parts.append((row[: len(lead)], lead_style))
                    row = row[len(lead) :]
            parts.append((row, style))
            self.console.print(Text.assemble(*parts), no_wrap=True, overflow="crop")

    def table(self, table: Table) -> None:
        self.console.print(table)


# A number and its unit stay on one line (`2.59 ms`, `103 TFLOP/s`, `132 SMs`).
_NUMBER_UNIT = re.compile(r"(?<=\d) (?=(?:[kMGTP]?(?:FLOP/s|B/s|B)|ns|µs|us|ms|s|SMs|%)(?![\w/]))")
# An evidence item's threshold stays on one line: `(threshold <= 16)`.
_THRESHOLD = re.compile(r"(?<=\(threshold) (?=[<>=!])|(?<=[<>=]) (?=[-\d])")
_TRAILING = re.compile(r"\s+((?:\x1b\[[0-9;]*m)*)$")  # pads, and pads before a style's end
_SPACES = re.compile(r"[ \t\r\n]+")
_KEEP = "\u00a0"  # a no-break space while wrapping (textwrap breaks at ASCII white space only)


def wrap(
    text: str, width: int, prefix: str, lines: int | None = None, whole_sentence: bool = False
) -> list[str]:
    """`prefix + text` wrapped at `width` with a hanging indent of the prefix's length; `lines`:
    at most that many rows, cut at a sentence or clause boundary (`whole_sentence`: a row more
    where that ends a sentence rather than cutting one)."""
    if lines is not None:
        text = _enough(text, (lines + 3) * (width + 1))
    plain = _SPACES.sub(" ", text.replace(_KEEP, " ")).strip()
    kept = _THRESHOLD.sub(_KEEP, _NUMBER_UNIT.sub(_KEEP, plain))
    rows = textwrap.wrap(
        kept,
        width=width,
        initial_indent=prefix,
        subsequent_indent=" " * len(prefix),
        break_on_hyphens=False,
    ) or [prefix.rstrip()]
    if lines is not None and len(rows) > lines + (1 if whole_sentence else 0):
        rows = _shortened(kept, width, prefix, lines, whole_sentence) or _word_cut(
            rows[:lines], width, len(prefix)
        )
    return [row.replace(_KEEP, " ") for row in rows]


def _enough(text: str, needed: int) -> str:
    """The start of `text` up to a white space that holds at least `needed` characters once
    its white space is collapsed (the whole text where it is shorter). A paragraph clipped to a
    few rows shows, and may be cut at, only what lies in its first rows and the two after
    them: a fusion chain's message lists a thousand kernels, 80,000 characters wrapped whole
    to show three rows (13 ms of the terminal view)."""
    end = 2 * needed
    while end < len(text):
        space = _SPACES.search(text, end)
        if space is None:
            break
        head = text[: space.start()]
        if len(_SPACES.sub(" ", head.replace(_KEEP, " ")).strip()) >= needed:
            return head
        end *= 2
    return text


def _word_cut(rows: list[str], width: int, indent: int) -> list[str]:
    """The last row ended after a whole word and an ellipsis (no boundary served)."""
    last = rows[-1]
    while len(last) + 2 > width and " " in last[indent + 1 :]:
        last = last.rsplit(" ", 1)[0]
    return [*rows[:-1], last.rstrip(" ,;:") + " " + ELLIPSIS]


# Where a text may be cut: after a sentence, else after a clause (a colon, semicolon or comma,
# or before a parenthesis).
_SENTENCE = re.compile(r"(?<=[.!?])\s")
_CLAUSE = re.compile(r"(?<=[;:,])\s|\s(?=\()")


def _shortened(
    text: str, width: int, prefix: str, lines: int, whole_sentence: bool = False
) -> list[str] | None:
    """`text` cut at the last sentence end, else clause boundary, whose start fits in `lines`
    rows with an ellipsis after it (`whole_sentence`: a sentence end may take a row more);
    never a cut that leaves less than half the room used; None where no boundary does."""
    room = lines * (width - len(prefix))
    # a row holds at most width - len(prefix) characters of the text and the space it breaks
    # at: a head longer than `allowed` such rows needs more, and is not wrapped to find out (a
    # long message has dozens of cuts, and wrapping each cost most of the terminal view)
    per_row = width - len(prefix) + 1
    for boundary in (_SENTENCE, _CLAUSE):
        allowed = lines + (1 if whole_sentence and boundary is _SENTENCE else 0)
        cuts = [m.start() for m in boundary.finditer(text) if m.start() >= room // 2]
        for cut in reversed(cuts):
            head = text[:cut].rstrip(" ,;:") + " " + ELLIPSIS
            if per_row > 1 and len(head) > allowed * per_row:
                continue
            rows = textwrap.wrap(
                head,
                width=width,
                initial_indent=prefix,
                subsequent_indent=" " * len(prefix),
                break_on_hyphens=False,
            )
            if len(rows) <= allowed:
                return rows
    return None


def clip(text: str, width: int) -> str:
    """One line of at most `width` characters, ending in … when cut."""
    return text if len(text) <= width else text[: width - 1].rstrip() + ELLIPSIS


def middle(text: str, width: int) -> str:
    """At most `width` characters, cut in the middle (a kernel name's start and its telling
    end, `grid 64` or `_tn_align1…>`, both stay)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head) :]
