"""The rule loader: folders of rule files loaded, cross-checked and looked up.

It stands above the analyses it checks rules against: the kernel namespace
(kernel/namespace.py: the names a kernel rule may read and show), the program analyses' records
(program/registry.py: a program rule's analysis, its `[params]` and its templates' values) and
the cause table (records/causes.py). rules/spec.py parses one file against that `VOCABULARY`.

The rules a diagnosis applies are the shipped ones (rules/), then the user's rule folders in
order (`--rules DIR`, NSDIAG_RULES_DIR). A user's rule with a new id adds a rule; one with the id
of an earlier rule replaces it, and a note says so. Every file is validated as the shipped ones
are, so a bad rule fails when the rules load, in one line naming its file. A shipped rule names a
cause of the table, with that cause's scope; a user's rule may name a cause of its own (it is
then one change per finding: records/causes.py's `cause_of`), and one of the table only with its
scope. Neither this module nor what it imports loads pandas or numpy: `nsdiag rules` lists the
rules without.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nsdiag.analysis.kernel.namespace import CONSTANTS, rule_names, template_names
from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
from nsdiag.analysis.records.causes import CAUSES
from nsdiag.analysis.rules.spec import RuleSpec, Vocabulary
from nsdiag.analysis.rules.spec import parse_rule as parse_rule_file
from nsdiag.errors import RuleError
from nsdiag.resources import rules_dir

VOCABULARY = Vocabulary(
    names=rule_names(),
    constants=CONSTANTS,
    template_names=template_names(),
    analyses=PROGRAM_ANALYSES,
)
_FOLDER_HINT = "--rules and NSDIAG_RULES_DIR take folders of *.toml rule files"
_CAUSES_HINT = "docs/architecture.md, 'How to add a cause'"


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[RuleSpec, ...]
    notes: tuple[str, ...] = ()  # one line per replaced rule
    user: frozenset[str] = frozenset()  # ids that come from the user's folders


def parse_rule(path: Path, shipped: bool = False) -> RuleSpec:
    """One rule file, validated whole (rules/spec.py), and its cause checked against the table:
    a shipped rule's must be there; any rule's that is there must have its scope."""
    rule = parse_rule_file(path, VOCABULARY)
    cause = CAUSES.get(rule.cause)
    if cause is None and shipped:
        raise RuleError(
            f"{path}: cause {rule.cause!r} is not in analysis/records/causes.py", _CAUSES_HINT
        )
    if cause is not None and cause.rule_scope != rule.scope:
        raise RuleError(
            f"{path}: cause {rule.cause!r} is a {cause.scope} cause, and this rule's scope is "
            f"{rule.scope!r}",
            f"scope = {cause.rule_scope!r}, or a cause slug of the rule's own",
        )
    return rule


def load_rules(directory: Path | None = None) -> list[RuleSpec]:
    """Every rule file (*.toml) of a folder (default: the shipped rules/), ids unique."""
    shipped = directory is None or directory.resolve() == rules_dir().resolve()
    directory = directory or rules_dir()
    rules = [parse_rule(p, shipped) for p in rule_files(directory)]
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.id in seen:
            raise RuleError(
                f"rule id {rule.id} is used by {seen[rule.id]} and {Path(rule.path).name} "
                f"in {directory}",
                "ids are unique",
            )
        seen[rule.id] = Path(rule.path).name
    return rules


def rule_files(directory: Path) -> list[Path]:
    """The rule files of a folder; RuleError when it is not a folder or holds none."""
    try:
        files = sorted(directory.glob("*.toml")) if directory.is_dir() else None
    except OSError as exc:
        raise RuleError(f"{directory}: cannot read: {exc.strerror}", "check the folder") from exc
    if files is None:
        raise RuleError(f"{directory}: not a folder of rule files", _FOLDER_HINT)
    if not files:
        raise RuleError(f"{directory}: holds no rule files (*.toml)", _FOLDER_HINT)
    return files


@lru_cache(maxsize=1)
def default_rules() -> tuple[RuleSpec, ...]:
    """The shipped rules."""
    return tuple(load_rules())


def load_rule_set(folders: Sequence[Path] = ()) -> RuleSet:
    """The shipped rules with the rules of `folders` added or replacing them, in order."""
    rules: dict[str, RuleSpec] = {r.id: r for r in default_rules()}
    notes: list[str] = []
    user: set[str] = set()
    for folder in folders:
        for rule in load_rules(folder):
            replaced = rules.get(rule.id)
            if replaced is not None:
                notes.append(f"rule {rule.id} from {rule.path} replaces the one in {replaced.path}")
            rules[rule.id] = rule
            user.add(rule.id)
    ordered = sorted(rules.values(), key=lambda r: r.id)
    return RuleSet(tuple(ordered), tuple(notes), frozenset(user))


def find_rule(rule_id: str, rules: Sequence[RuleSpec] | None = None) -> RuleSpec:
    """A rule by id (any case) or cause slug, among `rules` (default: the shipped ones)."""
    rules = default_rules() if rules is None else rules
    for rule in rules:
        if rule.id.lower() == rule_id.lower() or rule.cause == rule_id:
            return rule
    known = ", ".join(r.id for r in rules)
    raise RuleError(f"no rule {rule_id!r}", f"known rules: {known}")


def template_values(rule: RuleSpec) -> Mapping[str, str]:
    """The values a program rule's templates may name, with what each means (`nsdiag rules
    show`); empty for a kernel rule."""
    analysis = PROGRAM_ANALYSES.get(rule.analysis)
    return analysis.values if analysis is not None else {}
