"""The resident server of one memory root: what the coding agents' hooks ask on loopback (P8).

A hook is a new Python process per event; with the local embedder a cold process cannot answer a
prompt in 0.35 s. So one small server per root keeps the store open and the model loaded, and the
hooks ask it over ``http://127.0.0.1`` (:mod:`tiermem.agents.server_client`, which also starts it:
``python -m tiermem.agents.server --root ROOT``, detached, output to ``<root>/agents/server.log``).

Life cycle:

1. ``<root>/agents/server.lock`` is taken (``filelock``, no waiting) before anything heavy is
   imported and held until the process ends: a second server exits at once (status 0).
2. The memories are opened and the embedder loaded (:class:`~tiermem.agents.residents.Residents`),
   then the socket is bound to ``127.0.0.1`` port 0, a new token (``secrets.token_hex(32)``) written
   to ``server.token`` and then ``{port, pid, started}`` to ``server.json`` (both atomically,
   0600): a hook that finds ``server.json`` finds a server ready to answer, and its token.
3. Requests run on a fixed pool of :data:`WORKERS` threads; the accept loop waits for a free one,
   so threads and open connections stay bounded (the kernel's backlog holds the rest). Each
   connection gets :data:`READ_TIMEOUT` seconds per read and one request (HTTP/1.0).
4. Every :data:`TICK_SECONDS` the background work runs on a thread of lower CPU priority (the
   update queue, pending embeddings; :meth:`~tiermem.agents.residents.Residents.tick`);
   after ``coding_server_idle_minutes`` without a request, or on SIGTERM/SIGINT, the server stops
   taking requests, closes the memories (the queue drains for ``shutdown_flush_seconds``) and
   removes ``server.json`` and ``server.token``.

Every request must carry ``Authorization: Bearer <token>`` (compared in constant time) and a
loopback ``Host`` header (``127.0.0.1``, ``localhost`` or ``[::1]``, any port): DNS rebinding cannot
reach it from a browser. Endpoints, JSON in and out:

- ``GET /health`` -> ``{"ok": true, "pid", "root", "scopes"}``;
- ``POST /prompt`` ``{client, session_id, cwd, prompt}`` -> ``{"text"}``: the memory relevant to
  the prompt not given before in the session (``""`` when there is none);
- ``POST /start`` ``{client, session_id, cwd, source}`` -> ``{"text"}``: the session-start memory
  text of both scopes (a cold hook process would spend most of its budget loading the tokenizer);
- ``POST /save`` ``{client, session_id, cwd, transcript_path}`` -> ``{"accepted"}``: the
  transcript's new messages are journaled in the project scope and queued for extraction after
  the answer (:mod:`tiermem.agents.background_saves`), so a stop hook does not wait for a long
  transcript; ``false`` when too many sessions wait (the hook saves by itself);
- ``POST /warm`` ``{cwd}`` -> ``{"queued"}``: load that folder's project memory in the background
  (a session starts there), answered at once.

Errors: ``400`` bad input, ``401`` token, ``404``/``405`` path/method, ``411``/``413`` body length,
``421`` Host, ``500`` anything else (``{"error": type, "message"}``).
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from socket import socket
from types import FrameType
from typing import TYPE_CHECKING, Any

from tiermem.agents.server_client import ServerFiles

if TYPE_CHECKING:
    from tiermem.agents.residents import Residents

log = logging.getLogger(__name__)

WORKERS = 8  # request threads; a hook sends one request per process
BACKLOG = 64  # connections the kernel holds while every worker is busy
MAX_BODY_BYTES = 1 << 20  # a prompt is at most validate.MAX_QUERY_CHARS; a save request is paths
READ_TIMEOUT = 5.0  # seconds per read of a request (a client that stalls loses its connection)
TICK_SECONDS = 1.0  # background work and the idle check
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
#: The server's numpy work (a vector search per prompt) is small; BLAS threads would spin-wait
#: after each one, taking a core from the hooks (0.13 s of CPU per prompt measured on 2 cores, for
#: no gain in time). So one BLAS thread, unless the environment says otherwise.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

Handler = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


def _error(status: int, error: str, message: str) -> Answer:
    return Answer(status, {"error": error, "message": message})


def loopback_host(value: str | None) -> bool:
    """True for a ``Host`` header naming a loopback address (with or without a port)."""
    if not value:
        return False
    host = value.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        name, port = name + "]", rest.removeprefix(":")
    else:
        name, _, port = host.partition(":")
    return name in LOOPBACK_HOSTS and (port == "" or (port.isdigit() and len(port) <= 5))


class Routes:
    """The checks every request passes and the handler of each endpoint (no HTTP plumbing)."""

    def __init__(self, token: str, handlers: Mapping[tuple[str, str], Handler]) -> None:
        self._token = token.encode("ascii")
        self.handlers = dict(handlers)

    def authorised(self, header: str | None) -> bool:
        scheme, _, credentials = (header or "").strip().partition(" ")
        given = credentials.strip().encode("utf-8", "replace")
        # compare_digest takes as long for a wrong token as for a right one (of the same length)
        return scheme.lower() == "bearer" and hmac.compare_digest(given, self._token)

    def check(self, method: str, path: str, headers: Mapping[str, str]) -> Answer | None:
        """The refusal for a request's line and headers, or ``None`` when it may go on."""
        if not loopback_host(headers.get("host")):
            return _error(421, "misdirected", "the Host header must name a loopback address")
        if not self.authorised(headers.get("authorization")):
            return _error(401, "unauthorized", "missing or wrong bearer token")
        if not any(p == path for _, p in self.handlers):
            return _error(404, "not_found", f"no endpoint {path}")
        if (method, path) not in self.handlers:
            return _error(405, "method_not_allowed", f"{method} is not allowed on {path}")
        return None

    def answer(self, method: str, path: str, body: bytes | None) -> Answer:
        """Run the endpoint on the JSON ``body`` (``None`` for GET)."""
        from tiermem.errors import InvalidInput

        try:
            payload = {} if body is None else json.loads(body)
        except ValueError:
            return _error(400, "bad_json", "the body is not JSON")
        if not isinstance(payload, dict):
            return _error(400, "bad_json", "the body must be a JSON object")
        try:
            return Answer(200, self.handlers[(method, path)](payload))
        except InvalidInput as exc:
            return _error(400, "invalid_input", str(exc))
        except Exception as exc:
            log.exception("%s %s failed", method, path)
            return _error(500, type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")


class _RequestHandler(BaseHTTPRequestHandler):
    server: PooledHTTPServer
    protocol_version = "HTTP/1.0"  # one request per connection: nothing to keep open between hooks
    timeout = READ_TIMEOUT

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self._respond(self._handle("GET"))

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        self._respond(self._handle("POST"))

    def _handle(self, method: str) -> Answer:
        self.server.touched()
        path = self.path.split("?", 1)[0]
        headers = {key.lower(): value for key, value in self.headers.items()}
        refused = self.server.routes.check(method, path, headers)
        if refused is not None:
            return refused
        if method == "GET":
            return self.server.routes.answer(method, path, None)
        length = headers.get("content-length", "")
        if not length.isdigit():
            return _error(411, "length_required", "a POST needs a Content-Length")
        if int(length) > MAX_BODY_BYTES:
            return _error(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes")
        body = self.rfile.read(int(length))
        if len(body) < int(length):
            return _error(400, "short_body", "the body ended before its Content-Length")
        return self.server.routes.answer(method, path, body)

    def _respond(self, answer: Answer) -> None:
        data = json.dumps(answer.body, ensure_ascii=False).encode("utf-8", "backslashreplace")
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if answer.status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="tiermem"')
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the hook gave up waiting (its budget)
            log.info("%s %s: the client left before the answer", self.command, self.path)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the standard library's name
        log.debug("%s " + format, self.address_string(), *args)


class PooledHTTPServer(HTTPServer):
    """An HTTP server whose requests run on a fixed thread pool; the accept loop waits for a free
    thread, so at most ``workers`` connections are open at once."""

    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(self, routes: Routes, workers: int = WORKERS) -> None:
        super().__init__(("127.0.0.1", 0), _RequestHandler)
        self.routes = routes
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="tiermem-agents-http")
        self._slots = threading.BoundedSemaphore(workers)
        self.last_request = time.monotonic()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def touched(self) -> None:
        self.last_request = time.monotonic()

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()
        try:
            self._pool.submit(self._work, request, client_address)
        except BaseException:
            self._slots.release()
            self.shutdown_request(request)
            raise

    def _work(self, request: socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("request from %s failed", client_address, exc_info=True)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=True)


def publish(files: ServerFiles, port: int, token: str) -> None:
    """``server.token`` then ``server.json`` (atomic, 0600): a reader of the second finds the first."""
    from tiermem.paths import atomic_write

    atomic_write(files.token, token.encode("ascii") + b"\n")
    info = {"port": port, "pid": os.getpid(), "started": time.time()}
    atomic_write(files.info, json.dumps(info).encode("utf-8") + b"\n")


def unpublish(files: ServerFiles) -> None:
    """Remove ``server.json`` (when it still names this process) and ``server.token``."""
    from tiermem.agents.server_client import read_info

    info = read_info(files.folder.parent)
    if info is not None and info.pid == os.getpid():
        files.info.unlink(missing_ok=True)
        files.token.unlink(missing_ok=True)


def routes_for(residents: Residents, token: str) -> Routes:
    def health(_: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "pid": os.getpid(), "root": str(residents.root), "scopes": residents.open_scopes()}

    return Routes(token, {("GET", "/health"): health, ("POST", "/prompt"): residents.prompt,
                          ("POST", "/start"): residents.start, ("POST", "/save"): residents.save,
                          ("POST", "/warm"): residents.warm})


def serve(residents: Residents, files: ServerFiles, idle_seconds: float, stop: threading.Event) -> None:
    """Answer requests until ``idle_seconds`` pass without one, or ``stop`` is set."""
    token = secrets.token_hex(32)
    httpd = PooledHTTPServer(routes_for(residents, token))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                              name="tiermem-agents-accept", daemon=True)
    thread.start()
    try:
        publish(files, httpd.port, token)
        log.info("serving %s on 127.0.0.1:%d (pid %d)", residents.root, httpd.port, os.getpid())
        residents.start_background(TICK_SECONDS)
        while not stop.wait(TICK_SECONDS):
            if time.monotonic() - httpd.last_request >= idle_seconds:
                log.info("no request for %g s: stopping", idle_seconds)
                break
    finally:
        unpublish(files)
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _stop_on_signals(stop: threading.Event) -> None:
    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handle)


