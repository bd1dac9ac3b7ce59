"""What a hook process needs of the resident server (:mod:`tiermem.agents.server`): find it, ask
it, start it when it is not there.

Standard library only, and nothing of tiermem but this module: a prompt hook has a fraction of a
second (P8), so this imports no numpy, no model and no store. The files live in
``<root>/agents/`` (0700):

- ``server.json``: ``{"port", "pid", "started"}``, written by the server once it listens;
- ``server.token``: the bearer token of that server (0600), written before ``server.json``;
- ``server.lock``: held by the server for its whole life (``flock``), so a second one exits;
- ``server.log``: the server's stdout and stderr (kept under :data:`MAX_LOG_BYTES` at each start).

:func:`ask_start`, :func:`ask_prompt` and :func:`ask_save` answer ``None`` when no server is
there, after starting one (detached; never waited for); a server that is there but answers with an error, garbage or
too late raises :class:`ServerError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple  # not dataclasses: 15 ms of imports for every hook

from tiermem.agents.hook_log import agents_dir

INFO_FILE = "server.json"
TOKEN_FILE = "server.token"
LOCK_FILE = "server.lock"
LOG_FILE = "server.log"
DIR_MODE = 0o700
FILE_MODE = 0o600
MAX_LOG_BYTES = 1 << 20  # server.log is moved to server.log.1 past this size when a server starts
MAX_REPLY_BYTES = 4 << 20
HEALTH_TIMEOUT = 0.5  # seconds for /health: the server answers it without touching the store
PROMPT_TIMEOUT = 0.8  # inside the prompt hook's 1 s budget
START_TIMEOUT = 1.2  # inside the start hook's 2 s budget
SAVE_TIMEOUT = 1.0  # the server answers a save at once (it saves after the answer)
SERVER_MODULE = "tiermem.agents.server"


class ServerError(Exception):
    """The resident server is there but answered with an error status, garbage or too late."""


class ServerFiles(NamedTuple):
    """Where the resident server of one memory root keeps its files."""

    folder: Path

    @classmethod
    def of(cls, root: str | Path) -> ServerFiles:
        return cls(agents_dir(Path(root).expanduser().resolve()))

    @property
    def info(self) -> Path:
        return self.folder / INFO_FILE

    @property
    def token(self) -> Path:
        return self.folder / TOKEN_FILE

    @property
    def lock(self) -> Path:
        return self.folder / LOCK_FILE

    @property
    def log(self) -> Path:
        return self.folder / LOG_FILE

    def make_folder(self) -> None:
        """``<root>/agents`` and its missing parents, each 0700 (as ``tiermem.paths.make_dirs``, whose
        imports - validation, types - a hook need not pay for this)."""
        missing = [p for p in (self.folder, *self.folder.parents) if not p.is_dir()]
        for folder in reversed(missing):
            with contextlib.suppress(FileExistsError):
                folder.mkdir(mode=DIR_MODE)


class ServerInfo(NamedTuple):
    """What ``server.json`` says: where the server listens, its process, when it started (epoch s)."""

    port: int
    pid: int
    started: float


def read_info(root: str | Path) -> ServerInfo | None:
    """The contents of ``server.json``; ``None`` when it is missing or unreadable."""
    try:
        data = json.loads(ServerFiles.of(root).info.read_bytes())
        port, pid, started = data["port"], data["pid"], data.get("started", 0.0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (_is_int(port) and 0 < port < 65536 and _is_int(pid) and pid > 0
            and isinstance(started, (int, float))):
        return None
    return ServerInfo(port, pid, float(started))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists (maybe another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def request(root: str | Path, method: str, path: str, body: dict[str, Any] | None = None,
            timeout: float = PROMPT_TIMEOUT) -> dict[str, Any] | None:
    """One JSON request to the server of ``root``: its JSON reply; ``None`` when no server is there
    (no ``server.json``, its process gone, nothing listening). :class:`ServerError` otherwise,
    also when the whole exchange takes longer than ``timeout`` seconds."""
    files = ServerFiles.of(root)
    info = read_info(root)
    if info is None or not pid_alive(info.pid):
        return None
    try:
        token = files.token.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    data = b"" if body is None else json.dumps(body).encode("utf-8")
    head = (f"{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{info.port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
    try:
        raw = _exchange(info.port, head.encode("latin-1") + data, timeout)
    except ConnectionRefusedError:
        return None  # the process named is not (or no longer) our server
    except OSError as exc:
        raise ServerError(f"the resident server did not answer {method} {path} in {timeout:g} s: {exc}") from exc
    status, _, reply = raw.partition(b"\r\n\r\n")
    parts = status.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ServerError(f"the resident server's answer to {method} {path} is not HTTP")
    return _reply(method, path, int(parts[1]), reply)


def _exchange(port: int, message: bytes, timeout: float) -> bytes:
    """Send one HTTP/1.0 request and read the answer until the server closes the connection (the
    standard library's ``http.client`` would cost the hook tens of milliseconds of imports)."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(message)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_REPLY_BYTES + 65536:
                raise ServerError(f"the resident server's answer is over {MAX_REPLY_BYTES} bytes")
            chunks.append(chunk)


def _reply(method: str, path: str, status: int, raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_REPLY_BYTES:
        raise ServerError(f"the resident server's reply to {method} {path} is over {MAX_REPLY_BYTES} bytes")
    try:
        reply = json.loads(raw)
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise ServerError(f"the resident server answered {method} {path} with status {status} and no JSON object")
    if status != 200:
        raise ServerError(f"the resident server answered {method} {path} with status {status}: "
                          f"{reply.get('message') or reply.get('error')}")
    return reply


def healthy(root: str | Path, timeout: float = HEALTH_TIMEOUT) -> bool:
    """True when the server of ``root`` answers ``/health``."""
    try:
        reply = request(root, "GET", "/health", timeout=timeout)
    except ServerError:
        return False
    return reply is not None and reply.get("ok") is True


def lock_held(root: str | Path) -> bool:
    """True when a server holds ``server.lock`` (running, or still starting); False where ``flock``
    does not exist (then a second server started meanwhile exits by itself)."""
    try:
        import fcntl
    except ImportError:
        return False
    files = ServerFiles.of(root)
    try:
        files.make_folder()
        fd = os.open(files.lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, FILE_MODE)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def start_server(root: str | Path, warm_cwd: str | None = None) -> None:
    """Start the server of ``root`` detached (its own session, stdio to ``server.log``); does not
    wait. ``warm_cwd``: a project folder whose memory the server loads before it serves."""
    import subprocess

    files = ServerFiles.of(root)
    files.make_folder()
    with contextlib.suppress(OSError):
        if files.log.stat().st_size > MAX_LOG_BYTES:
            os.replace(files.log, files.log.with_name(LOG_FILE + ".1"))
    log = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC,
                  FILE_MODE)
    try:
        warm = ["--warm-cwd", warm_cwd] if warm_cwd and os.path.isabs(warm_cwd) else []
        subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--root", str(files.folder.parent), *warm],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(files.folder.parent),
                         start_new_session=True, close_fds=True)
    finally:
        os.close(log)


