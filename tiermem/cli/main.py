"""Entry point of the ``tiermem`` console script: imports every command module, runs the group.

``tiermem [--root DIR] hook CLIENT EVENT`` (a coding agent's hook, run on every prompt) goes
straight to :mod:`tiermem.agents.hook_runner` without importing click or the command modules;
``cli`` (the click group with every command) is built on first use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import click

COMMAND_MODULES = (
    "tiermem.cli.facts",
    "tiermem.cli.store",
    "tiermem.cli.plan",
    "tiermem.cli.mcp",
    "tiermem.cli.dream",
    "tiermem.cli.core",
    "tiermem.cli.tiers",
    "tiermem.cli.demo",
    "tiermem.cli.doctor",
    "tiermem.cli.purge",
    "tiermem.cli.migrate",
    "tiermem.cli.worker",
    "tiermem.cli.mirror",
    "tiermem.cli.calls",
    "tiermem.cli.ui",
    "tiermem.cli.setup",
    "tiermem.cli.hook",
)


def load_cli() -> click.Group:
    """The ``tiermem`` group with every command module imported."""
    from tiermem.cli.app import cli

    for module in COMMAND_MODULES:
        importlib.import_module(module)
    return cli


def __getattr__(name: str) -> Any:
    if name == "cli":
        return load_cli()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def hook_arguments(argv: Sequence[str]) -> list[str] | None:
    """``argv`` when it runs a hook (``[--root DIR | --root=DIR] hook CLIENT EVENT``), else ``None``."""
    rest = list(argv)
    if rest[:1] == ["--root"] and len(rest) > 2:
        rest = rest[2:]
    elif rest[:1] and rest[0].startswith("--root="):
        rest = rest[1:]
    return list(argv) if len(rest) == 3 and rest[0] == "hook" else None


def main() -> None:
    hook = hook_arguments(sys.argv[1:])
    if hook is not None:
        from tiermem.agents.hook_runner import main as run_hook

        sys.exit(run_hook(hook))
    load_cli()(prog_name="tiermem")


if __name__ == "__main__":
    main()
