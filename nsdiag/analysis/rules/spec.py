"""A rule file (rules/NSDxxx-slug.toml) parsed into its record, `RuleSpec`, and validated whole.

file.py checks the file and its keys' types; here its id, cause slug and scope, its names,
expressions and templates, and a program rule's analysis and `[params]`, against the names the
loader hands in (`Vocabulary`: the kernel namespace and the program analyses' records, which
sit above the rule format), so a malformed rule fails in one line naming its file, never when
it fires. Loading folders of rules and checking their causes is analysis/ruleset.py's."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nsdiag.analysis.rules.expr import Expression, ExpressionError, parse
from nsdiag.analysis.rules.file import DOC_SECTIONS, read_rule_file
from nsdiag.analysis.rules.template import template_problems
from nsdiag.errors import RuleError

# The name a rule's ncu_condition reads for ncu's estimated speedup, in %.
NCU_SPEEDUP = "ncu_speedup"
_NAMES_HINT = "use names from nsdiag/model/catalogue.py or nsdiag/analysis/kernel/namespace.py"


class AnalysisDeclaration(Protocol):
    """What a program rule is checked against: its analysis's record (ProgramAnalysis,
    analysis/program/record.py), by name, the `[params]` it takes and the values it gives the
    rule's templates."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> Mapping[str, object]: ...

    @property
    def defaults(self) -> dict[str, float]: ...

    @property
    def values(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class Vocabulary:
    """The names a rule file may use, from the layers above the rule format (analysis/ruleset.py
    builds it from the kernel namespace and the program registry)."""

    names: frozenset[str]  # what a kernel rule's condition, impact and evidence may read
    constants: Mapping[str, float]  # named thresholds the expressions may use
    template_names: frozenset[str]  # what a kernel rule's message and fix may show
    analyses: Mapping[str, AnalysisDeclaration]  # a program rule's `analysis = "..."`


@dataclass(frozen=True)
class RuleSpec:
    id: str
    cause: str
    title: str
    scope: str  # "kernel" or "program"
    # Missing metrics: a name in `requires` that is missing skips the rule for that kernel; a
    # name in `defaults` that is missing takes its default; any other name the condition reads
    # that is missing skips the rule too (never a silent true or false).
    requires: tuple[str, ...]
    condition: Expression | None  # kernel rules
    impact: Expression | None  # recoverable fraction of the kernel's time, 0..1
    impact_basis: str  # the assumption behind `impact`, shown to users
    evidence: tuple[str, ...]
    # str.format templates (analysis/rules/template.py) over the values a kernel rule sees
    # (namespace.template_names) or a program rule's analysis gives (its record's values)
    message: str
    fix: str
    doc: dict[str, str | list[str]]
    # A kernel rule's named numbers; a program rule's analysis's thresholds, complete (the
    # file's, then the record's defaults for the keys it leaves out)
    params: dict[str, float] = field(default_factory=dict)
    analysis: str = ""  # program rules: the analysis that implements them
    path: str = ""
    defaults: dict[str, float] = field(default_factory=dict)  # name -> value when missing
    # Nsight Compute's rules that stand in for this one where a metric it needs is missing
    # (analysis/kernel/ncu_stand_in.py), in order of preference: ncu's rule ids
    ncu_rules: tuple[str, ...] = ()
    # What nsdiag's known metrics must not contradict for ncu's rule to stand in; it may also
    # read NCU_SPEEDUP, ncu's estimated speedup in % (missing where ncu gave none)
    ncu_condition: Expression | None = None


def _text(data: dict[str, Any], key: str, path: Path) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RuleError(f"{path}: missing or empty '{key}'", "every rule needs it")
    return value.strip()


def _expr(
    data: dict[str, Any], key: str, path: Path, known: frozenset[str], constants: dict[str, float]
) -> Expression | None:
    if key not in data:
        return None
    try:
        expression = parse(data[key], constants)
    except ExpressionError as exc:
        raise RuleError(f"{path}: malformed {key}: {exc}", "fix the rule file") from exc
    unknown = sorted(expression.names - known)
    if unknown:
        raise RuleError(f"{path}: {key} names unknown metric(s) {', '.join(unknown)}", _NAMES_HINT)
    return expression


_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _identity(data: dict[str, Any], path: Path) -> tuple[str, str, str]:
    rule_id, cause, scope = (_text(data, key, path) for key in ("id", "cause", "scope"))
    if not _ID.fullmatch(rule_id):
        raise RuleError(f"{path}: id {rule_id!r} is not letters and digits", 'id = "NSD901"')
    if path.name != f"{rule_id}.toml" and not path.name.startswith(f"{rule_id}-"):
        raise RuleError(
            f"{path}: file name must start with its id {rule_id}",
            f"rename it {rule_id}-{cause}.toml",
        )
    if not _SLUG.fullmatch(cause):
        raise RuleError(f"{path}: cause {cause!r} is not a slug", "lower-case words joined by '-'")
    if scope not in ("kernel", "program"):
        raise RuleError(f"{path}: scope must be 'kernel' or 'program'", "fix the rule file")
    return rule_id, cause, scope


def _names(data: dict[str, Any], key: str, path: Path, known: frozenset[str]) -> tuple[str, ...]:
    names = tuple(data.get(key, []))  # file.py checked: a list of strings
    unknown = [n for n in names if n not in known]
    if unknown and key == "requires":
        raise RuleError(f"{path}: requires unknown metric(s) {', '.join(unknown)}", _NAMES_HINT)
    if unknown:
        raise RuleError(
            f"{path}: {key} names unknown metric(s) {', '.join(unknown)}", "fix the rule file"
        )
    return names


def _ncu_rules(data: dict[str, Any], path: Path) -> tuple[str, ...]:
    """ncu's rule ids (`UncoalescedGlobalAccess`): identifiers, each once."""
    ids = tuple(data.get("ncu_rules", []))  # file.py checked: a list of strings
    bad = [i for i in ids if not _ID.fullmatch(i)]
    if bad:
        raise RuleError(
            f"{path}: ncu_rules: {', '.join(map(repr, bad))} is not an ncu rule id",
            'ncu_rules = ["UncoalescedGlobalAccess"]',
        )
    if len(set(ids)) < len(ids):
        raise RuleError(f"{path}: ncu_rules names a rule twice", "name each ncu rule once")
    return ids


def _doc(data: dict[str, Any], path: Path) -> dict[str, str | list[str]]:
    doc: dict[str, str | list[str]] = data.get("doc", {})
    missing_doc = [s for s in DOC_SECTIONS if not doc.get(s)]
    if missing_doc:
        raise RuleError(
            f"{path}: documentation section(s) missing: {', '.join(missing_doc)}",
            f"every rule documents {', '.join(DOC_SECTIONS)}",
        )
    return doc


def _params(
    data: dict[str, Any], path: Path, scope: str, vocabulary: Vocabulary
) -> dict[str, float]:
    """`[params]`: a program analysis's thresholds; in a kernel rule, named numbers its
    condition and impact read (they must not hide a metric's name)."""
    params = {str(k): float(v) for k, v in data.get("params", {}).items()}
    if scope == "kernel":
        hidden = sorted(set(params) & (vocabulary.names | set(vocabulary.constants)))
        if hidden:
            raise RuleError(
                f"{path}: params name metric(s) or constant(s) {', '.join(hidden)}",
                "give the thresholds names of their own",
            )
    return params


def _defaults(
    data: dict[str, Any], path: Path, requires: tuple[str, ...], read: frozenset[str]
) -> dict[str, float]:
    """`[defaults]`: the value a name takes when the report lacks it (numbers checked finite
    by file.py)."""
    defaults: dict[str, float] = {}
    for name, value in data.get("defaults", {}).items():
        if name in requires:
            raise RuleError(
                f"{path}: {name} is both required and defaulted",
                "a missing metric either skips the rule (requires) or takes a default",
            )
        if name not in read:
            raise RuleError(
                f"{path}: defaults name {name}, which the condition and impact do not read",
                "remove it",
            )
        defaults[str(name)] = float(value)
    return defaults


def _analysis(
    data: dict[str, Any], path: Path, scope: str, analyses: Mapping[str, AnalysisDeclaration]
) -> AnalysisDeclaration | None:
    """A program rule's analysis (None for a kernel rule)."""
    if scope != "program":
        return None
    name = str(data.get("analysis", ""))
    analysis = analyses.get(name)
    if analysis is None:
        raise RuleError(
            f"{path}: program rule names unknown analysis {name!r}",
            f"analysis = one of {', '.join(analyses)}",
        )
    return analysis


def _analysis_params(
    params: dict[str, float], path: Path, analysis: AnalysisDeclaration
) -> dict[str, float]:
    """A program rule's `[params]` checked against its analysis's: an unknown key is an error, a
    key left out takes the analysis's default."""
    unknown = [key for key in params if key not in analysis.params]
    if unknown:
        raise RuleError(
            f"{path}: params name unknown key(s) {', '.join(unknown)} of analysis {analysis.name}",
            f"{analysis.name} takes {', '.join(analysis.params)}",
        )
    defaults = analysis.defaults
    return {**params, **{key: defaults[key] for key in defaults if key not in params}}


def _template_names(
    analysis: AnalysisDeclaration | None, vocabulary: Vocabulary
) -> tuple[Collection[str], str]:
    """The names a rule's message and fix may use, and a hint that says where they come from."""
    if analysis is not None:
        names = analysis.values
        return names, f"analysis {analysis.name} gives {', '.join(names)}"
    hint = "name values of nsdiag/analysis/kernel/namespace.py: {name}, {name:.2f}"
    return vocabulary.template_names, hint


def _template(
    data: dict[str, Any], key: str, path: Path, names: tuple[Collection[str], str]
) -> str:
    """A message or fix template, checked against the names its values will have."""
    template = _text(data, key, path)
    problems = template_problems(template, names[0])
    if problems:
        raise RuleError(f"{path}: {key} template: {'; '.join(problems)}", names[1])
    return template


def parse_rule(path: Path, vocabulary: Vocabulary) -> RuleSpec:
    """One rule file, validated whole: its shape (file.py), then its names, expressions and
    templates, and a program rule's analysis and `[params]`. RuleError names the file and the
    key."""
    data = read_rule_file(path)
    rule_id, cause, scope = _identity(data, path)
    params = _params(data, path, scope, vocabulary)
    known = vocabulary.names | frozenset(params)
    requires = _names(data, "requires", path, known)
    evidence = _names(data, "evidence", path, known)
    doc = _doc(data, path)
    constants = (
        {**vocabulary.constants, **params} if scope == "kernel" else {**vocabulary.constants}
    )
    condition = _expr(data, "condition", path, known, constants)
    if scope == "kernel" and condition is None:
        raise RuleError(f"{path}: kernel rules need a condition", 'add condition = "..."')
    impact = _expr(data, "impact", path, known, constants)
    ncu_condition = _expr(data, "ncu_condition", path, known | {NCU_SPEEDUP}, constants)
    if ncu_condition is not None and not data.get("ncu_rules"):
        raise RuleError(f"{path}: ncu_condition without ncu_rules", "name the ncu rules it gates")
    read = frozenset().union(*(e.names for e in (condition, impact) if e is not None))
    analysis = _analysis(data, path, scope, vocabulary.analyses)
    if analysis is not None:
        params = _analysis_params(params, path, analysis)
    names = _template_names(analysis, vocabulary)
    if analysis is None:  # a kernel rule's message may state its thresholds (its params)
        names = (frozenset(names[0]) | frozenset(params), names[1])
    return RuleSpec(
        id=rule_id,
        cause=cause,
        title=_text(data, "title", path),
        scope=scope,
        requires=requires,
        condition=condition,
        impact=impact,
        impact_basis=str(data.get("impact_basis", "")).strip(),
        evidence=evidence,
        message=_template(data, "message", path, names),
        fix=_template(data, "fix", path, names),
        doc=doc,
        params=params,
        analysis=analysis.name if analysis is not None else "",
        path=str(path),
        defaults=_defaults(data, path, requires, read),
        ncu_rules=_ncu_rules(data, path),
        ncu_condition=ncu_condition,
    )