def run(root: Path, warm_cwd: str | None = None) -> int:
    """The whole life of a server of ``root`` (see the module docstring); the exit status."""
    from filelock import FileLock, Timeout

    files = ServerFiles.of(root)
    files.make_folder()
    lock = FileLock(files.lock, timeout=0, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        print(f"tiermem: a resident server of {files.folder.parent} is running already; exiting", file=sys.stderr)
        return 0
    try:
        stop = threading.Event()
        _stop_on_signals(stop)
        from tiermem.agents.residents import Residents

        started = time.monotonic()
        with Residents.open(files.folder.parent, warm_cwd) as residents:
            log.info("memories and models ready in %.2f s", time.monotonic() - started)
            serve(residents, files, residents.settings.coding_server_idle_minutes * 60.0, stop)
        return 0
    finally:
        lock.release()


def single_blas_thread(env: MutableMapping[str, str] = os.environ) -> None:
    """One BLAS thread (:data:`BLAS_THREAD_VARIABLES`) where ``env`` does not choose: call before
    numpy is imported."""
    for name in BLAS_THREAD_VARIABLES:
        env.setdefault(name, "1")


def main(argv: list[str] | None = None) -> int:
    single_blas_thread()
    parser = argparse.ArgumentParser(prog="python -m tiermem.agents.server",
                                     description="The resident server of a memory root for coding-agent hooks.")
    parser.add_argument("--root", required=True, help="the memory root")
    parser.add_argument("--warm-cwd", help="a project folder whose memory to load before serving")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return run(Path(args.root).expanduser().resolve(), args.warm_cwd)
    except Exception as exc:
        log.exception("the resident server stopped on an error")
        print(f"tiermem: resident server: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
