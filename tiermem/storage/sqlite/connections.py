"""This process's connections to one SQLite file: one per thread, for as long as the thread lives.

A thread's first statement takes an idle connection or opens one; when the thread ends, the
connection comes back and is kept idle for the next thread (at most :data:`IDLE_CONNECTIONS`) or
closed. So the open connections follow the threads alive now, not every thread the process ever
ran: a server whose worker threads come and go between bursts (anyio's idle workers exit after
10 s) would otherwise keep two file descriptors (the file and its ``-wal``) per thread it ever had,
until it hit "too many open files". The idle one spares the next thread the open and keeps SQLite
from checkpointing and deleting the ``-wal`` each time the last thread of a burst ends.

The return rides on thread-local storage: CPython drops a thread's locals when the thread ends
(before ``join()`` returns), and the lease's finalizer gives the connection back.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Callable

from tiermem.errors import StorageError

IDLE_CONNECTIONS = 1  # connections kept open for the next thread after their thread ended


class _Lease:
    """A thread's hold on its connection: lives in the thread's locals, dies with the thread."""

    __slots__ = ("conn", "__weakref__")

    def __init__(self, pool: ConnectionPool, conn: sqlite3.Connection) -> None:
        self.conn = conn
        weakref.finalize(self, _give_back, weakref.ref(pool), conn)


class ConnectionPool:
    """One connection per live thread, handed back when the thread ends."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], idle: int = IDLE_CONNECTIONS) -> None:
        self._connect = connect
        self._idle_max = idle
        self._idle: list[sqlite3.Connection] = []
        self._open: set[sqlite3.Connection] = set()  # every connection not closed yet, leased or idle
        self._lock = threading.Lock()
        self._local = threading.local()
        self._closed = False

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (taken or opened on its first use)."""
        lease: _Lease | None = getattr(self._local, "lease", None)
        if lease is not None:
            return lease.conn
        conn = self._take()
        self._local.lease = _Lease(self, conn)
        return conn

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StorageError("the database is closed")
            if self._idle:
                return self._idle.pop()
        conn = self._connect()  # outside the lock: opening may wait on the file system
        with self._lock:
            if not self._closed:
                self._open.add(conn)
                return conn
        conn.close()
        raise StorageError("the database is closed")

    def give_back(self, conn: sqlite3.Connection) -> None:
        """A thread ended: keep its connection for the next thread, or close it."""
        with self._lock:
            if conn not in self._open:
                return  # closed with the pool already
            if not self._closed and len(self._idle) < self._idle_max and _reusable(conn):
                self._idle.append(conn)
                return
            self._open.discard(conn)
        conn.close()

    def open_count(self) -> int:
        """Connections open now (leased to live threads, or idle)."""
        with self._lock:
            return len(self._open)

    def drop(self, *, closed: bool = False) -> None:
        """Close every connection (threads open new ones on their next statement, unless ``closed``)."""
        with self._lock:
            self._closed = self._closed or closed
            conns = list(self._open)
            self._open.clear()
            self._idle.clear()
        for conn in conns:
            conn.close()
        self._local = threading.local()


def _give_back(pool: weakref.ref[ConnectionPool], conn: sqlite3.Connection) -> None:
    """The lease's finalizer: back to its pool, or closed when the pool is gone (a store dropped
    without ``close()``: its connections close with it, as they did before pooling)."""
    alive = pool()
    if alive is None:
        conn.close()
    else:
        alive.give_back(conn)


def _reusable(conn: sqlite3.Connection) -> bool:
    """True when ``conn`` is fit for another thread (a transaction its thread left open is rolled back)."""
    if not conn.in_transaction:
        return True
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        return False
    return True
