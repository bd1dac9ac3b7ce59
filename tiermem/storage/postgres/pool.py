"""One connection pool per database URL per process, shared by every store that uses it.

Each pooled connection is in autocommit mode, has a statement timeout, loads ``numeric`` as float
and ``json``/``jsonb`` as text (rows read as SQLite's do) and knows pgvector's types.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Protocol

from tiermem.errors import StorageError
from tiermem.storage.postgres import schema
from tiermem.storage.postgres.conninfo import scrub

CONNECT_TIMEOUT = 10.0


def _configure(statement_timeout: float) -> Any:
    def configure(conn: Any) -> None:
        from psycopg.types.numeric import FloatLoader
        from psycopg.types.string import TextLoader

        conn.autocommit = True
        conn.execute(f"SET statement_timeout = {int(statement_timeout * 1000)}")
        for name in ("json", "jsonb"):
            conn.adapters.register_loader(name, TextLoader)
        conn.adapters.register_loader("numeric", FloatLoader)
        if conn.execute("SELECT to_regtype('halfvec') IS NOT NULL").fetchone()[0]:
            from pgvector.psycopg import register_vector

            register_vector(conn)
        from tiermem.storage.postgres.db import PgRow

        conn.row_factory = _row_factory(PgRow)
    return configure


class Watcher(Protocol):
    """Told of each connection the pool lends and takes back (:mod:`tiermem.storage.postgres.trips`)."""

    def lent(self, conn: Any) -> None: ...

    def returned(self, conn: Any) -> None: ...


def _row_factory(row_class: Any) -> Any:
    def factory(cursor: Any) -> Any:
        description = cursor.description
        if description is None:
            return tuple
        index = {column.name: number for number, column in enumerate(description)}
        return lambda values: row_class(values, index)
    return factory


class SharedPool:
    """A reference-counted :class:`psycopg_pool.ConnectionPool` per URL."""

    _all: ClassVar[dict[str, SharedPool]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str, label: str, size: int, statement_timeout: float) -> None:
        from psycopg_pool import ConnectionPool

        self.url = url
        self.label = label
        self.users = 0
        self.size = max(1, size)
        self.local = threading.local()  # .conn: this thread's open transaction on this database
        self.watchers: list[Watcher] = []  # tests and benchmarks: see each lent connection
        self.version = _migrate(url, label, statement_timeout)
        self.pool = ConnectionPool(url, min_size=1, max_size=max(1, size), open=False, timeout=CONNECT_TIMEOUT,
                                   configure=_configure(statement_timeout), name="tiermem")
        self.pool.open(wait=False)

    @classmethod
    def acquire(cls, url: str, label: str, size: int, statement_timeout: float) -> SharedPool:
        """The process's pool for ``url`` (made, and the schema migrated, on first use)."""
        with cls._lock:
            shared = cls._all.get(url)
            if shared is None:
                shared = cls(url, label, size, statement_timeout)
                cls._all[url] = shared
            shared.users += 1
            return shared

    def getconn(self) -> Any:
        """A pooled connection; give it back with :meth:`putconn`."""
        from psycopg_pool import PoolTimeout

        try:
            conn = self.pool.getconn()
        except PoolTimeout as exc:
            raise StorageError(f"no connection to {self.label} within {CONNECT_TIMEOUT:g} s") from exc
        for watcher in self.watchers:
            watcher.lent(conn)
        return conn

    def putconn(self, conn: Any) -> None:
        for watcher in self.watchers:
            watcher.returned(conn)
        self.pool.putconn(conn)

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection for the ``with`` block (given back in a clean state after it)."""
        conn = self.getconn()
        try:
            yield conn
        finally:
            self.putconn(conn)

    def release(self) -> None:
        """One store closed; the last one closes the pool."""
        with self._lock:
            self.users -= 1
            if self.users > 0:
                return
            self._all.pop(self.url, None)
        self.pool.close()

    @classmethod
    def close_all(cls, url: str | None = None) -> None:
        """Close the pools (of ``url`` only, when given): tests and forked children call it."""
        with cls._lock:
            chosen = [p for u, p in cls._all.items() if url is None or u == url]
            for shared in chosen:
                cls._all.pop(shared.url, None)
        for shared in chosen:
            shared.pool.close()


def watchers(url: str) -> list[Watcher]:
    """The watchers of this process's pool for ``url`` (connections outside the pool, such as the
    lock connections, tell them too)."""
    shared = SharedPool._all.get(url)
    return list(shared.watchers) if shared is not None else []


def _migrate(url: str, label: str, statement_timeout: float) -> int:
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT))
    except psycopg.Error as exc:
        raise StorageError(f"cannot connect to {label}: {scrub(str(exc).strip(), url)}") from exc
    try:
        conn.execute(f"SET statement_timeout = {int(statement_timeout * 1000)}")
        return schema.migrate(conn)
    except psycopg.Error as exc:
        raise StorageError(f"cannot prepare the tiermem schema in {label}: {scrub(str(exc).strip(), url)}") from exc
    finally:
        conn.close()


def _forget_in_child() -> None:
    """A forked child must not use its parent's pools (their threads did not come along)."""
    SharedPool._all = {}
    SharedPool._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
