"""``tiermem core show`` and ``tiermem core edit``: read and edit ``MEMORY.md`` (the Core tier).

On PostgreSQL ``MEMORY.md`` lives in the database (the file under the root is a mirror), so these
commands are the sure way to read and change it from any host; on SQLite they read and write the
file itself. ``edit`` opens ``$EDITOR`` (``$VISUAL``) on the current text and saves what you save
as the new text; the text it replaces is kept as a version (``tiermem rollback --list``).
"""

from __future__ import annotations

import click

from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.errors import NotFound
from tiermem.plural import counted


@cli.group()
def core() -> None:
    """Show or edit MEMORY.md, the Core memory (kept in the database on PostgreSQL).

    \b
    Example:
      tiermem core show
      EDITOR=nano tiermem core edit
    """


@core.command("show")
@click.option("--version", "version_id", type=click.IntRange(min=1), default=None,
              help="Show a kept version (see `tiermem rollback --list`) instead of the current text.")
@json_option
@click.pass_context
def core_show(ctx: click.Context, version_id: int | None, as_json: bool) -> None:
    """Print the current MEMORY.md (or a kept version of it). With --json: the text, its
    bullets and the file a person reads (on PostgreSQL: the local mirror).

    \b
    Example:
      tiermem core show
      tiermem core show --version 3 --json
    """
    mem = state_of(ctx).memory(create=False)
    if version_id is not None:
        found = [v for v in mem.dream_versions() if v.id == version_id]
        if not found:
            raise NotFound(f"MEMORY.md version {version_id} does not exist for user {mem.scope.user_id!r}")
        version = found[0]
        if as_json:
            print_json(version.to_dict())
        else:
            click.echo(version.content, nl=not version.content.endswith("\n"))
        return
    text = mem.core.read()
    if as_json:
        print_json({"userId": mem.scope.user_id, "path": str(mem.core.path), "text": text,
                    "items": [item for section in mem.core.sections() for item in section.items]})
    elif not text:
        click.echo(f"MEMORY.md of user {mem.scope.user_id!r} is empty")
    else:
        click.echo(text, nl=not text.endswith("\n"))


@core.command("edit")
@json_option
@click.pass_context
def core_edit(ctx: click.Context, as_json: bool) -> None:
    """Open $EDITOR on the current MEMORY.md and save the result as the new text. The text it
    replaces is kept as a version (`tiermem rollback` restores it). Nothing is written when you
    quit without saving or change nothing.

    \b
    Example:
      EDITOR=vim tiermem core edit
    """
    mem = state_of(ctx).memory()
    current = mem.core.read()
    edited = click.edit(current, extension=".md", require_save=True)
    if edited is None or edited == current:
        if as_json:
            print_json({"status": "unchanged", "savedVersionId": None})
        else:
            click.echo("MEMORY.md unchanged")
        return
    done = mem.core.rewrite(edited, "edit")
    changed = done.before != current  # written by another writer (a dream, another host) meanwhile
    if as_json:
        print_json({"status": "saved", "savedVersionId": done.version_id, "bullets": len(mem.core.items()),
                    "changedMeanwhile": changed})
        return
    click.echo(f"saved MEMORY.md ({counted(len(mem.core.items()), 'bullet')}); the previous text is version "
               f"{done.version_id} (`tiermem rollback {done.version_id}` restores it)")
    if changed:
        click.echo("note: MEMORY.md was changed by another writer while you edited; your text replaced it "
                   f"(that text is version {done.version_id})", err=True)
