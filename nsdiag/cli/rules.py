"""`nsdiag rules`: the rule table, one line per rule or one rule's documentation; and the
`--rules DIR` option (with NSDIAG_RULES_DIR) that adds or replaces rules for every command that
applies them."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from nsdiag.cli.help import examples

if TYPE_CHECKING:
    from nsdiag.analysis.ruleset import RuleSet

RULES_ENV = "NSDIAG_RULES_DIR"
F = TypeVar("F", bound=Callable[..., Any])


def rules_option(command: F) -> F:
    """`--rules DIR` (repeatable) on a command."""
    return click.option(
        "--rules",
        "rule_dirs",
        multiple=True,
        metavar="DIR",
        type=click.Path(path_type=Path),
        help=f"a folder of rule files (*.toml) that add rules or replace rules of the same id; "
        f"repeatable, after the folders of ${RULES_ENV} ({os.pathsep}-separated)",
    )(command)


def rule_folders(option: Sequence[Path]) -> list[Path]:
    """The user's rule folders: NSDIAG_RULES_DIR's, then --rules', in order (later wins)."""
    from_env = [Path(p) for p in os.environ.get(RULES_ENV, "").split(os.pathsep) if p.strip()]
    return [*from_env, *option]


def active_rules(option: Sequence[Path]) -> RuleSet:
    """The rules to apply; a note on stderr for each rule a user's folder replaces."""
    from nsdiag.analysis.ruleset import load_rule_set

    rule_set = load_rule_set(rule_folders(option))
    for note in rule_set.notes:
        click.echo(f"nsdiag: note: {note}", err=True)
    return rule_set


@click.group(
    invoke_without_command=True,
    epilog=examples(
        "nsdiag rules    # the table, as `nsdiag rules list`",
        "nsdiag rules show NSD101",
        "nsdiag rules --rules ./my-rules list    # with your rule files",
    ),
)
@rules_option
@click.pass_context
def rules(ctx: click.Context, rule_dirs: tuple[Path, ...]) -> None:
    """The rule table: `nsdiag rules list`, `nsdiag rules show ID`."""
    ctx.obj = rule_dirs
    if ctx.invoked_subcommand is None:
        ctx.invoke(rules_list)


def _folders(ctx: click.Context, rule_dirs: Sequence[Path]) -> tuple[Path, ...]:
    """The group's --rules, then the subcommand's."""
    return (*(ctx.obj or ()), *rule_dirs)


@rules.command(
    "list",
    short_help="One line per rule: id, cause, title.",
    epilog=examples(
        "nsdiag rules list",
        "nsdiag rules list --rules ./my-rules    # yours too, with their files",
    ),
)
@rules_option
@click.pass_context
def rules_list(ctx: click.Context, rule_dirs: tuple[Path, ...] = ()) -> None:
    """One line per rule: id, cause, title (and the file of a rule from your folders)."""
    from nsdiag.render.ruledoc import rule_row

    rule_set = active_rules(_folders(ctx, rule_dirs))
    for rule in rule_set.rules:
        click.echo(rule_row(rule, rule.path if rule.id in rule_set.user else None))


@rules.command(
    "show",
    short_help="The documentation of one rule, by id or cause.",
    epilog=examples(
        "nsdiag rules show NSD101",
        "nsdiag rules show dram-bandwidth-underused    # by its cause",
    ),
)
@click.argument("rule_id")
@rules_option
@click.pass_context
def rules_show(ctx: click.Context, rule_id: str, rule_dirs: tuple[Path, ...]) -> None:
    """The documentation of one rule (by id, e.g. NSD101, or by cause slug)."""
    from nsdiag.analysis.ruleset import find_rule, template_values
    from nsdiag.render.ruledoc import rule_text

    rule_set = active_rules(_folders(ctx, rule_dirs))
    rule = find_rule(rule_id, rule_set.rules)
    click.echo(rule_text(rule, template_values(rule)))
