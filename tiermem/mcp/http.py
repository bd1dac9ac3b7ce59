"""The streamable HTTP transport of the MCP server and its guards (docs/mcp.md, "Security").

Three checks stand between a request and the memory:

1. **Bind address.** A host that resolves to anything but loopback addresses exposes the memory
   to the network; :func:`check_exposure` refuses it without a token unless ``insecure`` is set
   (then the CLI warns on stderr).
2. **Bearer token** (optional on loopback, required elsewhere): :class:`BearerTokenGuard` answers
   ``401`` unless the request carries ``Authorization: Bearer <token>``, compared in constant time
   (:func:`hmac.compare_digest`).
3. **Host and Origin headers** against DNS rebinding: the SDK's
   :class:`~mcp.server.transport_security.TransportSecuritySettings`, always passed explicitly
   (the SDK turns the check off by itself for any host but ``127.0.0.1``/``localhost``/``::1``).
   Allowed ``Host`` values: the loopback names with any port, the bind host with its port, and
   each ``allow_hosts`` entry; allowed ``Origin`` values: ``http(s)://`` each of those names.
   Anything else gets ``421`` (Host) or ``403`` (Origin).

The SDK, Starlette and uvicorn are imported only when a server is built. The listening socket is
made first (:func:`listen`), so a command says where it serves only once the port is its own, and
a busy port is one clear error instead of uvicorn's log line after that message.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.errors import InvalidInput

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

HTTP_PATH = "/mcp"
TOKEN_ENV = "TIERMEM_MCP_TOKEN"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: Tool calls running at once (worker threads): enough to overlap waits on a remote embedder or
#: LLM; CPU-bound calls gain nothing from more, they take turns on Python's interpreter lock.
DEFAULT_WORKERS = 16

_TOKEN_RE = re.compile(r"[!-~]+")  # printable ASCII without spaces: what a header carries as is
_HOST_RE = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:([0-9]{1,5}|\*))?")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class HttpOptions:
    """How to serve over HTTP. ``token``: the bearer token clients must send (``None``: no
    authentication, refused off loopback unless ``insecure``); ``allow_hosts``: extra ``Host``
    header values (``name`` or ``name:port``) clients may use, e.g. the name of a reverse proxy."""

    port: int
    host: str = "127.0.0.1"
    token: str | None = None
    allow_hosts: tuple[str, ...] = ()
    insecure: bool = False
    workers: int = DEFAULT_WORKERS
    loopback: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise InvalidInput(f"http_port must be an integer in [1, 65535], got {self.port!r}")
        if not isinstance(self.host, str) or not self.host.strip():
            raise InvalidInput("host must be a host name or an IP address")
        if self.token is not None:
            check_token(self.token)
        for entry in self.allow_hosts:
            check_allowed_host(entry)
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not 1 <= self.workers <= 256:
            raise InvalidInput(f"workers must be an integer in [1, 256], got {self.workers!r}")
        object.__setattr__(self, "loopback", is_loopback(self.host))

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}{HTTP_PATH}"


def check_token(token: object) -> str:
    """A usable bearer token: at least :data:`MIN_TOKEN_CHARS` printable ASCII characters, no spaces."""
    if not isinstance(token, str) or not _TOKEN_RE.fullmatch(token):
        raise InvalidInput("the token must be printable ASCII without spaces "
                           "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    if len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput(f"the token must have at least {MIN_TOKEN_CHARS} characters, got {len(token)}")
    return token


def check_allowed_host(entry: object) -> str:
    """An ``--allow-host`` value: a name or address, optionally with ``:port`` or ``:*``."""
    if not isinstance(entry, str) or not _HOST_RE.fullmatch(entry):
        raise InvalidInput(f"--allow-host takes a host name or address with an optional :port, got {entry!r}")
    return entry


def is_loopback(host: str) -> bool:
    """True when every address ``host`` resolves to is a loopback address (``127.0.0.0/8``, ``::1``);
    ``0.0.0.0``, ``::`` and LAN addresses are not. A name that does not resolve is an error."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise InvalidInput(f"cannot resolve host {host!r}: {exc}") from exc
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)


