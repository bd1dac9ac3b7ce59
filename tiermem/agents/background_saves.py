"""The saves the resident server does after it has answered the hook (``POST /save``).

A stop hook fires after every turn and may find a long transcript (2,000 messages take seconds to
journal); the hook only hands the save over and exits. The server runs the saves one after
another on one thread (the store has one writer at a time anyway). A save asked for a session
whose save is still waiting is merged into it (the latest request wins: it names the transcript
as the client sees it now); one asked while that session's save runs is done once more after it,
so nothing appended meanwhile is left for long. At most :data:`MAX_SESSIONS` sessions wait; past
that :meth:`BackgroundSaves.submit` says no and the hook saves by itself.

:meth:`BackgroundSaves.close` lets the waiting saves finish: a server that stops (idle, SIGTERM)
writes what it accepted. A save that fails is logged by ``run`` (the server writes a hook-log
line); the next save of the session reads again from its cursor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

MAX_SESSIONS = 64

Request = TypeVar("Request")


class BackgroundSaves(Generic[Request]):
    """Runs ``run(request)`` on one thread, at most one waiting request per key."""

    def __init__(self, run: Callable[[Request], None], max_sessions: int = MAX_SESSIONS,
                 on_start: Callable[[], None] | None = None) -> None:
        self._run = run
        self._on_start = on_start  # run first on the saves thread (e.g. to lower its priority)
        self._max = max_sessions
        self._cond = threading.Condition()
        self._waiting: dict[Hashable, Request] = {}  # key -> the latest request, in arrival order
        self._running: Hashable | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="tiermem-agents-saves", daemon=True)
        self._thread.start()

    def submit(self, key: Hashable, request: Request) -> bool:
        """Queue ``request`` (merged with a waiting one of ``key``); False when closed or full."""
        with self._cond:
            if self._closed or (key not in self._waiting and len(self._waiting) >= self._max):
                return False
            self._waiting[key] = request
            self._cond.notify_all()
            return True

    def holds(self, key: Hashable) -> bool:
        """Whether a save of ``key`` waits or runs."""
        with self._cond:
            return key in self._waiting or self._running == key

    def busy(self) -> bool:
        with self._cond:
            return bool(self._waiting) or self._running is not None

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing waits or runs; False when ``timeout`` ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._waiting and self._running is None, timeout)

    def _work(self) -> None:
        if self._on_start is not None:
            self._on_start()
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._closed)
                if not self._waiting:
                    return  # closed and drained
                key = next(iter(self._waiting))
                request = self._waiting.pop(key)
                self._running = key
            try:
                self._run(request)
            except Exception:
                log.exception("a background save failed")
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def close(self, timeout: float | None = None) -> None:
        """Take no more saves; let the waiting ones finish (at most ``timeout`` seconds)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
