"""Named cross-process locks of a PostgreSQL store: session advisory locks.

The same names as on SQLite (a lock file's path under the memory root, e.g.
``users/bob/.dream.lock``), so one user's lock is one lock for every process on every host that
uses the database, whatever its root. The key is ``hashtext(current_schema() || name)``: stores in
different schemas of one database do not block each other. The lock lives on a connection held
for the lock's whole life, apart from the store's query pool (a transaction there must not end
the lock, and work under the lock needs its own connections); when the process dies, the server
drops the session and the lock with it.

Waiting is the server's: ``pg_advisory_lock`` under ``lock_timeout`` queues the waiters in
arrival order and hands the lock over the moment it is released. (Polling
``pg_try_advisory_lock`` with a growing pause, measured with 8 processes taking one lock 480
times: the releasing process mostly took it again, so the p95 wait was 460-510 ms and the
longest 1.5-2 s, against 90-100 ms and 120-190 ms waiting in the queue, and 12% fewer locks a
second.)
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from tiermem.errors import StorageError
from tiermem.storage.postgres.conninfo import scrub
from tiermem.storage.postgres.pool import watchers
from tiermem.storage.sql import check_lock_name

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

MAX_IDLE = 4  # lock connections kept open between locks, per database URL
CONNECT_SECONDS = 10.0


def named_lock_key(name: str) -> str:
    """The SQL of a named lock's advisory key; ``name``: the name as SQL (a literal or a placeholder).
    A write transaction that holds the lock shared (:attr:`~tiermem.storage.sql.WriteKey.shares`)
    uses the same key."""
    return f"hashtext(current_schema() || {name})"


_TRY = f"SELECT pg_try_advisory_lock({named_lock_key('%s')})"
_WAIT = f"SELECT pg_advisory_lock({named_lock_key('%s')})"
_UNLOCK = f"SELECT pg_advisory_unlock({named_lock_key('%s')})"


class _PgStore(Protocol):
    url: str
    label: str


def lock(db: Database, name: str, timeout: float) -> AbstractContextManager[Any]:
    """Advisory lock ``name``; waits at most ``timeout`` seconds (0: one try, negative: no
    limit), then raises ``TimeoutError``."""
    check_lock_name(name)
    return _held(cast(_PgStore, db), name, timeout)


@contextmanager
def _held(db: _PgStore, name: str, timeout: float) -> Iterator[None]:
    with _LockConnections.connection(db) as conn:
        _acquire(db, conn, name, timeout)
        try:
            yield
        finally:
            _release(conn, name)


class _LockConnections:
    """Connections that hold locks, per URL per process, apart from the store's query pool: a held
    lock never takes a connection the work under it needs, and threads waiting for a lock cannot
    starve the one holding it. A few stay open between locks (a lock is cheap to take again);
    they are closed once no store of their URL is left in the process (garbage-collected; the
    collector only notes it, the next lock of any store closes them: a collection can run at any
    allocation, even one made while this class holds its guard)."""

    _idle: ClassVar[dict[str, list[Any]]] = {}
    _users: ClassVar[dict[str, int]] = {}
    _seen: ClassVar[weakref.WeakSet[Any]] = weakref.WeakSet()
    _gone: ClassVar[deque[str]] = deque()  # URLs of stores collected since the last sweep
    _guard: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    @contextmanager
    def connection(cls, db: _PgStore) -> Iterator[Any]:
        cls._sweep()
        conn = cls._take(db)
        watching = watchers(db.url)  # a round-trip counter (tests, bench/) counts these connections too
        for watcher in watching:
            watcher.lent(conn)
        try:
            yield conn
        finally:
            for watcher in watching:
                watcher.returned(conn)
            cls._give_back(db.url, conn)

    @classmethod
    def _take(cls, db: _PgStore) -> Any:
        import psycopg

        with cls._guard:
            if db not in cls._seen:
                cls._seen.add(db)
                cls._users[db.url] = cls._users.get(db.url, 0) + 1
                weakref.finalize(db, cls._gone.append, db.url)
            idle = cls._idle.get(db.url, [])
            conn = idle.pop() if idle else None
        if conn is not None and not conn.closed:
            return conn
        try:
            return psycopg.connect(db.url, autocommit=True, connect_timeout=int(CONNECT_SECONDS))
        except psycopg.Error as exc:
            raise StorageError(f"cannot connect to {db.label} to take a lock: {scrub(str(exc).strip(), db.url)}"
                               ) from exc

    @classmethod
    def _give_back(cls, url: str, conn: Any) -> None:
        import psycopg

        if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            with cls._guard:
                idle = cls._idle.setdefault(url, [])
                if len(idle) < MAX_IDLE and cls._users.get(url, 0) > 0:
                    idle.append(conn)
                    return
        conn.close()

    @classmethod
    def _sweep(cls) -> None:
        """Close the idle connections of URLs whose last store was collected."""
        closing: list[Any] = []
        while cls._gone:
            url = cls._gone.popleft()
            with cls._guard:
                cls._users[url] = cls._users.get(url, 1) - 1
                if cls._users[url] <= 0:
                    del cls._users[url]
                    closing += cls._idle.pop(url, [])
        for conn in closing:
            conn.close()

    @classmethod
    def forget(cls) -> None:
        """In a forked child: the parent's connections are not ours (closing them would end its sessions)."""
        cls._idle, cls._users, cls._seen, cls._gone = {}, {}, weakref.WeakSet(), deque()
        cls._guard = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_LockConnections.forget)


def _acquire(db: _PgStore, conn: Any, name: str, timeout: float) -> None:
    """One try (``timeout`` 0), or a wait in the server's lock queue bounded by ``lock_timeout``."""
    import psycopg

    held = f"the lock {name!r} on {db.label} is held by another process (waited {max(timeout, 0):g} s)"
    try:
        if timeout == 0:
            if not conn.execute(_TRY, [name]).fetchone()[0]:
                raise TimeoutError(held)
            return
        from psycopg import sql

        # one round trip: the timeout and the wait as one simple query (the name quoted as a literal)
        limit = 0 if timeout < 0 else max(1, round(timeout * 1000))
        conn.execute(f"SET lock_timeout = {limit}; {_WAIT % sql.Literal(name).as_string(conn)}")
    except psycopg.errors.LockNotAvailable as exc:
        raise TimeoutError(held) from exc
    except psycopg.Error as exc:
        raise StorageError(f"cannot take the lock {name!r} on {db.label}: {scrub(str(exc).strip(), db.url)}") from exc


def _release(conn: Any, name: str) -> None:
    try:
        conn.execute(_UNLOCK, [name])
    except Exception:  # a lost session has dropped the lock already; never hand back a holding one
        close = getattr(conn, "close", None)
        if close is not None:
            close()