_BIND_ERRORS = {
    errno.EADDRINUSE: "port {port} on {host} is already in use: stop what holds it, or choose another port with {flag}",
    errno.EACCES: "not allowed to listen on port {port} of {host}: choose a port above 1023 with {flag}",
    errno.EADDRNOTAVAIL: "cannot listen on {host}: it is not an address of this machine (--host)",
}
LISTEN_BACKLOG = 2048  # uvicorn's default


def listen(options: HttpOptions, flag: str = "--port") -> socket.socket:
    """A TCP socket listening on ``options``' host and port (``SO_REUSEADDR`` as uvicorn sets it,
    so a restart does not wait out the old connections), for the server to take over: connections
    made from now on wait in its backlog instead of being refused. A port that cannot be had is
    one :class:`InvalidInput` naming ``flag``, the option that chooses another."""
    host = options.host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, options.port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        template = _BIND_ERRORS.get(exc.errno or 0, "cannot listen on {host} port {port}: {reason}")
        raise InvalidInput(template.format(port=options.port, host=options.host, flag=flag,
                                           reason=exc.strerror or exc)) from exc
    return sock


def check_exposure(options: HttpOptions, token_env: str = TOKEN_ENV, insecure_flag: bool = True) -> None:
    """Refuse to serve a non-loopback address without a token, unless ``insecure`` is set
    (``token_env``, ``insecure_flag``: what the message offers; the web viewer has its own
    variable and no ``--insecure``)."""
    if not options.loopback and options.token is None and not options.insecure:
        way_out = ", or pass --insecure if something in front of it authenticates" if insecure_flag else ""
        raise InvalidInput(f"refusing to serve {options.host} without a token: anyone who can reach the port could "
                           f"read and change this memory. Set {token_env} (or --token){way_out}")


def security_settings(options: HttpOptions) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection for ``options``: always on, with explicit lists."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [f"{name}:*" for name in LOOPBACK_NAMES] + list(LOOPBACK_NAMES)
    names = list(LOOPBACK_NAMES)
    bind = f"[{options.host}]" if ":" in options.host else options.host
    if options.host not in ("0.0.0.0", "::") and bind not in names:
        hosts += [f"{bind}:{options.port}", bind]
        names.append(bind)
    for entry in options.allow_hosts:
        name, _, port = entry.rpartition(":") if not entry.endswith("]") and ":" in entry else (entry, "", "")
        hosts += [entry] if port else [entry, f"{entry}:*"]
        names.append(name if port else entry)
    origins = [f"{scheme}://{name}{suffix}" for name in dict.fromkeys(names) for scheme in ("http", "https")
               for suffix in ("", ":*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=list(dict.fromkeys(hosts)),
                                     allowed_origins=origins)


class BearerTokenGuard:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get ``401``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = check_token(token).encode("ascii")

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        body = b'{"error": "unauthorized", "message": "missing or wrong bearer token"}'
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="tiermem"')]})
        await send({"type": "http.response.body", "body": body})

    def _authorised(self, scope: MutableMapping[str, Any]) -> bool:
        given = [bytes(value) for key, value in scope.get("headers", ()) if bytes(key).lower() == b"authorization"]
        if len(given) != 1:
            return False
        scheme, _, credentials = given[0].strip().partition(b" ")
        # compare_digest takes as long for a wrong token as for a right one (of the same length)
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._token)


def build_app(server: MCPServer[Any], options: HttpOptions) -> ASGIApp:
    """The ASGI app: the SDK's streamable HTTP app at :data:`HTTP_PATH` with explicit transport
    security, behind the bearer-token guard when a token is set."""
    check_exposure(options)
    app: ASGIApp = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=options.host,
                                              transport_security=security_settings(options))
    return BearerTokenGuard(app, options.token) if options.token is not None else app


def run(server: MCPServer[Any], options: HttpOptions, sock: socket.socket | None = None) -> None:
    """Serve until the process is stopped; tool calls run on at most ``options.workers`` threads.
    ``sock``: the socket :func:`listen` made for ``options`` (None: uvicorn binds it itself)."""
    import anyio
    import anyio.to_thread
    import uvicorn

    app = build_app(server, options)

    async def main() -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = options.workers
        config = uvicorn.Config(app, host=options.host, port=options.port, log_level="warning")
        await uvicorn.Server(config).serve(sockets=[sock] if sock is not None else None)

    anyio.run(main)
