"""Rule files (rules/NSDxxx-slug.toml): load, validate against the metric catalogue, look up."""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from nsdiag.analysis.expr import Expression, ExpressionError, parse
from nsdiag.analysis.message_template import template_problems
from nsdiag.analysis.program_values import PROGRAM_VALUES
from nsdiag.analysis.rule_context import CONSTANTS, rule_names, template_names
from nsdiag.errors import RuleError
from nsdiag.resources import rules_dir

# Causes whose slugs are public API (DESIGN.md); rule files may add more, never rename these.
KERNEL_CAUSES = frozenset(
    {
        "dram-bandwidth-saturated",
        "gemm-misaligned",
        "degenerate-gemm",
        "uncoalesced-global-access",
        "shared-bank-conflicts",
        "local-memory-spill",
        "memory-latency",
        "l2-bound",
        "warp-divergence",
        "compute-pipe-saturated",
        "fp64-heavy",
        "special-function-heavy",
        "barrier-stall",
        "atomic-contention",
        "low-occupancy",
        "tail-effect",
        "small-grid",
        "launch-overhead",
        "tensor-core-unused",
    }
)
PROGRAM_CAUSES = frozenset(
    {
        "fusion-candidate",
        "layout-conversion",
        "pageable-memcpy",
        "sync-heavy",
        "gpu-idle-gaps",
        "no-copy-compute-overlap",
        "launch-overhead",
    }
)
DOC_SECTIONS = ("detects", "why", "fix", "false_positives", "references")


_NAMES_HINT = "use names from nsdiag/model/catalogue.py or nsdiag/analysis/rule_context.py"


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
    # str.format templates (analysis/message_template.py) over the values a kernel rule sees
    # (rule_context.template_names) or a program rule's analysis gives (program_values)
    message: str
    fix: str
    doc: dict[str, str | list[str]]
    params: dict[str, float] = field(default_factory=dict)  # program analyses' thresholds
    analysis: str = ""  # program rules: the analysis that implements them
    path: str = ""
    defaults: dict[str, float] = field(default_factory=dict)  # name -> value when missing


def _text(data: dict[str, Any], key: str, path: Path) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RuleError(f"{path.name}: missing or empty '{key}'", "every rule needs it")
    return value.strip()


def _expr(data: dict[str, Any], key: str, path: Path, known: frozenset[str]) -> Expression | None:
    if key not in data:
        return None
    try:
        expression = parse(str(data[key]), CONSTANTS)
    except ExpressionError as exc:
        raise RuleError(f"{path.name}: malformed {key}: {exc}", "fix the rule file") from exc
    unknown = sorted(expression.names - known)
    if unknown:
        raise RuleError(
            f"{path.name}: {key} names unknown metric(s) {', '.join(unknown)}", _NAMES_HINT
        )
    return expression


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RuleError(f"{path.name}: not valid TOML: {exc}", "fix the rule file") from exc


def _identity(data: dict[str, Any], path: Path) -> tuple[str, str, str]:
    rule_id, cause, scope = (_text(data, key, path) for key in ("id", "cause", "scope"))
    if not path.name.startswith(rule_id):
        raise RuleError(
            f"{path.name}: file name must start with its id {rule_id}", "rename the file"
        )
    if scope not in ("kernel", "program"):
        raise RuleError(f"{path.name}: scope must be 'kernel' or 'program'", "fix the rule file")
    return rule_id, cause, scope


def _names(data: dict[str, Any], key: str, path: Path, known: frozenset[str]) -> tuple[str, ...]:
    names = tuple(str(n) for n in data.get(key, []))
    unknown = [n for n in names if n not in known]
    if unknown and key == "requires":
        raise RuleError(
            f"{path.name}: requires unknown metric(s) {', '.join(unknown)}", _NAMES_HINT
        )
    if unknown:
        raise RuleError(
            f"{path.name}: {key} names unknown metric(s) {', '.join(unknown)}", "fix the rule file"
        )
    return names


