"""Generate ``docs/cli.md`` from the commands' ``--help``: ``python -m tiermem.cli.docs > docs/cli.md``."""

from __future__ import annotations

from collections.abc import Iterator

import click

from tiermem.cli.main import load_cli

cli = load_cli()  # the group with every command registered

CommandPath = tuple[str, ...]


def walk(command: click.Command, path: CommandPath = ("tiermem",)) -> Iterator[tuple[CommandPath, click.Command]]:
    """Every command and group, depth first, in name order."""
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from walk(command.commands[name], (*path, name))


def help_text(path: tuple[str, ...], command: click.Command) -> str:
    """``command``'s help as ``tiermem ... --help`` prints it (the root's context settings apply,
    whatever ran in this process before)."""
    settings = dict(cli.context_settings)
    parent: click.Context | None = None
    for name in path[:-1]:
        parent = click.Context(cli if parent is None else parent.command, info_name=name, parent=parent, **settings)
    ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100,
                        **settings)
    return command.get_help(ctx)


def render() -> str:
    parts = ["# tiermem command line", "", "Generated from `--help` by `python -m tiermem.cli.docs`; do not edit.", ""]
    for path, command in walk(cli):
        parts += [f"## `{' '.join(path)}`", "", "```text", help_text(path, command), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    print(render(), end="")
