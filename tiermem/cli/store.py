"""``tiermem init``, ``inject``, ``export``, ``import``, ``stats``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.config import CONFIG_FILE
from tiermem.errors import InvalidInput

_TEMPLATE = """\
# tiermem configuration. Precedence: arguments > TIERMEM_* environment > this file > defaults.
[tiermem]
# llm = "openai:gpt-4o-mini"            # or "openai-compatible:llama3.1" with llm_base_url, "none"
# llm_base_url = "http://localhost:11434/v1"
# embedder = "local"                    # "hash", "openai:text-embedding-3-small"
# debounce_seconds = 30
# fact_confidence_threshold = 0.5
# max_facts = 500
# max_injection_tokens = 2000
# daily_retention_days = 90
# timezone = "Europe/Berlin"
"""


@cli.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the memory root with a commented tiermem.toml.

    \b
    Example:
      tiermem --root ~/.tiermem init
    """
    state = state_of(ctx)
    state.root.mkdir(parents=True, exist_ok=True)
    config = state.root / CONFIG_FILE
    if not config.exists():
        config.write_text(_TEMPLATE, encoding="utf-8")
    state.memory()
    click.echo(f"initialised {state.root.resolve()}")


@cli.command()
@click.option("--max-tokens", type=click.IntRange(1, 1_000_000), default=None, help="Token budget.")
@click.option("--query", default=None, help="Put the facts most relevant to this message first.")
@json_option
@click.pass_context
def inject(ctx: click.Context, max_tokens: int | None, query: str | None, as_json: bool) -> None:
    """Print the memory text to put in a system prompt.

    \b
    Example:
      tiermem inject --max-tokens 500 --query "what editor theme?"
    """
    text = state_of(ctx).memory().format_for_injection(max_tokens=max_tokens, query=query)
    if as_json:
        print_json({"text": text})
    else:
        click.echo(text)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.pass_context
def export(ctx: click.Context, file: Path | None) -> None:
    """Write everything (facts, summaries, plans, tombstones, audit) as JSON to FILE or stdout.

    \b
    Example:
      tiermem export backup.json
    """
    data = state_of(ctx).memory().export()
    text = json.dumps(data, ensure_ascii=False, indent=1)
    if file is None:
        click.echo(text)
    else:
        file.write_text(text + "\n", encoding="utf-8")
        click.echo(f"exported to {file}", err=True)


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--replace", is_flag=True, help="Overwrite ids that exist with other content.")
@json_option
@click.pass_context
def import_(ctx: click.Context, file: Path, replace: bool, as_json: bool) -> None:
    """Restore an export exactly (ids, timestamps; no dedup or threshold).

    \b
    Example:
      tiermem --root ./restored import backup.json
    """
    raw = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    try:
        data: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{file}: not JSON ({exc})") from exc
    counts = state_of(ctx).memory().import_(data, replace=replace)
    if as_json:
        print_json(counts)
    else:
        click.echo(", ".join(f"{n} {name}" for name, n in counts.items()))


@cli.command()
@json_option
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Counts of what the scope holds (facts by category, ...).

    \b
    Example:
      tiermem stats --json
    """
    data = state_of(ctx).memory().stats()
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        click.echo(f"{key}: {value}")