def _doc(data: dict[str, Any], path: Path) -> dict[str, str | list[str]]:
    doc: dict[str, str | list[str]] = data.get("doc", {})
    missing_doc = [s for s in DOC_SECTIONS if not doc.get(s)]
    if missing_doc:
        raise RuleError(
            f"{path.name}: documentation section(s) missing: {', '.join(missing_doc)}",
            f"every rule documents {', '.join(DOC_SECTIONS)}",
        )
    return doc


def _defaults(
    data: dict[str, Any], path: Path, requires: tuple[str, ...], read: frozenset[str]
) -> dict[str, float]:
    """`[defaults]`: the value a name takes when the report lacks it."""
    table = data.get("defaults", {})
    if not isinstance(table, dict):
        raise RuleError(f"{path.name}: defaults must be a table", "[defaults] name = number")
    defaults: dict[str, float] = {}
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RuleError(f"{path.name}: default of {name} is not a number", "name = number")
        if name in requires:
            raise RuleError(
                f"{path.name}: {name} is both required and defaulted",
                "a missing metric either skips the rule (requires) or takes a default",
            )
        if name not in read:
            raise RuleError(
                f"{path.name}: defaults name {name}, which the condition and impact do not read",
                "remove it",
            )
        defaults[str(name)] = float(value)
    return defaults


def _analysis(data: dict[str, Any], path: Path, scope: str) -> str:
    analysis = str(data.get("analysis", ""))
    if scope == "program" and analysis not in PROGRAM_VALUES:
        raise RuleError(
            f"{path.name}: program rule names unknown analysis {analysis!r}",
            f"analysis = one of {', '.join(PROGRAM_VALUES)}",
        )
    return analysis


def _template_names(scope: str, analysis: str) -> tuple[Collection[str], str]:
    """The names a rule's message and fix may use, and a hint that says where they come from."""
    if scope == "program":
        names = PROGRAM_VALUES[analysis]
        return names, f"analysis {analysis} gives {', '.join(names)}"
    return template_names(), "name values of nsdiag/analysis/rule_context.py: {name}, {name:.2f}"


def _template(
    data: dict[str, Any], key: str, path: Path, names: tuple[Collection[str], str]
) -> str:
    """A message or fix template, checked against the names its values will have."""
    template = _text(data, key, path)
    problems = template_problems(template, names[0])
    if problems:
        raise RuleError(f"{path.name}: {key} template: {'; '.join(problems)}", names[1])
    return template


def parse_rule(path: Path) -> RuleSpec:
    data = _read(path)
    rule_id, cause, scope = _identity(data, path)
    params = {str(k): float(v) for k, v in data.get("params", {}).items()}
    known = rule_names(params)
    requires = _names(data, "requires", path, known)
    evidence = _names(data, "evidence", path, known)
    doc = _doc(data, path)
    condition = _expr(data, "condition", path, known)
    if scope == "kernel" and condition is None:
        raise RuleError(f"{path.name}: kernel rules need a condition", 'add condition = "..."')
    impact = _expr(data, "impact", path, known)
    read = frozenset().union(*(e.names for e in (condition, impact) if e is not None))
    analysis = _analysis(data, path, scope)
    names = _template_names(scope, analysis)
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
        analysis=analysis,
        path=str(path),
        defaults=_defaults(data, path, requires, read),
    )


def load_rules(directory: Path | None = None) -> list[RuleSpec]:
    directory = directory or rules_dir()
    rules = [parse_rule(p) for p in sorted(directory.glob("NSD*.toml"))]
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.id in seen:
            raise RuleError(
                f"rule id {rule.id} is used by {seen[rule.id]} and {Path(rule.path).name}",
                "ids are unique",
            )
        seen[rule.id] = Path(rule.path).name
    return rules


@lru_cache(maxsize=1)
def default_rules() -> tuple[RuleSpec, ...]:
    return tuple(load_rules())


def find_rule(rule_id: str) -> RuleSpec:
    for rule in default_rules():
        if rule.id.lower() == rule_id.lower() or rule.cause == rule_id:
            return rule
    known = ", ".join(r.id for r in default_rules())
    raise RuleError(f"no rule {rule_id!r}", f"known rules: {known}")
