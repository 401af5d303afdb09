"""The documentation an agent needs to act on an answer, served as resources: the cause -> change
table of docs/diagnosis.md (shipped inside the wheel, see pyproject.toml) and each rule's
documentation as `nsdiag rules show` prints it."""

from __future__ import annotations

from dataclasses import dataclass

from nsdiag.errors import InputError
from nsdiag.resources import data_dir

CAUSES_URI = "nsdiag://docs/causes"
RULE_URI = "nsdiag://rules/{rule_id}"
CAUSES_HEADING = "## Findings are changes"  # docs/diagnosis.md's section with the cause table


@dataclass(frozen=True)
class RuleDoc:
    id: str
    uri: str
    name: str
    title: str


def causes_table() -> str:
    """docs/diagnosis.md's section on changes: which change fixes which cause, and how savings
    are counted once."""
    try:
        text = (data_dir("docs") / "diagnosis.md").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as exc:
        raise InputError(
            f"docs/diagnosis.md is not installed with nsdiag ({exc})", "reinstall nsdiag"
        ) from exc
    start = text.find(CAUSES_HEADING)
    if start < 0:
        raise InputError(f"docs/diagnosis.md has no section {CAUSES_HEADING!r}", "reinstall nsdiag")
    end = text.find("\n## ", start + len(CAUSES_HEADING))
    return text[start : end if end >= 0 else len(text)].strip() + "\n"


def rule_docs() -> list[RuleDoc]:
    """One resource per rule in use (the shipped ones and NSDIAG_RULES_DIR's)."""
    from nsdiag.cli.rules import active_rules

    return [
        RuleDoc(r.id, RULE_URI.format(rule_id=r.id), f"{r.id} {r.cause}", r.title)
        for r in active_rules(()).rules
    ]


def rule_doc(rule_id: str) -> str:
    """`nsdiag rules show RULE_ID`."""
    from nsdiag.mcp.calls import rules

    return rules("show", rule_id).text