def ensure_server(root: str | Path, warm_cwd: str | None = None) -> bool:
    """True when the server of ``root`` answers; otherwise start one (unless one is starting) and
    return False at once. ``warm_cwd``: the session's folder, whose project memory a new server
    loads before it serves, and a running one in the background (``POST /warm``), so the
    session's first prompt does not wait for it."""
    if healthy(root):
        if warm_cwd:
            with contextlib.suppress(ServerError):
                request(root, "POST", "/warm", {"cwd": warm_cwd}, HEALTH_TIMEOUT)
        return True
    if not lock_held(root):
        start_server(root, warm_cwd)
    return False


def ask_prompt(root: str | Path, client: str, session_id: str, cwd: str, prompt: str,
               timeout: float = PROMPT_TIMEOUT) -> str | None:
    """The server's text for this prompt (``""``: nothing relevant, or all of it given already in
    this session); ``None`` when no server is there (one is started)."""
    reply = request(root, "POST", "/prompt",
                    {"client": client, "session_id": session_id, "cwd": cwd, "prompt": prompt}, timeout)
    if reply is None:
        ensure_server(root, cwd)
        return None
    text = reply.get("text")
    if not isinstance(text, str):
        raise ServerError("the resident server's /prompt reply has no text")
    return text


def ask_start(root: str | Path, client: str, session_id: str, cwd: str, source: str | None,
              timeout: float = START_TIMEOUT) -> str | None:
    """The server's session-start text (``""``: memory is empty); ``None`` when no server is there
    (one is started, loading the project of ``cwd`` first)."""
    body = {"client": client, "session_id": session_id, "cwd": cwd}
    if source:
        body["source"] = source
    reply = request(root, "POST", "/start", body, timeout)
    if reply is None:
        ensure_server(root, cwd)
        return None
    text = reply.get("text")
    if not isinstance(text, str):
        raise ServerError("the resident server's /start reply has no text")
    return text


def ask_save(root: str | Path, client: str, session_id: str, cwd: str, transcript_path: str,
             timeout: float = SAVE_TIMEOUT) -> dict[str, Any] | None:
    """Hand the save of the transcript's new messages (journal, queue) to the server, which does
    it after answering: ``{"accepted": True}``; ``{"accepted": False}`` when it is too busy and
    ``None`` when no server is there (one is started): then the hook saves by itself."""
    reply = request(root, "POST", "/save", {"client": client, "session_id": session_id, "cwd": cwd,
                                            "transcript_path": transcript_path}, timeout)
    if reply is None:
        ensure_server(root, cwd)
    return reply
