"""``tiermem mirror``: rewrite the local Daily files and ``MEMORY.md`` from a PostgreSQL store."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.plural import counted


@cli.command()
@json_option
@click.pass_context
def mirror(ctx: click.Context, as_json: bool) -> None:
    """Bring this root's copy of the user's Markdown files up to date with the database.

    With PostgreSQL (TIERMEM_DATABASE_URL) the Daily journal and MEMORY.md live in the database;
    every process keeps a copy under its root for people to read (memory/YYYY-MM-DD.md, MEMORY.md),
    rewritten after its own writes and when it opens the store. This command compares every file
    with the database and rewrites the copies that differ (writes made on other hosts). A changed
    MEMORY.md copy is a hand edit: it is imported as a new version, not overwritten. Edits of the
    Daily copies are not read back. With SQLite the files are the store: nothing to do.

    \b
    Example:
      tiermem mirror
      tiermem --user alice mirror --json
    """
    mem = state_of(ctx).memory(create=False)
    written = mem.refresh_mirror()
    if as_json:
        print_json({"user": mem.scope.user_id, "backend": mem.db.backend, "written": written})
    elif mem.db.backend == "sqlite":
        click.echo("the files under the root are the store (SQLite): nothing to mirror")
    elif not written:  # opening the store already refreshed what had changed
        click.echo(f"the mirror of user {mem.scope.user_id} under {mem.root} is up to date")
    else:
        click.echo(f"mirrored {counted(len(written), 'file')} of user {mem.scope.user_id} to {mem.root}: "
                   + ", ".join(written))
