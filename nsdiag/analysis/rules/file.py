"""Read one rule file and check its shape: a bounded regular file, UTF-8, TOML, and every key
known, of the right type, allowed in the rule's scope, every number finite. What the values
mean (names against the catalogue, expressions, templates, a program rule's analysis and its
`[params]` keys) spec.py checks next.

Every problem is a RuleError naming the file and the key, so a rule folder given with --rules
fails in one line, never with a traceback.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nsdiag.errors import RuleError

MAX_RULE_FILE_BYTES = 256 * 1024  # the largest shipped rule is under 4 KB
DOC_SECTIONS = ("detects", "why", "fix", "false_positives", "references")
FIX_HINT = "fix the rule file (docs/diagnosis.md, 'Rule files', lists the keys)"


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_text_or_texts(value: Any) -> bool:
    return _is_text(value) or _is_names(value)


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


Shapes = dict[str, tuple[Callable[[Any], bool], str]]  # key -> (test, what it must be)
_SHAPES: Shapes = {
    "id": (_is_text, "a string"),
    "cause": (_is_text, "a string"),
    "title": (_is_text, "a string"),
    "scope": (_is_text, "a string"),
    "requires": (_is_names, "a list of metric names"),
    "condition": (_is_text, "a string (an expression)"),
    "impact": (_is_text, "a string (an expression)"),
    "impact_basis": (_is_text, "a string"),
    "evidence": (_is_names, "a list of metric names"),
    "ncu_rules": (_is_names, "a list of Nsight Compute rule ids"),
    "ncu_condition": (_is_text, "a string (an expression)"),
    "message": (_is_text, "a string (a template)"),
    "fix": (_is_text, "a string (a template)"),
    "analysis": (_is_text, "a string (a program analysis)"),
    "params": (_is_table, "a table of name = number"),
    "defaults": (_is_table, "a table of name = number"),
    "doc": (_is_table, "a table of documentation sections"),
}
_DOC_SHAPES: Shapes = {
    **{s: (_is_text, "a string") for s in DOC_SECTIONS if s != "references"},
    "references": (_is_text_or_texts, "a string or a list of strings"),
}
# Keys that only one scope reads: a kernel rule's condition, a program rule's analysis.
KERNEL_ONLY = (
    "condition",
    "impact",
    "requires",
    "evidence",
    "defaults",
    "ncu_rules",
    "ncu_condition",
)
PROGRAM_ONLY = ("analysis",)


def read_rule_file(path: Path) -> dict[str, Any]:
    """The rule file's table, its shape checked."""
    data = _parse(path, _read_text(path))
    _check_shape(path, data)
    return data


def _read_text(path: Path) -> str:
    """The file's text: a regular file of bounded size (a named pipe would block, /dev/zero
    would never end), decoded as UTF-8."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise RuleError(f"{path}: not a regular file", "a rule is a .toml file")
        if info.st_size > MAX_RULE_FILE_BYTES:
            raise RuleError(
                f"{path}: {info.st_size} bytes, more than a rule file may have "
                f"({MAX_RULE_FILE_BYTES})",
                "is it a rule file?",
            )
        with open(path, "rb") as handle:
            data = handle.read(MAX_RULE_FILE_BYTES + 1)
    except OSError as exc:
        raise RuleError(f"{path}: cannot read: {exc.strerror}", "check the file") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise RuleError(
            f"{path}: not UTF-8 text (byte {exc.start}, line {line})", "save it as UTF-8"
        ) from exc


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise RuleError(f"{path}: not valid TOML: {exc}", "fix the TOML syntax") from exc


def _check_table(path: Path, table: dict[str, Any], shapes: Shapes, prefix: str = "") -> None:
    """Every key of `table` is one of `shapes`, and its value of that shape."""
    unknown = sorted(set(table) - set(shapes))
    if unknown:
        raise RuleError(
            f"{path}: unknown key(s) {', '.join(prefix + k for k in unknown)}",
            f"{prefix or 'a rule file '}has {', '.join(shapes)}",
        )
    for key, value in table.items():
        test, what = shapes[key]
        if not test(value):
            raise RuleError(f"{path}: {prefix}{key} must be {what}", FIX_HINT)


def _check_shape(path: Path, data: dict[str, Any]) -> None:
    _check_table(path, data, _SHAPES)
    scope = data.get("scope")
    wrong = KERNEL_ONLY if scope == "program" else PROGRAM_ONLY if scope == "kernel" else ()
    misplaced = [key for key in wrong if key in data]
    if misplaced:
        raise RuleError(
            f"{path}: {', '.join(misplaced)} is not read in a {scope} rule",
            "a kernel rule has a condition; a program rule names its analysis",
        )
    for key in ("params", "defaults"):
        _check_numbers(path, key, data.get(key, {}))
    _check_table(path, data.get("doc", {}), _DOC_SHAPES, "doc.")


def _check_numbers(path: Path, key: str, table: dict[str, Any]) -> None:
    for name, value in table.items():
        if not name.isidentifier():
            raise RuleError(f"{path}: {key}.{name}: not a plain name", "letters, digits and _")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RuleError(f"{path}: {key}.{name} is not a number", f"{name} = 0.5")
        try:
            finite = math.isfinite(float(value))
        except OverflowError:
            finite = False
        if not finite:
            raise RuleError(f"{path}: {key}.{name} is not a finite number", f"{name} = 0.5")
