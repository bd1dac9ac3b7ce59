"""The PostgreSQL database: a connection pool shared by the process; writers of different scopes at once.

``conn``, ``rows`` and ``transaction`` behave as :class:`tiermem.storage.sqlite.db.Database`'s do, so the
repositories' SQL serves both backends (``?`` placeholders are rewritten to psycopg's ``%s``):

- Outside a transaction each statement runs on a pooled connection in autocommit mode and its
  rows are fetched at once. A read that meets a lost connection is retried once on another.
- :meth:`PgDatabase.transaction` takes transaction-level advisory locks first, in the statement
  that begins the transaction (one round trip), as narrow as its :class:`~tiermem.storage.sql.WriteKey`
  says: a scoped write holds the store's lock (``WRITE_LOCK``, the schema) *shared* and one
  exclusive lock per name (a scope, a user's files, a queue thread; keyed by the schema and the
  name, taken in sorted order), so writers of different scopes run at once and every
  read-check-write of one scope stays atomic across processes and hosts; a store-wide write
  (purge, import, the export's snapshot) holds the store's lock exclusively, so it and every
  other writer take turns. Readers never wait. docs/postgres.md, "What can run at once".
- The open transaction is the thread's for the URL (the process's pool), not one store object's:
  two ``Memory`` objects of one database nest their writes on one thread instead of waiting for
  each other's lock. A nested write whose key the transaction does not cover takes the locks it
  lacks there and then; taken out of order, two such transactions may wait for each other: the
  server fails one after ``deadlock_timeout``, a :class:`StorageError` saying so, rolled back.
- A unique or check violation raises :attr:`PgDatabase.IntegrityError` and, inside a transaction,
  fails the whole transaction (SQLite would fail only the statement; no tiermem code goes on after
  one). Other failures become :class:`~tiermem.errors.StorageError` naming the URL without its
  password (:func:`~tiermem.storage.postgres.conninfo.safe_url`); a URL libpq would misread is refused
  before anything connects (:func:`~tiermem.storage.postgres.conninfo.check_url`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any

from tiermem.errors import StorageError
from tiermem.redact import REDACT, Redactor
from tiermem.storage.postgres import BACKEND
from tiermem.storage.postgres.conninfo import check_url, safe_url, scrub
from tiermem.storage.postgres.pool import SharedPool
from tiermem.storage.sql import STORE, WriteKey

WRITE_LOCK = 7_311_002  # (WRITE_LOCK, hashtext(current_schema())): the store's lock, shared by scoped writes
_STORE_LOCK = f"{WRITE_LOCK}, hashtext(current_schema())"
_READ = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)


@lru_cache(maxsize=1024)
def to_pg(sql: str) -> str:
    """SQLite-style ``?`` placeholders to psycopg's ``%s`` (a literal ``%`` becomes ``%%``)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgRow(tuple):  # type: ignore[type-arg]
    """A row with ``row[0]``, ``row["name"]`` and ``keys()``, like :class:`sqlite3.Row`."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


class Result:
    """A statement's rows, fetched at once (the connection went back to the pool)."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self._at = 0
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[Any]:
        rest = self._rows[self._at:]
        self._at = len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    """This thread's view of the database: its open transaction, else autocommit statements."""

    def __init__(self, db: PgDatabase) -> None:
        self._db = db

    @property
    def in_transaction(self) -> bool:
        return self._db._current() is not None

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Result:
        # without arguments psycopg reads the text as it is: no placeholder (or %%) rewriting
        return self._db._execute(to_pg(sql) if args else sql, args, many=False)

    def executemany(self, sql: str, rows: Any) -> Result:
        return self._db._execute(to_pg(sql), list(rows), many=True)


