"""One PostgreSQL transaction's pipeline (psycopg's pipeline mode): statements queued without waiting;
and a read batch outside transactions (:class:`Reads`), on the same pipeline.

:meth:`~tiermem.storage.postgres.db.PgDatabase.defer` and
:meth:`~tiermem.storage.postgres.db.PgDatabase.prefetch` queue here; a statement whose result is read
(and ``COMMIT``) sends everything queued before it and waits once for all of it, so reads queued
together cost one round trip, and writes queued before ``COMMIT`` go with it. A queued read is kept by
its text and arguments for the statement that asks for it later, and dropped as soon as a write to a
table it names is queued (a statement whose table is not plain to see drops them all).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextlib import ExitStack, suppress
from typing import Any

from tiermem.errors import StorageError
from tiermem.storage.postgres.result import Result
from tiermem.storage.sql import PLAN_EACH_RUN

_PLAIN_READ = re.compile(r"^\s*SELECT\b", re.IGNORECASE)
_WRITES = re.compile(r"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)  # its table

_WRITING = re.compile(r"\b(?:INSERT|UPDATE|DELETE|MERGE)\b", re.IGNORECASE)  # a WITH statement that writes

Failure = Callable[[Exception], Exception]  # a psycopg error -> what the caller raises


class Pipe:
    """The pipeline of one transaction's connection, from the first queued statement to ``COMMIT``
    (or until a statement that cannot be pipelined, several statements in one text, closes it)."""

    def __init__(self, conn: Any, failed: Failure) -> None:
        self.conn = conn
        self._failed = failed
        self._stack = ExitStack()
        self._pipeline = self._stack.enter_context(conn.pipeline())
        self._waiting = False  # statements were queued since the last wait
        self._queued: list[Result] = []  # results not read yet: read at close, while the connection is ours
        self._ahead: dict[tuple[str, tuple[Any, ...]], Result] = {}

    def queue(self, sql: str, args: Any, *, many: bool = False, read: bool = False) -> Result:
        """Send ``sql`` without waiting; its result is fetched when first read (``read``: it writes
        nothing, whatever its first word: the reads sent ahead stay)."""
        import psycopg

        if not read:
            self._forget(sql)
        cur = self.conn.cursor()
        try:
            if many:
                cur.executemany(sql, args)
            else:
                cur.execute(sql, args if args else None, prepare=prepare(sql))
        except psycopg.Error as exc:
            raise self._failed(exc) from exc
        self._waiting = True
        result = Result([], 0, lambda: self._fetch(cur, many))
        self._queued.append(result)
        return result

    def prefetch(self, sql: str, args: Sequence[Any]) -> None:
        """Queue the read ``sql`` for a later :meth:`take` of the same text and arguments."""
        key = _key(sql, args)
        if key is not None and key not in self._ahead:
            self._ahead[key] = self.queue(sql, args, read=True)

    def take(self, sql: str, args: Sequence[Any]) -> Result | None:
        """The queued result of this read, if it is still true (nothing it reads was written since)."""
        key = _key(sql, args)
        return self._ahead.pop(key, None) if key is not None else None

    def wait(self) -> None:
        """Send what is queued and wait for all of it (one round trip)."""
        import psycopg

        if not self._waiting:
            return
        self._waiting = False
        try:
            self._pipeline.sync()
        except psycopg.Error as exc:
            raise self._failed(exc) from exc

    def close(self) -> None:
        """Wait for what is queued and leave pipeline mode (errors raised)."""
        import psycopg

        self._ahead.clear()
        try:
            self._stack.close()
        except psycopg.Error as exc:
            raise self._failed(exc) from exc
        self._waiting = False
        for result in self._queued:  # their rows, for whoever reads them after COMMIT
            result.load()
        self._queued.clear()

    def abandon(self) -> None:
        """Leave pipeline mode after a failure (the transaction is being rolled back)."""
        import psycopg

        self._ahead.clear()
        self._queued.clear()
        self._waiting = False
        with suppress(psycopg.Error):
            self._stack.close()

    def _fetch(self, cur: Any, many: bool) -> tuple[list[Any], int]:
        import psycopg

        if many or cur.pgresult is None:  # not answered yet (an earlier wait may have brought it)
            self.wait()
        try:
            rows = cur.fetchall() if not many and cur.description is not None else []
        except psycopg.Error as exc:
            raise self._failed(exc) from exc
        return rows, int(cur.rowcount)

    def _forget(self, sql: str) -> None:
        text = bare(sql)
        if _PLAIN_READ.match(text) or not self._ahead:
            return
        found = _WRITES.match(text)
        if found is None:
            self._ahead.clear()
            return
        table = re.compile(rf"\b{re.escape(found.group(1))}\b", re.IGNORECASE)
        self._ahead = {key: result for key, result in self._ahead.items() if not table.search(key[0])}


class ConnectionDropped(Exception):
    """A read batch's connection failed (:class:`Reads`): the read runs again as any other."""


