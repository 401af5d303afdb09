"""The rules a diagnosis applies: the shipped ones, then the user's rule folders in order
(`--rules DIR`, NSDIAG_RULES_DIR). A user's rule with a new id adds a rule; one with the id of
an earlier rule replaces it, and a note says so. Every file is validated as the shipped ones are
(spec.parse_rule), so a bad rule fails when the rules load, in one line naming its file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nsdiag.analysis.rules.spec import RuleSpec, default_rules, load_rules


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[RuleSpec, ...]
    notes: tuple[str, ...] = ()  # one line per replaced rule
    user: frozenset[str] = frozenset()  # ids that come from the user's folders


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
