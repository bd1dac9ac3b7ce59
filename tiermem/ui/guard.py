"""The guards of the web viewer (docs/ui.md, "Security"): the MCP HTTP server's, plus a login.

The checks are the MCP server's own (:mod:`tiermem.mcp.http`), not copies:

1. **Bind address**: :func:`~tiermem.mcp.http.check_exposure` refuses a host that is not
   loopback without a token (the viewer has no ``--insecure``).
2. **Host and Origin** against DNS rebinding: the MCP SDK's ``TransportSecurityMiddleware`` with
   the same explicit lists (:func:`~tiermem.mcp.http.security_settings`): ``421`` / ``403``.
3. **Token** (``--token`` / ``TIERMEM_UI_TOKEN``): a browser cannot send a bearer header, so
   ``/login`` takes the token once in a form and sets an ``HttpOnly``, ``SameSite=Strict`` cookie
   holding an HMAC of it (never the token itself); a request without that cookie goes to
   :class:`~tiermem.mcp.http.BearerTokenGuard`, so scripts may still send
   ``Authorization: Bearer <token>`` and anything else gets ``401``.

The CSRF token of the forms is checked by the app (:mod:`tiermem.ui.app`), on every POST.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import parse_qs

from tiermem.mcp.http import ASGIApp, BearerTokenGuard, HttpOptions, Receive, Send, check_exposure, security_settings

TOKEN_ENV = "TIERMEM_UI_TOKEN"
DEFAULT_PORT = 8767
COOKIE = "tiermem_ui"
LOGIN_PATH = "/login"
MAX_LOGIN_BYTES = 4096


def ui_options(port: int, host: str = "127.0.0.1", token: str | None = None,
               allow_hosts: tuple[str, ...] = ()) -> HttpOptions:
    """Checked options for the viewer (``InvalidInput``: a bad port, host or token, or a host
    that is not loopback without a token)."""
    options = HttpOptions(port, host, token, allow_hosts)
    check_exposure(options, TOKEN_ENV, insecure_flag=False)
    return options


def session_value(token: str) -> str:
    """What the login cookie holds: an HMAC of the token (a stolen cookie is not the token)."""
    return hmac.new(token.encode("ascii"), b"tiermem-ui-session", hashlib.sha256).hexdigest()


def _cookie(scope: MutableMapping[str, Any]) -> str | None:
    for key, value in scope.get("headers", ()):
        if bytes(key).lower() != b"cookie":
            continue
        for part in bytes(value).decode("latin-1").split(";"):
            name, _, content = part.strip().partition("=")
            if name == COOKIE:
                return content
    return None


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store"),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


LOGIN_FORM = (b"<!doctype html><html lang=en><head><meta charset=utf-8><title>tiermem - log in</title></head>"
              b"<body><h1>tiermem</h1><form method=post action=/login><label>Token "
              b"<input type=password name=token autocomplete=current-password autofocus></label> "
              b"<button>Log in</button></form></body></html>")


class UiGuard:
    """ASGI middleware in front of the viewer: Host/Origin always, the token when one is set."""

    def __init__(self, app: ASGIApp, options: HttpOptions) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app = app
        self.options = options
        self._headers = TransportSecurityMiddleware(security_settings(options))
        self._session = session_value(options.token) if options.token is not None else None
        self._bearer = BearerTokenGuard(app, options.token) if options.token is not None else None

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        refused = await self._headers.validate_request(Request(scope), is_post=False)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if self._session is None or self._bearer is None:
            await self.app(scope, receive, send)
        elif scope.get("path") == LOGIN_PATH:
            await self._login(scope, receive, send)
        elif hmac.compare_digest((_cookie(scope) or "").encode("latin-1"), self._session.encode("ascii")):
            await self.app(scope, receive, send)
        elif scope.get("method") == "GET" and b"authorization" not in _header_names(scope):
            await _send(send, 303, b"", [(b"location", LOGIN_PATH.encode())])
        else:
            await self._bearer(scope, receive, send)

    async def _login(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        html = [(b"content-type", b"text/html; charset=utf-8")]
        if scope.get("method") != "POST":
            await _send(send, 200, LOGIN_FORM, html)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_LOGIN_BYTES:
                await _send(send, 413, b"request too large", [])
                return
            if not message.get("more_body", False):
                break
        given = parse_qs(body.decode("latin-1")).get("token", [""])[0]
        assert self.options.token is not None and self._session is not None
        if not hmac.compare_digest(given.encode("utf-8"), self.options.token.encode("ascii")):
            await _send(send, 401, b"wrong token", [(b"content-type", b"text/plain; charset=utf-8")])
            return
        cookie = f"{COOKIE}={self._session}; HttpOnly; SameSite=Strict; Path=/".encode()
        await _send(send, 303, b"", [(b"location", b"/"), (b"set-cookie", cookie)])


def _header_names(scope: MutableMapping[str, Any]) -> set[bytes]:
    return {bytes(key).lower() for key, _ in scope.get("headers", ())}
