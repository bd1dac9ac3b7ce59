"""The SQLite database: one connection per thread, WAL, a busy timeout, one transaction helper.

Several threads and several processes may use the same file (R65). Writes go through
:meth:`Database.transaction`, which takes the write lock up front (``BEGIN IMMEDIATE``) so a
read-check-write sequence (dedup, cap) is atomic across processes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tiermem.errors import StorageError
from tiermem.storage.migrations import migrate

BUSY_TIMEOUT_MS = 30_000


class Database:
    """A SQLite file shared by threads (a connection each) and processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        with self.transaction() as conn:
            migrate(conn)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (autocommit outside :meth:`transaction`)."""
        if self._closed:
            raise StorageError("the database is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def rows(self, sql: str, args: Sequence[Any] = (), what: str = "query") -> list[sqlite3.Row]:
        """Run a read on this thread's connection; sqlite errors become :class:`StorageError`."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"{what} failed: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error); re-entrant per thread."""
        conn = self.conn
        if conn.in_transaction:
            yield conn
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot start a write on {self.path}: {exc}") from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise StorageError(f"cannot commit to {self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._all:
                conn.close()
            self._all.clear()
