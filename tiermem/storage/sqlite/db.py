"""The SQLite database: a connection per live thread, WAL, a busy timeout, one transaction helper.

Several threads and several processes may use the same file (R65); a thread's connection is
closed (or kept for the next thread) when the thread ends (:mod:`.connections`). Writes go through
:meth:`Database.transaction`, which takes the write lock up front (``BEGIN IMMEDIATE``) so a
read-check-write sequence (dedup, cap) is atomic across processes.

A file the process may not write (or in a directory it may not write, where SQLite cannot create
its ``-wal``/``-shm`` files) is opened read-only: reads work, and a write raises
:class:`StorageError` saying the store is read-only.

The file and its ``-wal``/``-shm`` are ``0600``: set right after a read-write open creates or
migrates them (SQLite gives later ``-wal``/``-shm`` files the database's mode). A database file that is a symlink
leading out of its folder is refused (:class:`~tiermem.errors.UnsafePath`) unless
``allow_symlinks``. :attr:`Database.redactor` is the store's redaction (R68): every repository
passes what people and models wrote through it before it is written.
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tiermem.concurrency import FairLock
from tiermem.errors import InvalidInput, StorageError, UnsafePath
from tiermem.redact import REDACT, Redactor
from tiermem.storage.sql import STORE, WriteKey
from tiermem.storage.sqlite import BACKEND, held_files, integrity
from tiermem.storage.sqlite.connections import ConnectionPool
from tiermem.storage.sqlite.migrations import MIGRATIONS, migrate

BUSY_TIMEOUT_MS = 30_000
SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}  # setting sqlite_synchronous -> PRAGMA synchronous


class Database:
    """A SQLite file shared by threads (a connection each while they live) and processes."""

    backend = "sqlite"
    parts = BACKEND
    IntegrityError: type[Exception] = sqlite3.IntegrityError

    def __init__(self, path: Path, read_only: bool | None = None, *, redactor: Redactor = REDACT,
                 allow_symlinks: bool = False, synchronous: str = "normal") -> None:
        """``read_only``: ``None`` decides by the file system (read-only when an existing file or
        its directory is not writable); read-only opens never migrate the schema. ``redactor``:
        the store's redaction (``redact_secrets``); ``allow_symlinks``: follow a database file
        that is a link out of its folder."""
        self.path = path
        self.label = str(path)
        self.redactor = redactor
        if synchronous not in SYNCHRONOUS:
            raise InvalidInput(f"synchronous must be one of {', '.join(SYNCHRONOUS)}, got {synchronous!r}")
        self.synchronous = synchronous  # "full": each commit is fsynced (docs/durability.md)
        self.allow_symlinks = allow_symlinks  # the store's setting, for code that reads its files (export)
        check_link(path, allow_symlinks)
        self.read_only = is_read_only(path) if read_only is None else read_only
        self._immutable = False  # read-only and SQLite cannot create the -shm file: no locking at all
        self._pool = ConnectionPool(self._connect)
        self._writers = FairLock()  # this process's writes take turns in arrival order (no busy-wait sleeps)
        self._closed = False
        # damaged or emptied files are refused before SQLite touches them (checked by the first store of
        # this process on the file: a plain read of a file SQLite has open here drops its locks, see held_files)
        self._release = weakref.finalize(self, held_files.release, held_files.hold(path, integrity.check_file))
        try:
            if self.read_only:
                self._check_schema()
                return
            integrity.check_opened(self.conn, path, len(MIGRATIONS))
            with self.transaction() as conn:
                integrity.check_version(path, int(conn.execute("PRAGMA user_version").fetchone()[0]),
                                        len(MIGRATIONS))
                migrate(conn)
            make_private(path)
        except BaseException:
            self.close()
            raise

    def _check_schema(self) -> None:
        try:
            version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
        except (sqlite3.Error, StorageError):
            self._pool.drop()
            self._immutable = True  # no -shm file and no right to create one
            version = int(self.rows("PRAGMA user_version", what="reading the schema version")[0][0])
        version = integrity.check_opened(self.conn, self.path, len(MIGRATIONS))
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
                conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS[self.synchronous]}")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            if integrity.is_damage(exc):
                raise integrity.damaged(self.path, str(exc)) from exc
            raise StorageError(f"cannot open {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (autocommit outside :meth:`transaction`)."""
        if self._closed:
            raise StorageError("the database is closed")
        return self._pool.connection()

    def rows(self, sql: str, args: Sequence[Any] = (), what: str = "query") -> list[sqlite3.Row]:
        """Run a read on this thread's connection; sqlite errors become :class:`StorageError`."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            if integrity.is_damage(exc):
                raise integrity.damaged(self.path, str(exc)) from exc
            raise StorageError(f"{what} failed: {exc}") from exc

    def defer(self, sql: str, args: Any = (), *, many: bool = False) -> Done:
        """A write whose result the caller reads later, if at all: run at once here (see the protocol),
        its rows fetched at once (a statement left unfinished would keep ``COMMIT`` from running)."""
        cur = self.conn.executemany(sql, args) if many else self.conn.execute(sql, args)
        return Done(cur.fetchall(), cur.rowcount)

    def prefetch(self, sql: str, args: Sequence[Any] = ()) -> None:
        """Nothing to send ahead on SQLite: a read is a function call."""

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Nothing to batch on SQLite (:meth:`tiermem.storage.sql.Database.reading`)."""
        yield

    @contextmanager
    def transaction(self, key: WriteKey = STORE, *, queued: bool = False) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error); re-entrant per thread. Threads
        of this process queue for it first, in arrival order (other processes: SQLite's busy wait).
        Every write is store-wide here (SQLite has one writer per file): ``key`` and ``queued`` are not used."""
        if self.read_only or self.conn.in_transaction:
            with self._transaction() as conn:
                yield conn
            return
        if not self._writers.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
            raise StorageError(f"cannot start a write on {self.path}: another thread held it for "
                               f"{BUSY_TIMEOUT_MS // 1000} s")
        try:
            with self._transaction() as conn:
                yield conn
        finally:
            self._writers.release()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
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
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if integrity.is_damage(exc):  # the write met a damaged page: rolled back, nothing written
                raise integrity.damaged(self.path, str(exc)) from exc
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise StorageError(f"cannot commit to {self.path}: {exc}") from exc

    def close(self) -> None:
        self._closed = True
        self._pool.drop(closed=True)
        self._release()  # once; also when the store is dropped without close()


class Done:
    """A statement's rows, fetched (:meth:`Database.defer`)."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows


def is_read_only(path: Path) -> bool:
    """True when ``path`` exists and this process may not write it or its directory."""
    return path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def check_link(path: Path, allow_symlinks: bool) -> None:
    """Refuse a database file that is a symlink leading out of its folder (the memory root)."""
    if allow_symlinks or not path.is_symlink():
        return
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(Path(os.path.realpath(path.parent))):
        raise UnsafePath(f"{path} is a symbolic link that leads outside the memory root (to {real}); tiermem does"
                         " not follow it: remove the link, or set allow_symlinks = true", path)


def make_private(path: Path) -> None:
    """Set ``0600`` on the database file and its ``-wal``/``-shm`` where others may read them
    (a new store, or one made by an older tiermem); SQLite creates later ``-wal``/``-shm`` files
    with the database's mode. Files of another owner are left alone."""
    if os.name != "posix":
        return
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            info = os.stat(name)
            if info.st_mode & 0o077:
                os.chmod(name, 0o600)
        except OSError:
            continue  # absent, or another owner's file: leave it
