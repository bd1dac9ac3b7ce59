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
- Pipelined writes: inside a transaction, :meth:`PgDatabase.defer` queues a statement whose result
  the caller does not need yet and :meth:`PgDatabase.prefetch` a read it will need (psycopg's pipeline
  mode, entered at the first of them): they travel with the next statement that waits for the server,
  or with ``COMMIT``, so a transaction of reads then writes costs ``BEGIN``, one round trip of reads and
  one of writes and ``COMMIT``. A queued read is answered from its queued result only while no write
  to a table it names was queued after it. A queued statement's error surfaces at the next wait.
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
from tiermem.storage.postgres.locks import named_lock_key
from tiermem.storage.postgres.pipeline import Pipe, Reads, bare, pipelined, plain_read, prepare
from tiermem.storage.postgres.pool import SharedPool
from tiermem.storage.postgres.result import Result
from tiermem.storage.sql import STORE, WriteKey

WRITE_LOCK = 7_311_002  # (WRITE_LOCK, hashtext(current_schema())): the store's lock, shared by scoped writes
_STORE_LOCK = f"{WRITE_LOCK}, hashtext(current_schema())"
_READ = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)


@lru_cache(maxsize=1024)
def to_pg(sql: str) -> str:
    """SQLite-style ``?`` placeholders to psycopg's ``%s`` (a literal ``%`` becomes ``%%``)."""
    return sql.replace("%", "%%").replace("?", "%s")


class ConnectionLost(StorageError):
    """A ``queued`` transaction (:meth:`PgDatabase.transaction`) found its pooled connection dropped
    (the pool lets it go): nothing of it was written, unless the connection was lost after its
    ``COMMIT`` reached the server. A write that may be repeated tries again."""


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
        reads: Reads | None = getattr(self._pool.local, "reads", None)
        if reads is not None and not many and plain_read(sql) and pipelined(sql):
            found = reads.run(sql, args)  # with the reads sent ahead of it; None: its connection failed
            if found is not None:
                return found
        elif reads is not None:  # a write: the read batch's connection goes back first (see reading)
            reads.close()
        attempts = self._pool.size + 1  # every pooled connection may have been dropped by the server
        for attempt in range(1, attempts + 1):
            try:
                with self._pool.connection() as fresh:
                    return _run(fresh, sql, args, many)
            except psycopg.OperationalError as exc:
                if attempt == attempts or many or not _READ.match(bare(sql)):
                    raise StorageError(f"the statement failed on {self.label}: {_reason(exc, self.url)}") from exc
            except psycopg.errors.IntegrityError:
                raise
            except psycopg.Error as exc:
                raise StorageError(f"the statement failed on {self.label}: {_reason(exc, self.url)}") from exc
        raise AssertionError("unreachable")

    def _in_transaction(self, conn: Any, sql: str, args: Any, many: bool) -> Result:
        import psycopg

        pipe: Pipe | None = getattr(self._pool.local, "pipe", None)
        if pipe is not None and pipelined(sql):  # one wait for it and what was queued before it
            found = None if many else pipe.take(sql, args)
            return (found or pipe.queue(sql, args, many=many)).load()  # fetched now, as outside a pipeline
        if pipe is not None:
            self._unpipe()
        try:
            return _run(conn, sql, args, many)
        except psycopg.errors.IntegrityError:
            raise
        except psycopg.Error as exc:
            raise StorageError(f"the statement failed on {self.label}: {_reason(exc, self.url)}") from exc

    def defer(self, sql: str, args: Any = (), *, many: bool = False) -> Result:
        """Run ``sql`` (``many``: once per row of ``args``), a write whose result the caller does not
        read now: inside a transaction it is queued to go with the next statement that waits, or
        with ``COMMIT`` (its error surfaces there); outside one it runs at once. The result is
        fetched when read."""
        text = to_pg(sql) if args or many else sql
        if self._current() is None or not pipelined(text):
            return self.conn.executemany(sql, args) if many else self.conn.execute(sql, args)
        return self._pipe().queue(text, list(args) if many else args, many=many)

    def prefetch(self, sql: str, args: Sequence[Any] = ()) -> None:
        """Inside a transaction, send the read ``sql`` now so that it travels with other statements;
        the same read run later in the transaction takes its result (if no write to a table it
        names was queued in between). Outside a transaction: the same within :meth:`reading`, else
        nothing."""
        text = to_pg(sql) if args else sql
        if self._current() is not None:
            self._pipe().prefetch(text, args)
        elif getattr(self._pool.local, "reads", None) is not None and plain_read(text) and pipelined(text):
            self._pool.local.reads.prefetch(text, args)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A read batch: outside a transaction, the reads of this block share one pooled connection
        in pipeline mode, so reads sent ahead (:meth:`prefetch`) travel with the next read that waits:
        independent reads cost one round trip. Re-entrant (an inner block joins the outer one); in a
        transaction its own pipeline serves. A write or a transaction in the block first waits for
        the batch and gives its connection back (the reads sent ahead are dropped: they may be
        stale), so a thread never holds two connections at once."""
        local = self._pool.local
        if getattr(local, "reads", None) is not None:
            yield
            return
        local.reads = Reads(self._pool, self._failure)
        try:
            yield
        finally:
            reads, local.reads = local.reads, None
            reads.close()

    def _pipe(self) -> Pipe:
        local = self._pool.local
        if getattr(local, "pipe", None) is None:
            local.pipe = Pipe(local.conn, self._failure)
        pipe: Pipe = local.pipe
        return pipe

    def _unpipe(self) -> None:
        """Wait for the queued statements and leave pipeline mode (the transaction stays open)."""
        local = self._pool.local
        pipe, local.pipe = getattr(local, "pipe", None), None
        if pipe is not None:
            pipe.close()

    def _failure(self, exc: Exception) -> Exception:
        import psycopg

        if isinstance(exc, psycopg.errors.IntegrityError):
            return exc
        return StorageError(f"the statement failed on {self.label}: {_reason(exc, self.url)}")

    def rows(self, sql: str, args: Sequence[Any] = (), what: str = "query") -> list[Any]:
        """Run a read; failures become :class:`StorageError` naming ``what``."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except StorageError as exc:
            raise StorageError(f"{what} failed: {exc}") from exc

    @contextmanager
    def transaction(self, key: WriteKey = STORE, *, queued: bool = False) -> Iterator[PgConnection]:
        """A transaction on one pooled connection, after the write locks of ``key``; re-entrant per
        thread (and across the stores of this URL): a nested call joins the open transaction, taking
        first what of ``key`` it does not hold yet. A pooled connection the server dropped is replaced.

        ``queued``: ``BEGIN`` and the locks are queued in the transaction's pipeline instead of sent
        at once, to go with its first statement that waits (or ``COMMIT``): a transaction of deferred
        writes alone costs one round trip. The server runs them in order, so the locks are held
        before any statement after them runs, as when they are sent first. A dropped connection is
        then found only there: :class:`ConnectionLost`, nothing written (the caller may try again)."""
        import psycopg

        if self._current() is not None:
            self._widen(key)
            yield self.conn
            return
        if self._closed:
            raise StorageError("the database is closed")
        reads: Reads | None = getattr(self._pool.local, "reads", None)
        if reads is not None:  # a read batch's connection goes back first (see reading)
            reads.close()
        conn = self._pool.getconn() if queued else self._begin(key)
        try:
            local = self._pool.local
            local.conn, local.key, local.pipe = conn, key, None
            try:
                if queued:
                    for text, args in lock_steps(key, held=None, begin=True):
                        self._pipe().queue(text, args)
                yield self.conn
            except BaseException as exc:
                failed = _end(local)
                if failed is not None:
                    failed.abandon()
                _quietly(conn, "ROLLBACK")
                if queued and isinstance(exc, StorageError) and (conn.closed or conn.broken):
                    raise ConnectionLost(str(exc)) from exc
                raise
            pipe = _end(local)
            try:
                conn.execute("COMMIT", prepare=False)
                if pipe is not None:
                    pipe.close()  # COMMIT went with the queued writes
            except (psycopg.errors.IntegrityError, psycopg.Error, StorageError) as exc:
                if pipe is not None:
                    pipe.abandon()
                _quietly(conn, "ROLLBACK")
                if isinstance(exc, psycopg.errors.IntegrityError):
                    raise
                failure = ConnectionLost if queued and (conn.closed or conn.broken) else StorageError
                raise failure(f"the write failed on {self.label} (rolled back): {_reason(exc, self.url)}") from exc
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
        self._unpipe()  # the locks' statements are several in one text
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
    """The statements that take ``key``'s transaction-level advisory locks (those ``held`` lacks), as
    one text (:func:`lock_steps`, each name a literal)."""
    from psycopg import sql

    return "; ".join(text if name is None else text % sql.Literal(name[0]).as_string(conn)
                     for text, name in lock_steps(key, held))


