"""The root command group, its shared options, and the error/exit-code convention.

Exit codes: 0 ok; 1 error with a one-line message (bad input, not found, provider failure,
a file-system error, no store at the root; traceback only with ``--debug``); 2 usage error
(click's convention).

A *store* is a root directory holding ``tiermem.db``. Commands that only read (``search``,
``facts list``, ``daily``, ``stats``, ...) never create one: on a root without a store they exit 1.
Commands that write create it and say so once on stderr; if the root is a directory that already
holds other files, they warn first (a mistyped ``--root`` should not go unnoticed).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tiermem.errors import TiermemError
from tiermem.storage.sqlite.integrity import REPAIR_HINT, is_damage

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

    def memory(self, *, create: bool = True, announce: bool = True, **settings: Any) -> Memory:
        """Open the root's store. ``create=False`` (commands that only read, or act on ids that
        must exist): no store there is an error instead of a new empty one. ``announce``: say on
        stderr when a store was created. Queued items left by other processes are not replayed by
        a short CLI command (they stay queued); ``tiermem worker``, ``mcp`` and ``queue`` process them."""
        if self._memory is None:
            from tiermem.config import load_settings
            from tiermem.memory import Memory
            from tiermem.storage.backend import store_exists, store_label

            path = self.root.expanduser().resolve()
            chosen = load_settings(path, {k: v for k, v in settings.items() if k not in _NOT_SETTINGS})
            where, hint = store_label(path, chosen), ("check --root" if not chosen.database_url
                                                       else "check TIERMEM_DATABASE_URL")
            existed = store_exists(path, chosen)
            if not existed and not create:
                raise click.ClickException(f"no tiermem store at {where} (run `tiermem init`, or {hint})")
            if not existed and not chosen.database_url and _holds_other_files(path):
                click.echo(f"warning: {path} is not empty but holds no tiermem store; creating one there "
                           "(check --root)", err=True)
            settings.setdefault("queue_replay", False)
            self._memory = Memory(self.root, user_id=self.user, agent_name=self.agent, **settings)
            if not existed and announce:
                click.echo(f"created a tiermem store at {where}", err=True)
        return self._memory

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None


_NOT_SETTINGS = ("llm", "embedder", "clock")  # Memory arguments that may be objects rather than settings


def _holds_other_files(path: Path) -> bool:
    """True when ``path`` is a directory with entries other than a ``tiermem.toml``."""
    from tiermem.config import CONFIG_FILE

    try:
        return any(entry.name != CONFIG_FILE for entry in path.iterdir())
    except OSError:  # missing, not a directory, unreadable: creating the store will say why
        return False


def os_error_text(exc: OSError) -> str:
    """``/x/backup.json: No such file or directory`` (the path first, then why)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}" if paths else reason


class TiermemGroup(click.Group):
    """Turns TiermemError, file-system errors (OSError) and undecodable input files into a
    one-line message and exit code 1 (traceback with --debug)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (TiermemError, OSError, UnicodeDecodeError) as exc:
            state = ctx.obj if isinstance(ctx.obj, CliState) else None
            if state is not None and state.debug:
                raise
            if isinstance(exc, OSError):
                raise click.ClickException(one_line(os_error_text(exc))) from exc
            if isinstance(exc, UnicodeDecodeError):
                raise click.ClickException(one_line(f"not UTF-8 text: {exc}")) from exc
            raise click.ClickException(one_line(str(exc)) or type(exc).__name__) from exc
        except sqlite3.DatabaseError as exc:  # damage met past the checks made when the store opened
            if not is_damage(exc) or (isinstance(ctx.obj, CliState) and ctx.obj.debug):
                raise
            raise click.ClickException(f"the database is damaged: {exc}; {REPAIR_HINT}") from exc


def one_line(message: str) -> str:
    """The first line of ``message`` (cut at any line break), printable on any terminal: lone
    surrogates (from bytes that were not UTF-8) are shown as ``\\udcff`` escapes, not a crash."""
    lines = message.strip().splitlines()
    return lines[0].encode("utf-8", "backslashreplace").decode("utf-8") if lines else ""


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
