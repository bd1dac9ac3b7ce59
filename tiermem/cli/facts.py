"""``tiermem remember``, ``facts list|show|edit|delete``, ``history``."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.cli.render import fact_table, history_table
from tiermem.facts.store import NewFact
from tiermem.types import CATEGORIES

_CATEGORY = click.Choice(CATEGORIES)


@cli.command()
@click.argument("contents", nargs=-1, required=True)
@click.option("--category", "-c", type=_CATEGORY, default="knowledge", show_default=True)
@click.option("--confidence", type=float, default=1.0, show_default=True, help="0.0 to 1.0.")
@click.option("--source", default=None, help="Where the fact came from (thread id).")
@json_option
@click.pass_context
def remember(ctx: click.Context, contents: tuple[str, ...], category: str, confidence: float,
             source: str | None, as_json: bool) -> None:
    """Store one or more facts; a skipped one is reported with its reason (a duplicate of a
    stored fact, confidence below fact_confidence_threshold, ...) and not stored.

    \b
    Example:
      tiermem remember "Prefers dark mode" -c preference --confidence 0.9
    """
    items = [NewFact.checked(text, category, confidence, source) for text in contents]
    results = state_of(ctx).memory().facts.admit(items)
    if as_json:
        print_json([{"content": a.item.content, "fact": a.fact.to_dict() if a.fact else None, "reason": a.reason}
                    for a in results])
        return
    for admission in results:
        if admission.fact is not None:
            click.echo(f"remembered {admission.fact.id}: {admission.fact.content}")
        else:
            click.echo(f"skipped: {admission.reason} -- {admission.item.content}")


@cli.group()
def facts() -> None:
    """List, show, edit and delete stored facts.

    \b
    Example:
      tiermem facts list --category preference
    """


@facts.command("list")
@click.option("--category", "-c", type=_CATEGORY, default=None)
@json_option
@click.pass_context
def facts_list(ctx: click.Context, category: str | None, as_json: bool) -> None:
    """List the facts of the scope, highest confidence first.

    \b
    Example:
      tiermem facts list --json
    """
    found = state_of(ctx).memory(create=False).facts.list(category)
    if as_json:
        print_json([f.to_dict() for f in found])
    else:
        fact_table(found)


@facts.command("show")
@click.argument("fact_id")
@json_option
@click.pass_context
def facts_show(ctx: click.Context, fact_id: str, as_json: bool) -> None:
    """Show one fact and its audit history.

    \b
    Example:
      tiermem facts show fact_1a2b3c4d
    """
    mem = state_of(ctx).memory(create=False)
    fact = mem.facts.get(fact_id)
    trail = mem.facts.history(fact_id=fact_id)
    if as_json:
        print_json({**fact.to_dict(), "history": [e.to_dict() for e in trail]})
        return
    fact_table([fact])
    history_table(trail)


@facts.command("edit")
@click.argument("fact_id")
@click.option("--content", default=None)
@click.option("--category", "-c", type=_CATEGORY, default=None)
@click.option("--confidence", type=float, default=None)
@json_option
@click.pass_context
def facts_edit(ctx: click.Context, fact_id: str, content: str | None, category: str | None,
               confidence: float | None, as_json: bool) -> None:
    """Change a fact's content, category or confidence (only what you give).

    \b
    Example:
      tiermem facts edit fact_1a2b3c4d --confidence 0.7
    """
    if content is None and category is None and confidence is None:
        raise click.UsageError("give at least one of --content, --category, --confidence")
    fact = state_of(ctx).memory(create=False).facts.update(fact_id, content, category, confidence)
    if as_json:
        print_json(fact.to_dict())
    else:
        click.echo(f"updated {fact.id}")


@facts.command("delete")
@click.argument("fact_ids", nargs=-1, required=True)
@json_option
@click.pass_context
def facts_delete(ctx: click.Context, fact_ids: tuple[str, ...], as_json: bool) -> None:
    """Delete facts, all or none: if one id is unknown, nothing is deleted and the error names
    it. The content is tombstoned so extraction will not add it back.

    \b
    Example:
      tiermem facts delete fact_1a2b3c4d fact_5e6f7a8b
    """
    deleted = state_of(ctx).memory(create=False).facts.delete_many(fact_ids)
    if as_json:
        print_json({"deleted": [fact.id for fact in deleted]})
    else:
        click.echo(f"deleted {', '.join(fact.id for fact in deleted)}")


@cli.command()
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--fact", "fact_id", default=None, help="Only this fact's entries.")
@json_option
@click.pass_context
def history(ctx: click.Context, limit: int, fact_id: str | None, as_json: bool) -> None:
    """Show the audit history: what was added, skipped, evicted, removed, and why.

    \b
    Example:
      tiermem history --limit 20
    """
    trail = state_of(ctx).memory(create=False).facts.history(limit, fact_id)
    if as_json:
        print_json([e.to_dict() for e in trail])
    else:
        history_table(trail)
