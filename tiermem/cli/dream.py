"""``tiermem dream`` (Deep Dream now) and ``tiermem rollback`` (restore a MEMORY.md version)."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.clock import utc_iso
from tiermem.plural import counted


@cli.command()
@click.option("--days", type=click.IntRange(1, 3660), default=None,
              help="Read the daily files of the N most recent days (default: dream_lookback_days, 2).")
@click.option("--force", is_flag=True, help="Accept a rewrite that loses >25% of the bullets or exceeds the "
                                            "budget; dream again over unchanged days.")
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
@json_option
@click.pass_context
def dream(ctx: click.Context, days: int | None, force: bool, dry_run: bool, as_json: bool) -> None:
    """Consolidate recent daily files into MEMORY.md now (Deep Dream).

    Exit code 1 when the rewrite is refused (nothing is written then).

    \b
    Example:
      TIERMEM_LLM=openai:gpt-4o-mini tiermem dream --days 2 --dry-run
    """
    mem = state_of(ctx).memory(create=False)
    result = mem.deep_dream(lookback_days=days or mem.settings.dream_lookback_days, force=force, dry_run=dry_run)
    if as_json:
        print_json(result.to_dict())
    else:
        change = f"{result.prior_bullets} -> {counted(result.bullets, 'bullet')}"
        click.echo(f"{result.status}: {result.reason or change}")
        if result.diff:
            click.echo(result.diff.rstrip("\n"))
        for dropped in result.dropped:
            click.echo(f"dropped (not in the sources): {dropped.text} -- {dropped.reason}")
        if result.diary_path:
            click.echo(f"diary: {result.diary_path}")
    if result.status == "refused":
        ctx.exit(1)


@cli.command()
@click.argument("version", type=click.IntRange(min=1), required=False)
@click.option("--list", "list_only", is_flag=True, help="List the kept versions instead of restoring one.")
@json_option
@click.pass_context
def rollback(ctx: click.Context, version: int | None, list_only: bool, as_json: bool) -> None:
    """Restore a kept MEMORY.md version (the most recent one by default).

    Every MEMORY.md a dream or rollback replaced is kept; the text a rollback replaces is kept
    too, so a rollback can be undone.

    \b
    Example:
      tiermem rollback --list
      tiermem rollback 3
    """
    mem = state_of(ctx).memory(create=False)
    if list_only:
        versions = mem.dream_versions()
        if as_json:
            print_json([v.to_dict(with_content=False) for v in versions])
            return
        if not versions:
            click.echo("no versions")
        for v in versions:
            click.echo(f"{v.id:>5}  {utc_iso(v.created_at)[:19]}Z  replaced by {v.cause:<8}  "
                       f"{counted(v.bullets, 'bullet')}")
        return
    result = mem.rollback(version)
    if as_json:
        print_json(result.to_dict())
        return
    saved = f" (the replaced text is version {result.saved_version_id})" if result.saved_version_id else ""
    click.echo(f"restored version {result.restored.id}{saved}")
    if result.diff:
        click.echo(result.diff.rstrip("\n"))