class Reads:
    """A read batch outside transactions (:meth:`~tiermem.storage.postgres.db.PgDatabase.reading`):
    one pooled connection, lent at the first read and given back at :meth:`close`. Reads sent ahead
    (:meth:`prefetch`) enter pipeline mode; the next read that waits goes with them and leaves it
    (its ``Sync`` is the one wait), so the batch never waits only to leave pipeline mode. In
    autocommit mode that ``Sync`` also ends the implicit transaction of the reads sent together: each
    sees the database as it runs, as one after another would, and a setting a read makes for its
    own transaction (``tiermem_vector_query``'s ``hnsw.*`` and ``enable_sort``) lasts until then -
    a search's reads sent after its vector query change no plan by it (none has a plan without its
    sort, or an HNSW scan)."""

    def __init__(self, pool: Any, failed: Failure) -> None:
        self._pool = pool
        self._failed = failed
        self._conn: Any = None
        self._pipe: Pipe | None = None
        self._ahead: dict[tuple[str, tuple[Any, ...]], Result] = {}

    def run(self, sql: str, args: Any) -> Result | None:
        """The rows of the read ``sql`` (a read sent ahead is taken), with what was sent before it
        (one wait); ``None`` when the connection failed (the batch let it go: run it elsewhere)."""
        key = _key(sql, args)
        found = self._ahead.pop(key, None) if key is not None else None
        if found is None and self._pipe is None:
            try:
                return self._plain(sql, args)
            except ConnectionDropped:
                self.close(failed=True)
                return None
            except BaseException:
                self.close(failed=True)
                raise
        try:
            if found is None:
                found = self._open().queue(sql, args, read=True)
            if found.pending:
                self._leave()
            return found.load()
        except (ConnectionDropped, StorageError):  # a read sent with it failed (maybe one sent ahead, never
            self.close(failed=True)  # asked for): this one runs alone, and its own error is the one raised
            return None
        except BaseException:
            self.close(failed=True)
            raise

    def prefetch(self, sql: str, args: Sequence[Any]) -> None:
        """Send the read ``sql`` now, for a later :meth:`run` of the same text and arguments."""
        key = _key(sql, args)
        if key is None or key in self._ahead:
            return
        try:
            self._ahead[key] = self._open().queue(sql, args, read=True)
        except (ConnectionDropped, StorageError):  # this or a read sent before it failed: the batch goes
            self.close(failed=True)

    def close(self, failed: bool = False) -> None:
        """Wait for what was sent (reads sent ahead and never asked for are dropped) and give the
        connection back (a broken one: the pool lets it go)."""
        pipe, conn, self._pipe, self._conn = self._pipe, self._conn, None, None
        self._ahead.clear()
        if conn is None:
            return
        try:
            if pipe is not None and failed:
                pipe.abandon()
            elif pipe is not None:
                with suppress(ConnectionDropped, StorageError):  # a read nobody asked for failed
                    pipe.close()
        finally:
            self._pool.putconn(conn)

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self._pool.getconn()
        return self._conn

    def _open(self) -> Pipe:
        if self._pipe is None:
            self._pipe = Pipe(self._connection(), self._failure)
        return self._pipe

    def _leave(self) -> None:
        """Leave pipeline mode: one wait for every read sent (their rows loaded)."""
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.close()

    def _plain(self, sql: str, args: Any) -> Result:
        import psycopg

        try:
            with self._connection().cursor() as cur:
                cur.execute(sql, args if args else None, prepare=prepare(sql))
                return Result(cur.fetchall() if cur.description is not None else [], cur.rowcount)
        except psycopg.Error as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc: Exception) -> Exception:
        import psycopg

        if isinstance(exc, psycopg.OperationalError):  # a dropped connection, a timeout: tried again elsewhere
            return ConnectionDropped(str(exc))
        return self._failed(exc)


def bare(sql: str) -> str:
    """``sql`` without the :data:`~tiermem.storage.sql.PLAN_EACH_RUN` comment in front: the statement
    as it begins (what the checks for a read or a write look at)."""
    return sql.removeprefix(PLAN_EACH_RUN)


def prepare(sql: str) -> bool | None:
    """psycopg's ``prepare`` for ``sql``: never for a read planned at each run nor for ``BEGIN`` and
    ``COMMIT`` (nothing to plan; the trace names them), else psycopg's choice."""
    return False if sql.startswith(PLAN_EACH_RUN) or sql in _UNPLANNED else None


_UNPLANNED = frozenset({"BEGIN", "COMMIT"})


def plain_read(sql: str) -> bool:
    """Whether ``sql`` only reads (``SELECT``, or ``WITH`` naming no write): a read batch may send it."""
    text = bare(sql)
    return bool(_PLAIN_READ.match(text)) or (text.lstrip()[:4].upper() == "WITH" and not _WRITING.search(text))


def pipelined(sql: str) -> bool:
    """Whether ``sql`` may go through a pipeline (one statement: pipeline mode sends each text as one)."""
    return ";" not in sql.strip().rstrip(";")


def _key(sql: str, args: Sequence[Any]) -> tuple[str, tuple[Any, ...]] | None:
    """The key a prefetched read is found by; a list argument (ids sent as one array) is keyed as a
    tuple, a vector (pgvector's types: unhashable) by its binary form."""
    key = (sql, tuple(tuple(arg) if isinstance(arg, list) else (type(arg).__name__, arg.to_binary())
                      if hasattr(arg, "to_binary") else arg for arg in args))
    try:
        hash(key)
    except TypeError:
        return None
    return key
