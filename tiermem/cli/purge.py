"""``tiermem purge``: erase a fact, a text or a whole user for good (see :mod:`tiermem.purge`)."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, json_option, print_json, state_of


@cli.command()
@click.option("--fact", "fact_id", default=None, metavar="ID",
              help="Erase this fact of the scope and every copy of its text.")
@click.option("--text", default=None, metavar="TEXT",
              help="Erase every occurrence of TEXT (case-insensitive) in the scope's user, every agent.")
@click.option("--user", "purge_user", default=None, metavar="USER",
              help="Erase everything stored for USER, every agent (not the root --user option).")
@click.option("--yes", "-y", is_flag=True, help="Do not show what goes and ask first.")
@json_option
@click.pass_context
def purge(ctx: click.Context, fact_id: str | None, text: str | None, purge_user: str | None, yes: bool,
          as_json: bool) -> None:
    """Erase content for good: a fact (--fact), a text (--text) or a whole user (--user).

    Unlike `facts delete`, nothing is kept: the text leaves every table, every MEMORY.md version,
    MEMORY.md, the Daily files and dream diaries (rewritten; the audit keeps only a SHA-256 and
    counts), the search index and its vectors; tombstones keep a hash, so extraction still does
    not bring a fact back. Then the database is vacuumed and its WAL truncated (PostgreSQL: its
    tables vacuumed; other hosts' mirrors are rewritten when they refresh). Shows what goes and
    asks first unless --yes. Stop agents writing for that user first.

    \b
    Example:
      tiermem purge --text "Lisbon apartment" --yes
      tiermem --user alice purge --fact fact_1a2b3c4d
      tiermem purge --user bob --json --yes
    """
    from tiermem.purge import NOT_REACHED

    mem = state_of(ctx).memory(create=False)
    if not yes:
        planned = mem.purge(fact_id, text=text, user=purge_user, dry_run=True)
        click.echo(f"This erases {planned.summary()}:", err=True)
        for line in planned.where():
            click.echo(f"  {line}", err=True)
        click.confirm("Erase it for good?", abort=True, err=True)
    report = mem.purge(fact_id, text=text, user=purge_user)
    if as_json:
        print_json(report.to_dict())
    else:
        what = report.facts[0] if report.kind == "fact" else report.user_id if report.kind == "user" else "text"
        click.echo(f"purged {report.kind} {what} (sha256 {report.sha256[:12]}): {report.summary()}")
        for line in report.where():
            click.echo(f"  {line}")
        click.echo(NOT_REACHED)
    if not report.complete:
        raise click.ClickException("the content was removed, but the WAL could not be truncated (another process"
                                   " holds the store open); run the purge again when it has closed")
