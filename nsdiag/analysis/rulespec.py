"""Rule files (rules/NSDxxx-slug.toml): load, validate against the metric catalogue, look up."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from nsdiag.analysis.expr import Expression, ExpressionError, parse
from nsdiag.errors import RuleError
from nsdiag.model.catalogue import STALL_REASONS, canonical_names
from nsdiag.resources import rules_dir

# Causes whose slugs are public API (DESIGN.md); rule files may add more, never rename these.
KERNEL_CAUSES = frozenset(
    {
        "dram-bandwidth-saturated",
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
# Names a kernel rule may use besides catalogue metrics: computed per kernel by analysis.
KERNEL_CONTEXT_NAMES = frozenset(
    {
        "time_share",
        "mem_pct",
        "compute_pct",
        "arithmetic_intensity",
        "top_stall_share",
        "flop_total",
        "launches",
        "mean_duration_ns",
        "is_gemm_like",
        "fp_pipe_pct",
        "occupancy_limit_min",
        "dram_pct_of_ceiling",
        "dram_tb_per_s",
        *(f"stall_share_{reason}" for reason in STALL_REASONS),
    }
)


@dataclass(frozen=True)
class RuleSpec:
    id: str
    cause: str
    title: str
    scope: str  # "kernel" or "program"
    requires: tuple[str, ...]
    condition: Expression | None  # kernel rules
    impact: Expression | None  # recoverable fraction of the kernel's time, 0..1
    impact_basis: str  # the assumption behind `impact`, shown to users
    evidence: tuple[str, ...]
    message: str  # str.format template over the evidence values
    fix: str
    doc: dict[str, str | list[str]]
    params: dict[str, float] = field(default_factory=dict)  # program analyses' thresholds
    analysis: str = ""  # program rules: the analysis that implements them
    path: str = ""


def _text(data: dict, key: str, path: Path) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RuleError(f"{path.name}: missing or empty '{key}'", "every rule needs it")
    return value.strip()


def _expr(data: dict, key: str, path: Path, known: frozenset[str]) -> Expression | None:
    if key not in data:
        return None
    try:
        expression = parse(str(data[key]))
    except ExpressionError as exc:
        raise RuleError(f"{path.name}: malformed {key}: {exc}", "fix the rule file") from exc
    unknown = sorted(expression.names - known)
    if unknown:
        raise RuleError(
            f"{path.name}: {key} names unknown metric(s) {', '.join(unknown)}",
            "use names from nsdiag/model/catalogue.py",
        )
    return expression


def parse_rule(path: Path) -> RuleSpec:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RuleError(f"{path.name}: not valid TOML: {exc}", "fix the rule file") from exc
    rule_id, cause, scope = (
        _text(data, "id", path),
        _text(data, "cause", path),
        _text(data, "scope", path),
    )
    if not path.name.startswith(rule_id):
        raise RuleError(
            f"{path.name}: file name must start with its id {rule_id}", "rename the file"
        )
    if scope not in ("kernel", "program"):
        raise RuleError(f"{path.name}: scope must be 'kernel' or 'program'", "fix the rule file")
    params = {str(k): float(v) for k, v in data.get("params", {}).items()}
    known = frozenset(canonical_names() | KERNEL_CONTEXT_NAMES | set(params))
    requires = tuple(data.get("requires", []))
    unknown = [m for m in requires if m not in known]
    if unknown:
        raise RuleError(
            f"{path.name}: requires unknown metric(s) {', '.join(unknown)}",
            "use names from nsdiag/model/catalogue.py",
        )
    evidence = tuple(data.get("evidence", []))
    bad_evidence = [m for m in evidence if m not in known]
    if bad_evidence:
        raise RuleError(
            f"{path.name}: evidence names unknown metric(s) {', '.join(bad_evidence)}",
            "fix the rule file",
        )
    doc = data.get("doc", {})
    missing_doc = [s for s in DOC_SECTIONS if not doc.get(s)]
    if missing_doc:
        raise RuleError(
            f"{path.name}: documentation section(s) missing: {', '.join(missing_doc)}",
            f"every rule documents {', '.join(DOC_SECTIONS)}",
        )
    condition = _expr(data, "condition", path, known)
    if scope == "kernel" and condition is None:
        raise RuleError(f"{path.name}: kernel rules need a condition", 'add condition = "..."')
    return RuleSpec(
        id=rule_id,
        cause=cause,
        title=_text(data, "title", path),
        scope=scope,
        requires=requires,
        condition=condition,
        impact=_expr(data, "impact", path, known),
        impact_basis=str(data.get("impact_basis", "")).strip(),
        evidence=evidence,
        message=_text(data, "message", path),
        fix=_text(data, "fix", path),
        doc=doc,
        params=params,
        analysis=str(data.get("analysis", "")),
        path=str(path),
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
