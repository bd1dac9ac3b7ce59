"""The root command group, its shared options, and the error/exit-code convention.

Exit codes: 0 ok; 1 error with a one-line message (bad input, not found, provider failure;
traceback only with ``--debug``); 2 usage error (click's convention).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tiermem.errors import TiermemError

if TYPE_CHECKING:
    from tiermem.memory import Memory

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """What the root options chose; the Memory opens on first use."""

    root: Path
    user: str
    agent: str
    debug: bool
    _memory: Memory | None = field(default=None, repr=False)

    def memory(self, **settings: Any) -> Memory:
        """Open the root. Queued items left by other processes are not replayed by a short CLI
        command (they stay queued); ``tiermem mcp`` and ``tiermem queue`` process them."""
        if self._memory is None:
            from tiermem.memory import Memory

            settings.setdefault("queue_replay", False)
            self._memory = Memory(self.root, user_id=self.user, agent_name=self.agent, **settings)
        return self._memory

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None


class TiermemGroup(click.Group):
    """Turns TiermemError into a one-line message and exit code 1 (traceback with --debug)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TiermemError as exc:
            state = ctx.obj if isinstance(ctx.obj, CliState) else None
            if state is not None and state.debug:
                raise
            raise click.ClickException(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc


@click.group(cls=TiermemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), envvar="TIERMEM_HOME",
              default=Path(".tiermem"), show_default=True, help="Memory root directory (env TIERMEM_HOME).")
@click.option("--user", envvar="TIERMEM_USER", default="default", show_default=True,
              help="User id of the scope (env TIERMEM_USER).")
@click.option("--agent", envvar="TIERMEM_AGENT", default="default", show_default=True,
              help="Agent name of the scope (env TIERMEM_AGENT).")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="tiermem")
@click.pass_context
def cli(ctx: click.Context, root: Path, user: str, agent: str, debug: bool) -> None:
    """tiermem: memory for LLM agents that survives the session.

    \b
    Example:
      tiermem remember "Prefers dark mode" --category preference
      tiermem search "dark mode"
    """
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    state = CliState(root=root, user=user, agent=agent, debug=debug)
    ctx.obj = state
    ctx.call_on_close(state.close)


def json_option(func: F) -> F:
    """The ``--json`` flag every script-readable command has."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False))


def state_of(ctx: click.Context) -> CliState:
    obj = ctx.find_root().obj
    assert isinstance(obj, CliState)
    return obj


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
