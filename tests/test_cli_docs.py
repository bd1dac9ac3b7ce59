"""Every CLI command has help with an example, and docs/cli.md is the generated help (R61)."""

from __future__ import annotations

from pathlib import Path

from tiermem.cli.docs import help_text, render, walk
from tiermem.cli.main import cli

DOCS = Path(__file__).parent.parent / "docs" / "cli.md"
R61 = {"init", "remember", "search", "facts", "daily", "inject", "ingest", "dream", "rollback", "reindex", "stats",
       "export", "import", "mcp"}


def test_every_r61_command_exists() -> None:
    names = {path[1] for path, _ in walk(cli) if len(path) == 2}
    assert names >= R61
    assert {"list", "show", "edit", "delete"} <= {p[2] for p, _ in walk(cli) if len(p) == 3 and p[1] == "facts"}


def test_every_command_has_help_with_an_example() -> None:
    for path, command in walk(cli):
        text = help_text(path, command)
        assert command.help and len(command.help.strip()) > 20, path
        assert "Example" in text and "tiermem" in text.split("Example", 1)[1], path


def test_docs_are_the_generated_help() -> None:
    assert DOCS.read_text(encoding="utf-8") == render(), "run: python -m tiermem.cli.docs > docs/cli.md"
