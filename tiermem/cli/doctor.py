"""``tiermem doctor``: check the store, ``--repair`` rebuilds what can be rebuilt."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, json_option, os_error_text, print_json, state_of
from tiermem.errors import TiermemError


@cli.command()
@click.option("--repair", "fix", is_flag=True,
              help="Rebuild a damaged database beside the old one (kept as tiermem.db.damaged-<time>) from the "
                   "Daily files, MEMORY.md and the rows it can still read; rebuild the search index and vectors; "
                   "hand stuck queue items back; tighten file modes. Never deletes user text. "
                   "Stop other tiermem processes on the root first.")
@json_option
@click.pass_context
def doctor(ctx: click.Context, fix: bool, as_json: bool) -> None:
    """Check the store: the database (damage, schema version), stuck queue claims, the search
    index against the files, consolidation marks, file modes and symlinks leading out of the root.
    Exit code 0: healthy; 1: problems found; 2: could not check. An index that is merely behind
    the files is a notice, not a problem.

    \b
    Example:
      tiermem doctor
      tiermem doctor --repair
      tiermem doctor --json
    """
    from tiermem.doctor import check, repair

    state = state_of(ctx)
    try:
        if fix:
            result = repair(state.root)
            report = result.after
        else:
            report = check(state.root)
    except (TiermemError, OSError) as exc:
        if state.debug:
            raise
        text = os_error_text(exc) if isinstance(exc, OSError) else str(exc).splitlines()[0]
        if as_json:
            print_json({"root": str(state.root), "ok": False, "exit_code": 2, "error": text})
        else:
            click.echo(f"Error: {text}", err=True)
        ctx.exit(2)
    if as_json:
        print_json(result.to_dict() if fix else report.to_dict())
    else:
        if fix:
            for action in result.actions or ["nothing needed repairing"]:
                click.echo(f"repaired: {action}")
        _show(report.to_dict())
    ctx.exit(report.exit_code)


def _show(data: dict[str, object]) -> None:
    click.echo(f"store: {data['root']}")
    database = data.get("database")
    if isinstance(database, dict):  # a database server's store: where, which schema, what it holds
        details = [f"{label} {database[key] if database[key] is not None else 'missing'}"
                   for key, label in (("schema", "schema"), ("schema_version", "version"),
                                      ("vector_extension", "vector")) if key in database]
        click.echo(f"database: {database.get('database')}" + (f" ({', '.join(details)})" if details else ""))
        rows = database.get("rows")
        if isinstance(rows, dict):
            held = ", ".join(f"{table} {count}" for table, count in rows.items() if count)
            click.echo(f"rows: {held or 'none'}")
    if data.get("vector_model"):
        click.echo(f"search vectors: {data['vector_model']}")
    for key, label in (("problems", "problem"), ("unchecked", "not checked"), ("notices", "notice")):
        items = data[key]
        assert isinstance(items, list)
        for item in items:
            click.echo(f"{label}: {item}")
    checked = data["checked"]
    assert isinstance(checked, list)
    verdict = {0: "healthy", 1: "problems found", 2: "could not check"}[int(str(data["exit_code"]))]
    click.echo(f"checked: {', '.join(checked) or 'nothing'} — {verdict}")
