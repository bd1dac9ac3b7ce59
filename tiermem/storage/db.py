"""The SQLite database: one connection per thread, WAL, a busy timeout, one transaction helper.

Several threads and several processes may use the same file (R65). Writes go through
:meth:`Database.transaction`, which takes the write lock up front (``BEGIN IMMEDIATE``) so a
read-check-write sequence (dedup, cap) is atomic across processes.

A file the process may not write (or in a directory it may not write, where SQLite cannot create
its ``-wal``/``-shm`` files) is opened read-only: reads work, and a write raises
:class:`StorageError` saying the store is read-only.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tiermem.errors import StorageError
from tiermem.storage.migrations import MIGRATIONS, migrate

BUSY_TIMEOUT_MS = 30_000


class Database:
    """A SQLite file shared by threads (a connection each) and processes."""

    def __init__(self, path: Path, read_only: bool | None = None) -> None:
        """``read_only``: ``None`` decides by the file system (read-only when an existing file or
        its directory is not writable); read-only opens never migrate the schema."""
        self.path = path
        self.read_only = is_read_only(path) if read_only is None else read_only
        self._immutable = False  # read-only and SQLite cannot create the -shm file: no locking at all
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        if self.read_only:
            self._check_schema()
            return
        with self.transaction() as conn:
            migrate(conn)

    def _check_schema(self) -> None:
        try:
            version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
        except (sqlite3.Error, StorageError):
            self._drop_connections()
            self._immutable = True  # no -shm file and no right to create one
            version = int(self.rows("PRAGMA user_version", what="reading the schema version")[0][0])
        if version < len(MIGRATIONS):
            raise StorageError(f"{self.path} is read-only and needs a schema upgrade (version {version} < "
                               f"{len(MIGRATIONS)}); open it once with write access")

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                query = "mode=ro&immutable=1" if self._immutable else "mode=ro"
                conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?{query}", uri=True,
                                       timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
                )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if not self.read_only:
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
        if self.read_only:
            raise StorageError(f"{self.path} is read-only (no write permission): this needs to write")
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

    def _drop_connections(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._all:
                conn.close()
            self._all.clear()


def is_read_only(path: Path) -> bool:
    """True when ``path`` exists and this process may not write it or its directory."""
    return path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))
