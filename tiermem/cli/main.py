"""Entry point of the ``tiermem`` console script: imports every command module, runs the group."""

from __future__ import annotations

import importlib

from tiermem.cli.app import cli

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
)

for _module in COMMAND_MODULES:
    importlib.import_module(_module)


def main() -> None:
    cli(prog_name="tiermem")


if __name__ == "__main__":
    main()
