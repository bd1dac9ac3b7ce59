"""``tiermem migrate --to postgresql://...``: copy the SQLite store under the root into PostgreSQL."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, json_option, print_json, state_of


@cli.command()
@click.option("--to", "url", required=True, metavar="URL", envvar="TIERMEM_MIGRATE_TO",
              help="The target database, postgresql://user:password@host:5432/db (or TIERMEM_MIGRATE_TO, which"
                   " keeps the password out of the shell history).")
@click.option("--replace", is_flag=True, help="Copy into a target that already holds a store: rows and files that"
                                              " exist there with other content are overwritten.")
@json_option
@click.pass_context
def migrate(ctx: click.Context, url: str, replace: bool, as_json: bool) -> None:
    """Copy the SQLite store under --root into a PostgreSQL database: every tier and every scope
    (facts, audit, plans, the update queue, digests and marks, embeddings, Daily files, dream
    diaries, MEMORY.md and its versions). The target's schema is created first; a target that
    already holds memory is refused unless --replace. The SQLite store is only read; afterwards
    set database_url (or TIERMEM_DATABASE_URL) to use the copy: the root then holds tiermem.postgres
    naming the database, and opening it without the URL is refused (delete that file to use the
    SQLite store again).

    \b
    Example:
      tiermem --root ~/.tiermem migrate --to postgresql://tiermem@db.internal:5432/memory
    """
    from tiermem.transfer.migrate import migrate_store

    state = state_of(ctx)
    report = migrate_store(state.root, url, replace=replace)
    if as_json:
        print_json({"source": report.source, "target": report.target, "counts": report.counts})
        return
    from tiermem.cli.sections import describe

    click.echo(f"migrated {report.source} to {report.target}: {describe(report.counts)}")