class PgDatabase:
    """A tiermem store in a PostgreSQL schema (the connection's ``search_path``), shared by
    threads, processes and hosts."""

    backend = "postgres"
    parts = BACKEND
    read_only = False
    synchronous = "full"  # every commit is durable on the server (docs/postgres.md)

    def __init__(self, url: str, *, redactor: Redactor = REDACT, allow_symlinks: bool = False,
                 pool_size: int = 5, statement_timeout: float = 30.0) -> None:
        import psycopg

        check_url(url)
        self.url = url
        self.label = safe_url(url)
        self.redactor = redactor
        self.allow_symlinks = allow_symlinks
        self.IntegrityError: type[Exception] = psycopg.errors.IntegrityError
        self._pool = SharedPool.acquire(url, self.label, pool_size, statement_timeout)
        self._closed = False
        self.conn = PgConnection(self)

    # --- statements ------------------------------------------------------------------------
    def _current(self) -> Any:
        return getattr(self._pool.local, "conn", None)

    def _execute(self, sql: str, args: Any, *, many: bool) -> Result:
        import psycopg

        if self._closed:
            raise StorageError("the database is closed")
        conn = self._current()
        if conn is not None:
            return self._in_transaction(conn, sql, args, many)
        attempts = self._pool.size + 1  # every pooled connection may have been dropped by the server
        for attempt in range(1, attempts + 1):
            try:
                with self._pool.connection() as fresh:
                    return _run(fresh, sql, args, many)
            except psycopg.OperationalError as exc:
                if attempt == attempts or many or not _READ.match(sql):
                    raise StorageError(f"the statement failed on {self.label}: {_reason(exc, self.url)}") from exc
            except psycopg.errors.IntegrityError:
                raise
            except psycopg.Error as exc:
                raise StorageError(f"the statement failed on {self.label}: {_reason(exc, self.url)}") from exc
        raise AssertionError("unreachable")

    def _in_transaction(self, conn: Any, sql: str, args: Any, many: bool) -> Result:
        import psycopg

        try:
            return _run(conn, sql, args, many)
        except psycopg.errors.IntegrityError:
            raise
        except psycopg.Error as exc:
            raise StorageError(f"the statement failed on {self.label}: {_reason(exc, self.url)}") from exc

    def rows(self, sql: str, args: Sequence[Any] = (), what: str = "query") -> list[Any]:
        """Run a read; failures become :class:`StorageError` naming ``what``."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except StorageError as exc:
            raise StorageError(f"{what} failed: {exc}") from exc

    @contextmanager
    def transaction(self, key: WriteKey = STORE) -> Iterator[PgConnection]:
        """A transaction on one pooled connection, after the write locks of ``key``; re-entrant per
        thread (and across the stores of this URL): a nested call joins the open transaction, taking
        first what of ``key`` it does not hold yet. A pooled connection the server dropped is replaced."""
        import psycopg

        if self._current() is not None:
            self._widen(key)
            yield self.conn
            return
        if self._closed:
            raise StorageError("the database is closed")
        conn = self._begin(key)
        try:
            local = self._pool.local
            local.conn, local.key = conn, key
            try:
                yield self.conn
            except BaseException:
                local.conn = local.key = None
                _quietly(conn, "ROLLBACK")
                raise
            local.conn = local.key = None
            try:
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                _quietly(conn, "ROLLBACK")
                raise StorageError(f"the write failed on {self.label} (rolled back): {_reason(exc, self.url)}") from exc
        finally:
            self._pool.putconn(conn)

    def _begin(self, key: WriteKey) -> Any:
        """A pooled connection after ``BEGIN`` and the locks of ``key``, sent as one statement (one
        round trip); another connection when the server dropped the first. On failure nothing is held."""
        import psycopg

        conn = self._pool.getconn()
        for attempt in range(self._pool.size + 1):
            try:
                conn.execute(f"BEGIN; {lock_sql(conn, key, held=None)}")
                return conn
            except psycopg.Error as exc:
                if not (conn.closed or conn.broken) or attempt == self._pool.size:
                    _quietly(conn, "ROLLBACK")
                    self._pool.putconn(conn)
                    raise StorageError(f"cannot start a write on {self.label}: {_reason(exc, self.url)}") from exc
            self._pool.putconn(conn)  # the pool drops a broken connection
            conn = self._pool.getconn()
        raise AssertionError("unreachable")

    def _widen(self, key: WriteKey) -> None:
        """Inside the thread's transaction: take what of ``key`` it does not hold yet. (Taken late,
        out of the usual order, so two such transactions can wait for each other: the server then
        fails one, a :class:`StorageError` that says so, and it rolls back.)"""
        import psycopg

        local = self._pool.local
        held: WriteKey = local.key
        if held.covers(key):
            return
        try:
            local.conn.execute(lock_sql(local.conn, key, held=held))
        except psycopg.errors.DeadlockDetected as exc:
            raise StorageError(f"two writes on {self.label} waited for each other's locks (a nested write took"
                               " a lock its transaction did not start with); this one was rolled back") from exc
        except psycopg.Error as exc:
            raise StorageError(f"cannot take the write lock on {self.label}: {_reason(exc, self.url)}") from exc
        local.key = held | key

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.release()


def lock_sql(conn: Any, key: WriteKey, held: WriteKey | None) -> str:
    """The statements that take ``key``'s transaction-level advisory locks (those ``held`` lacks):
    the store's lock, exclusive for a store-wide write and shared otherwise, then one exclusive
    lock per name, in sorted order (so writers that take their locks at ``BEGIN`` never wait for
    each other in a circle). A name's lock is keyed by the schema and the name."""
    from psycopg import sql

    if key.store:
        return f"SELECT pg_advisory_xact_lock({_STORE_LOCK})"
    steps = [f"SELECT pg_advisory_xact_lock_shared({_STORE_LOCK})"] if held is None else []
    for name in sorted(key.names - (held.names if held is not None else frozenset())):
        literal = sql.Literal(name).as_string(conn)
        steps.append(f"SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || {literal}, {WRITE_LOCK}))")
    return "; ".join(steps)


def _quietly(conn: Any, sql: str) -> None:
    import psycopg

    with suppress(psycopg.Error):  # a dead connection rolled back by itself; the pool drops it
        conn.execute(sql)


def _run(conn: Any, sql: str, args: Any, many: bool) -> Result:
    with conn.cursor() as cur:
        if many:
            cur.executemany(sql, args)
            return Result([], cur.rowcount)
        cur.execute(sql, args if args else None)
        rows = cur.fetchall() if cur.description is not None else []
        return Result(rows, cur.rowcount)


def _reason(exc: BaseException, url: str) -> str:
    diag = getattr(exc, "diag", None)
    lines = str(exc).strip().splitlines()
    message = getattr(diag, "message_primary", None) or (lines[0] if lines else type(exc).__name__)
    return scrub(str(message), url)
