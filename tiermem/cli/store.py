"""``tiermem init``, ``inject``, ``export``, ``import``, ``stats``."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from tiermem import validate
from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.config import CONFIG_FILE
from tiermem.paths import made_dirs, write_private
from tiermem.types import Scope

_TEMPLATE = """\
# tiermem configuration. Precedence: arguments > TIERMEM_* environment > this file > defaults.
[tiermem]
# llm = "openai:gpt-4o-mini"            # or "openai-compatible:llama3.1" with llm_base_url, "none"
# llm_base_url = "http://localhost:11434/v1"
# embedder = "local"                    # MiniLM (int8 in a new store), "hash", "openai:text-embedding-3-small"
# debounce_seconds = 30
# fact_confidence_threshold = 0.5
# max_facts = 500
# max_injection_tokens = 2000
# daily_retention_days = 90
# timezone = "Europe/Berlin"
# database_url = "postgresql://user:password@host:5432/db"   # the store in PostgreSQL (TIERMEM_DATABASE_URL)
# log_prompts = false                   # the LLM call log keeps prompt texts (redacted) only when true
# call_log_retention_days = 90
# [tiermem.prices."openai:gpt-4o-mini"] # USD per million tokens: costs in `tiermem calls` and `stats`
# input_per_mtok = 0.15
# output_per_mtok = 0.60
"""


@cli.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the memory root with a commented tiermem.toml, and the store's schema (in the
    database of database_url / TIERMEM_DATABASE_URL when set: its tables and the pgvector
    extension, where this user may create it).

    \b
    Example:
      tiermem --root ~/.tiermem init
      TIERMEM_DATABASE_URL=postgresql://tiermem@db:5432/memory tiermem init
    """
    state = state_of(ctx)
    with made_dirs(state.root):  # 0700; an init that fails (a bad URL) leaves the root as it was
        mem = state.memory(announce=False)
        config = state.root / CONFIG_FILE
        if not config.exists():
            write_private(config, _TEMPLATE.encode("utf-8"))  # 0600: it may hold a database password
    root = state.root.resolve()
    click.echo(f"initialised {root}")
    if not Path(mem.db.label).is_relative_to(root):  # the store is in a database server
        click.echo(f"store: {mem.db.label}")


@cli.command()
@click.option("--max-tokens", type=click.IntRange(1, 1_000_000), default=None, help="Token budget.")
@click.option("--query", default=None,
              help="Put the facts and MEMORY.md items most relevant to this message first, "
                   "and add relevant Daily notes.")
@json_option
@click.pass_context
def inject(ctx: click.Context, max_tokens: int | None, query: str | None, as_json: bool) -> None:
    """Print the memory text to put in a system prompt.

    \b
    Example:
      tiermem inject --max-tokens 500 --query "what editor theme?"
    """
    text = state_of(ctx).memory(create=False).format_for_injection(max_tokens=max_tokens, query=query)
    if as_json:
        print_json({"text": text})
    else:
        click.echo(text)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.pass_context
def export(ctx: click.Context, file: Path | None) -> None:
    """Write a full backup as JSON to FILE or stdout: facts, summaries, plans, audit, tombstones,
    dream state and MEMORY.md versions, digests, queue items, embeddings, and the Daily files,
    dream diaries and MEMORY.md. Every scope, or with --user/--agent (or TIERMEM_USER/TIERMEM_AGENT)
    only that scope's rows and that user's files.

    \b
    Example:
      tiermem export backup.json
      tiermem --user maya export maya.json
    """
    data = state_of(ctx).memory(create=False).export(scope=_scope_given(ctx))
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    if file is None:
        click.echo(text, nl=False)
        return
    temp = file.with_name(f".{file.name}.tmp")
    try:
        write_private(temp, text.encode("utf-8"))  # 0600: a backup holds everything the store holds
        os.replace(temp, file)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink(missing_ok=True)
        raise click.ClickException(f"cannot write {file}: {exc.strerror or exc}") from exc
    click.echo(f"exported to {file}", err=True)


def _scope_given(ctx: click.Context) -> Scope | None:
    """The scope of --user/--agent (or TIERMEM_USER/TIERMEM_AGENT) when either was given, else None."""
    root = ctx.find_root()
    given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    if root.get_parameter_source("user") in given or root.get_parameter_source("agent") in given:
        state = state_of(ctx)
        return Scope(state.user, state.agent)
    return None


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--replace", is_flag=True, help="Overwrite rows and files that exist with other content.")
@json_option
@click.pass_context
def import_(ctx: click.Context, file: Path, replace: bool, as_json: bool) -> None:
    """Restore an export (version 1 or 2) as it was: ids, timestamps, files; no dedup or
    threshold; this store's redaction applied. Rows and files that exist with other content are
    refused (nothing is written) unless --replace. Says what was added, what was there already
    and what was refused (--json: the same per section).

    \b
    Example:
      tiermem --root ./restored import backup.json
    """
    from tiermem.cli.sections import describe, refused_line
    from tiermem.errors import ImportConflict

    name = "stdin" if str(file) == "-" else str(file)
    try:
        raw = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {exc.strerror or exc}") from exc
    data: Any = validate.json_value(validate.utf8(raw, f"export file {name}"), f"export file {name}")
    try:
        counts = state_of(ctx).memory().import_(data, replace=replace)
    except ImportConflict as exc:
        raise click.ClickException(f"refused, nothing was imported: {exc}") from exc
    shown = counts.by_outcome()
    if as_json:
        print_json(shown)
        return
    click.echo(f"imported {name}:")
    everything_there = "everything in the file was here already" if any(counts.values()) else "the file holds nothing"
    click.echo(f"  added: {describe(shown['added'])}" + ("" if shown["added"] else f" ({everything_there})"))
    click.echo(f"  already there{' or overwritten (--replace)' if replace else ''}: {describe(shown['already_there'])}")
    click.echo(f"  refused: {refused_line(shown['refused'])}")


@cli.command()
@json_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """What the scope holds: facts by category, daily files, MEMORY.md bullets, the active
    plan, the update queue, the providers and the score floors (search_min_score for search and
    recall, search_inject_min_score for automatic injection).

    \b
    Example:
      tiermem stats
      tiermem stats --json
    """
    data = state_of(ctx).memory(create=False).stats()
    if as_json:
        print_json(data)
        return
    from tiermem.cli.render import stats_table

    stats_table(data)