def lock_steps(key: WriteKey, held: WriteKey | None, begin: bool = False) -> list[tuple[str, tuple[str, ...] | None]]:
    """The statements that take ``key``'s transaction-level advisory locks (those ``held`` lacks),
    each with its argument (a lock's name, ``%s`` in the text) or ``None`` (``begin``: ``BEGIN``
    first): the store's lock, exclusive for a store-wide write and shared otherwise, then one
    exclusive lock per name, in sorted order (so writers that take their locks at ``BEGIN`` never
    wait for each other in a circle), then each named lock of ``key.shares`` shared. A name's lock
    is keyed by the schema and the name; a shared named lock has the key of the session lock of
    that name (:mod:`tiermem.storage.postgres.locks`), so the two exclude each other."""
    steps: list[tuple[str, tuple[str, ...] | None]] = [("BEGIN", None)] if begin else []
    if key.store:
        if held is None or not held.store:
            steps.append((f"SELECT pg_advisory_xact_lock({_STORE_LOCK})", None))
    elif held is None:
        steps.append((f"SELECT pg_advisory_xact_lock_shared({_STORE_LOCK})", None))
    if not key.store:
        for name in sorted(key.names - (held.names if held is not None else frozenset())):
            steps.append((f"SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, {WRITE_LOCK}))",
                          (name,)))
    for name in sorted(key.shares - (held.shares if held is not None else frozenset())):
        steps.append((f"SELECT pg_advisory_xact_lock_shared({named_lock_key('%s')})", (name,)))
    return steps


def _end(local: Any) -> Any:
    """Forget the thread's transaction (its connection is about to commit or roll back); its pipe."""
    pipe = getattr(local, "pipe", None)
    local.conn = local.key = local.pipe = None
    return pipe


def _quietly(conn: Any, sql: str) -> None:
    import psycopg

    with suppress(psycopg.Error):  # a dead connection rolled back by itself; the pool drops it
        conn.execute(sql)


def _run(conn: Any, sql: str, args: Any, many: bool) -> Result:
    with conn.cursor() as cur:
        if many:
            cur.executemany(sql, args)
            return Result([], cur.rowcount)
        cur.execute(sql, args if args else None, prepare=prepare(sql))
        rows = cur.fetchall() if cur.description is not None else []
        return Result(rows, cur.rowcount)


def _reason(exc: BaseException, url: str) -> str:
    diag = getattr(exc, "diag", None)
    lines = str(exc).strip().splitlines()
    message = getattr(diag, "message_primary", None) or (lines[0] if lines else type(exc).__name__)
    return scrub(str(message), url)
