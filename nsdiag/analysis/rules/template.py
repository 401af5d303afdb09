"""A rule's `message` and `fix`: str.format templates over named values, checked when the rules
load and formatted safely.

A template may only name values (`{name}` or `{name:spec}`, a plain identifier, optionally with
a conversion `!s`, `!r` or `!a`): no positional fields (`{}`, `{0}`), no attribute or item access
(`{a.b}`, `{a[0]}`), no nested fields in a spec, and a spec of the standard mini-language with a
width and precision of at most MAX_SPEC_NUMBER, or `si`: the number scaled to an SI prefix with
three significant digits, written before the unit (`{flops:si}FLOP/s` -> `103 TFLOP/s`), or a
unit spec that names the value's unit and prints it in nsdiag's one unit system with its unit
(model/quantities.py): `time_ns`, `time_us`, `time_ms`, `time_s` (`{idle_ms:time_ms}` -> `336 ms`,
`1.25 s`), `size_b`, `size_mb` (`{copy_mb:size_mb}` -> `7.00 kB`, `1.85 TB`), `count`
(`{launches:count}` -> `5,475`), `times` (`{occurrences:times}` -> `once`, `529 times`).
Formatting never fails: a missing or NaN value prints n/a, a spec that does not suit the value
prints the value plainly. A finding's message is formatted by `render_message`, which leaves
out the sentences whose values are missing instead of printing n/a in them.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from nsdiag.model import quantities
from nsdiag.model.values import missing

MAX_SPEC_NUMBER = 64  # the largest width or precision a template's format spec may ask for
SI = "si"  # the spec that scales a number to an SI prefix: `{flops:si}FLOP/s`
_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
# unit spec -> how its value is printed: `{idle_ms:time_ms}` is a duration given in ms
UNIT_SPECS: dict[str, Callable[[float], str]] = {
    "time_ns": quantities.duration,
    "time_us": lambda v: quantities.duration(v * 1e3),
    "time_ms": lambda v: quantities.duration(v * 1e6),
    "time_s": lambda v: quantities.duration(v * 1e9),
    "size_b": quantities.size,
    "size_mb": lambda v: quantities.size(v * 1e6),
    "count": quantities.count,
    "times": lambda v: "once" if v == 1 else quantities.plural(v, "time"),
}
# A sentence ends at . ! or ? followed by space and a capital letter or a field.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z{])")

# [[fill]align][sign][z][#][0][width][grouping][.precision][type] (Python's format mini-language)
_SPEC = re.compile(
    r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d*)[_,]?(?:\.(?P<precision>\d+))?[bcdeEfFgGnosxX%]?",
    re.DOTALL,
)
_CONVERSIONS = (None, "s", "r", "a")


def spec_problem(spec: str) -> str | None:
    """What is wrong with a format spec, or None when it is a bounded standard spec (or si)."""
    if spec == SI or spec in UNIT_SPECS:
        return None
    match = _SPEC.fullmatch(spec)
    if match is None:
        return f"format spec {spec!r} is not a plain format spec"
    sizes = (int(n) for n in (match["width"], match["precision"]) if n)
    if any(n > MAX_SPEC_NUMBER for n in sizes):
        return f"format spec {spec!r} asks for more than {MAX_SPEC_NUMBER} characters or digits"
    return None


def template_fields(template: str) -> list[tuple[str, str, str | None]]:
    """The replacement fields of a template: (name, spec, conversion). ValueError when the
    template does not parse (a single '{' or '}')."""
    return [
        (field, spec or "", conversion)
        for _, field, spec, conversion in string.Formatter().parse(template)
        if field is not None
    ]


def template_problems(template: str, known: Collection[str]) -> list[str]:
    """Why a template cannot be formatted over values named `known` (empty when it can)."""
    try:
        fields = template_fields(template)
    except ValueError as exc:
        return [f"malformed template ({exc}); write a literal brace as {{{{ or }}}}"]
    problems = []
    for name, spec, conversion in fields:
        if not name.isidentifier():
            problems.append(f"field {{{name}}} is not a plain value name")
        elif name not in known:
            problems.append(f"unknown value {{{name}}}")
        if conversion not in _CONVERSIONS:
            problems.append(f"field {{{name}}} has an unknown conversion !{conversion}")
        problem = spec_problem(spec)
        if problem is not None:
            problems.append(f"field {{{name}}}: {problem}")
    return problems


class _SafeFormatter(string.Formatter):
    """str.format over named values: plain field names only; missing or NaN prints n/a; a spec
    that is unbounded or does not suit the value is dropped."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if not field_name.isidentifier():
            raise ValueError(f"bad field {field_name!r}")
        return kwargs.get(field_name), field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        if missing(value):
            return "n/a"
        if format_spec == SI:
            return _si(value)
        if format_spec in UNIT_SPECS:
            try:
                return str(UNIT_SPECS[format_spec](float(value)))
            except (TypeError, ValueError, OverflowError):  # an int past float's range
                return str(value)
        if spec_problem(format_spec) is not None:
            return str(value)
        try:
            return format(value, format_spec)
        except (TypeError, ValueError, OverflowError):
            return str(value)


def _si(value: Any) -> str:
    """`103 T` for 1.03e14, `512 ` for 512: the prefix (or nothing) goes before the unit the
    template writes after the field."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    for scale, prefix in _PREFIXES:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}"
    return f"{v:.3g} "


_FORMATTER = _SafeFormatter()


def render(template: str, values: Mapping[str, Any]) -> str:
    """The template formatted over the values."""
    return _FORMATTER.vformat(template, (), values)


def render_message(template: str, values: Mapping[str, Any]) -> str:
    """A finding's message: the template formatted sentence by sentence, leaving out each
    sentence that names a missing value (a message never shows n/a holes); empty when every
    sentence does."""
    kept = []
    for sentence in _SENTENCE_END.split(template):
        fields = [name for name, _, _ in template_fields(sentence)]
        if not any(missing(values.get(name)) for name in fields):
            kept.append(render(sentence, values))
    return " ".join(kept)
