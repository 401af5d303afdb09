"""The cause table (analysis/records/causes.py): every cause declared once, every shipped rule's
cause in it with its scope, every cause of it fired by a shipped rule, the grouping and the
budgets read from it, and docs/diagnosis.md's table the same table."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from nsdiag.analysis.changes import group_changes
from nsdiag.analysis.program.registry import PROGRAM_ANALYSES
from nsdiag.analysis.records.causes import (
    BUDGETS,
    CAUSES,
    KERNEL,
    KERNEL_TIME,
    KINDS,
    RANK,
    SCOPES,
    WAIT,
    cause_of,
)
from nsdiag.analysis.records.findings import Finding
from nsdiag.analysis.ruleset import default_rules
from nsdiag.render.ruledoc import cause_table

DOCS = Path(__file__).parents[1] / "docs" / "diagnosis.md"
TABLE = re.compile(r"<!-- cause table:[^\n]*-->\n(.*?)<!-- end of cause table -->", re.S)


def test_each_cause_is_well_formed() -> None:
    for slug, cause in CAUSES.items():
        assert cause.slug == slug
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", slug), slug
        assert cause.scope in SCOPES and cause.budget in BUDGETS, slug
        assert cause.change in KINDS, f"{slug}: its change names no kind of records/causes.py"
        assert cause.doc.strip() and "\n" not in cause.doc and "|" not in cause.doc, slug
        # a kernel finding's saving is its kernel's time; a program finding's never is
        assert (cause.budget == KERNEL_TIME) == (cause.scope == KERNEL), slug


def test_every_kind_of_change_fixes_a_cause() -> None:
    assert {c.change for c in CAUSES.values()} == set(KINDS)


def test_every_shipped_rules_cause_is_in_the_table_with_its_scope() -> None:
    for rule in default_rules():
        assert rule.cause in CAUSES, f"{rule.id}: add {rule.cause!r} to records/causes.py"
        assert CAUSES[rule.cause].rule_scope == rule.scope, rule.id


def test_every_cause_of_the_table_has_a_shipped_rule() -> None:
    """The vocabulary is covered: no cause is declared that nothing fires."""
    assert set(CAUSES) - {r.cause for r in default_rules()} == set()


def test_rank_causes_are_the_rules_whose_analysis_needs_the_ranks() -> None:
    for rule in default_rules():
        if rule.scope == "program":
            needs_ranks = PROGRAM_ANALYSES[rule.analysis].needs == "ranks"
            assert (CAUSES[rule.cause].scope == RANK) == needs_ranks, rule.id


def test_an_unknown_cause_is_one_change_per_finding() -> None:
    kernel, program = cause_of("brand-new", "kernel"), cause_of("brand-new", "program")
    assert (kernel.change, kernel.budget) == ("", KERNEL_TIME)
    assert (program.change, program.budget) == ("", "own time")
    assert cause_of("sync-heavy", "program") is CAUSES["sync-heavy"]


def _finding(cause: str, saved: float) -> Finding:
    return Finding(
        rule="NSD999", cause=cause, title="t", impact=None, recoverable=None, message="m",
        fix="f", saved_ns=saved,
    )  # fmt: skip


@pytest.mark.parametrize("slug", [s for s, c in CAUSES.items() if c.budget == WAIT])
def test_a_wait_cause_shares_the_ranks_wait(slug: str) -> None:
    """In a distributed run a finding of a wait cause draws on the one wait the ranks share (here
    the step's 100 above their mean computation of 30: 70), never on a budget of its own; on one
    GPU it is its own time."""
    ranks = SimpleNamespace(
        steps=[SimpleNamespace(wall_ns=100.0, compute_ns=40.0),
               SimpleNamespace(wall_ns=100.0, compute_ns=20.0)],
        iterations=1,
    )  # fmt: skip
    found = [_finding(slug, 60.0), _finding("rank-imbalance", 50.0)]
    changes = group_changes([], found, wall_ns=200.0, ranks=ranks)  # type: ignore[arg-type]
    assert sum(c.saved_ns or 0.0 for c in changes) == pytest.approx(70.0)
    alone = group_changes([], found, wall_ns=200.0)
    assert sum(c.saved_ns or 0.0 for c in alone) == pytest.approx(110.0)


def test_the_docs_table_is_the_cause_table() -> None:
    found = TABLE.search(DOCS.read_text())
    assert found is not None, "docs/diagnosis.md lost its cause table markers"
    assert found.group(1).strip() == cause_table(), (
        "docs/diagnosis.md's cause table differs from records/causes.py; put this one in:\n"
        + cause_table()
    )


IDIOM_TABLE = re.compile(r"<!-- idiom table:[^\n]*-->\n(.*?)<!-- end of idiom table -->", re.S)


def test_the_docs_idiom_table_is_the_idiom_table() -> None:
    from nsdiag.render.ruledoc import idiom_table

    found = IDIOM_TABLE.search(DOCS.read_text())
    assert found is not None, "docs/diagnosis.md lost its idiom table markers"
    assert found.group(1).strip() == idiom_table()
