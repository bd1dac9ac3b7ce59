"""The MCP server over one ``Memory``, built with the official ``mcp`` SDK (v2 ``MCPServer``).

``build_server(mem)`` registers the tools of :class:`~tiermem.mcp.tools.MemoryTools` and the
resources ``memory://core`` (MEMORY.md), ``memory://daily/today`` (today's daily file),
``memory://daily/{day}`` and ``memory://injection``; ``serve(mem, ...)`` runs it over stdio or,
with ``http``, streamable HTTP at ``http://HOST:PORT/mcp`` (127.0.0.1 by default) behind the
guards of :mod:`tiermem.mcp.http` (bearer token, Host/Origin checks, no unauthenticated
non-loopback bind).

Tool calls run concurrently, each on a worker thread of the SDK: ``Memory`` is thread-safe (reads
never wait for a write; writes of this process queue in arrival order, see
:mod:`tiermem.concurrency`). A library error (bad input, unknown id, provider failure) becomes an
MCP tool error result whose text names the error, never a crash. The SDK is imported only with
this module, which the CLI imports only when the server starts.
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Callable
from typing import Any

from tiermem.errors import ConfigError, InvalidInput, NotFound, TiermemError
from tiermem.mcp.http import HTTP_PATH, HttpOptions
from tiermem.mcp.http import run as run_http
from tiermem.mcp.tools import TOOL_NAMES, MemoryTools
from tiermem.memory import Memory

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
except ImportError as exc:  # pragma: no cover - mcp is a core dependency
    raise ConfigError("the MCP server needs the official SDK: pip install 'mcp>=2.3,<3'") from exc

log = logging.getLogger(__name__)

SERVER_NAME = "tiermem"
__all__ = ["HTTP_PATH", "HttpOptions", "build_server", "error_text", "serve"]
INSTRUCTIONS = (
    "Long-term memory for this user. Use recall before answering questions about the user or past "
    "work; use remember for durable facts (preferences, decisions, corrections); daily_note for "
    "what happened today; plan_* to keep a multi-step task across sessions. Resources: "
    "memory://core (MEMORY.md), memory://daily/today, memory://injection."
)


def error_text(exc: BaseException) -> str:
    """``"InvalidInput: confidence must be within [0, 1], got 2.0"`` - the first line only, with
    lone surrogates escaped (the reply is JSON, which cannot carry them)."""
    lines = str(exc).strip().splitlines()
    message = lines[0].encode("utf-8", "backslashreplace").decode("utf-8") if lines else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with library errors turned into ``ToolError`` (an error result)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TiermemError as exc:
            raise ToolError(error_text(exc)) from exc

    return call


def _resource(fn: Callable[..., str]) -> Callable[..., str]:
    """``fn`` where bad input or an unknown item is "not found" and other library errors an error."""

    @functools.wraps(fn)
    def read(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except (InvalidInput, NotFound) as exc:
            raise ResourceNotFoundError(error_text(exc)) from exc
        except TiermemError as exc:
            raise ResourceError(error_text(exc)) from exc

    return read


def build_server(mem: Memory) -> MCPServer[Any]:
    """An ``MCPServer`` exposing ``mem`` (one scope); the caller owns and closes ``mem``."""
    from tiermem import __version__

    tools = MemoryTools(mem)
    server: MCPServer[Any] = MCPServer(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
                                       log_level="WARNING")
    for name in TOOL_NAMES:
        server.add_tool(_guarded(getattr(tools, name)), name=name, structured_output=True)

    def today() -> str:
        return tools.daily_text()

    def day_file(day: str) -> str:
        return tools.daily_text(day)

    server.resource("memory://core", name="MEMORY.md", mime_type="text/markdown",
                    description="Core memory: the distilled MEMORY.md of this user.")(
        _resource(tools.core_text))
    server.resource("memory://daily/today", name="daily-today", mime_type="text/markdown",
                    description="Today's daily journal file (empty until something is written today).")(
        _resource(today))
    server.resource("memory://daily/{day}", name="daily", mime_type="text/markdown",
                    description="The daily journal file of one day (YYYY-MM-DD).")(_resource(day_file))
    server.resource("memory://injection", name="injection", mime_type="text/plain",
                    description="Summaries, Core memory and facts formatted for a system prompt.")(
        _resource(tools.injection_text))
    return server


def serve(mem: Memory, http: HttpOptions | None = None, sock: socket.socket | None = None) -> None:
    """Run the server until the client goes away (stdio) or the process is stopped (``http``;
    ``sock``: a socket :func:`tiermem.mcp.http.listen` made for it, else uvicorn binds one).

    Raises :class:`InvalidInput` before serving when ``http`` binds a non-loopback address
    without a token (and without ``insecure``)."""
    server = build_server(mem)
    if http is None:
        log.info("tiermem MCP server on stdio (root %s, scope %s/%s)", mem.root, mem.scope.user_id,
                 mem.scope.agent_name)
        server.run("stdio")
        return
    if not isinstance(http, HttpOptions):
        raise InvalidInput(f"http must be HttpOptions or None, got {type(http).__name__}")
    run_http(server, http, sock)
