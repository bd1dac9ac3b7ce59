"""Serving the viewer: uvicorn on the checked address until the process is stopped.

Uvicorn (and Starlette) come with the MCP SDK, a core dependency; they are imported only here,
when a server starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiermem.ui.app import build_app

if TYPE_CHECKING:
    import socket

    import uvicorn

    from tiermem.mcp.http import HttpOptions
    from tiermem.memory import Memory


def url_of(options: HttpOptions) -> str:
    """``http://host:port/`` as a browser opens it."""
    shown = f"[{options.host}]" if ":" in options.host else options.host
    return f"http://{shown}:{options.port}/"


def make_server(mem: Memory, options: HttpOptions, csrf: str | None = None) -> uvicorn.Server:
    """A uvicorn server of the guarded app (``.run()`` serves; tests run it in a thread)."""
    import uvicorn

    config = uvicorn.Config(build_app(mem, options, csrf), host=options.host.strip("[]"), port=options.port,
                            log_level="warning", access_log=False)
    return uvicorn.Server(config)


def serve(mem: Memory, options: HttpOptions, sock: socket.socket | None = None) -> None:
    """Serve until the process is stopped (Ctrl-C); ``sock``: a socket
    :func:`tiermem.mcp.http.listen` made for ``options`` (None: uvicorn binds one)."""
    make_server(mem, options).run(sockets=[sock] if sock is not None else None)
