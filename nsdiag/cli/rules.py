"""`nsdiag rules`: the rule table, one line per rule or one rule's documentation."""

from __future__ import annotations

import click


@click.group(invoke_without_command=True)
@click.pass_context
def rules(ctx: click.Context) -> None:
    """The rule table: `nsdiag rules list`, `nsdiag rules show ID`."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(rules_list)


@rules.command("list")
def rules_list() -> None:
    """One line per rule: id, cause, title."""
    from nsdiag.analysis.rulespec import default_rules

    for rule in default_rules():
        click.echo(f"{rule.id}  {rule.scope:7s}  {rule.cause:28s}  {rule.title}")


@rules.command("show")
@click.argument("rule_id")
def rules_show(rule_id: str) -> None:
    """The documentation of one rule (by id, e.g. NSD101, or by cause slug)."""
    from nsdiag.analysis.rulespec import find_rule
    from nsdiag.render.ruledoc import rule_text

    click.echo(rule_text(find_rule(rule_id)))
