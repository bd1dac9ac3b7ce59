"""Counting round trips to the PostgreSQL server (tests and ``bench/``; nothing in the library uses it).

:func:`count_round_trips` traces, with libpq's own protocol trace (``PQtrace``), every connection the
store's pool lends while the block runs, and counts one round trip each time the client, having sent
messages that ask for the server's answer (a ``Sync``, a ``Flush`` or a simple ``Query``), reads it:
a statement outside pipeline mode is one, so are ``BEGIN`` and ``COMMIT``; a pipeline (``executemany``
runs one) is one per sync or flush it waits on (a flush sent while a sync's answers are still coming
asks for nothing more: no wait of its own). Every message on the wire is in the trace, so nothing
is missed: psycopg's preparation of a statement it has run five times on a connection (a ``Parse`` of
its own), and a pipeline that waits part way, count too.

Tracing opens a C stream per lent connection that libpq never closes (a few hundred bytes): fine for a
test or a benchmark run, not for a long-lived process.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from tiermem.storage.postgres.pool import SharedPool

_NAMES: dict[int, dict[str, str]] = {}  # id(conn) -> its prepared statements' texts (for showing them)


@dataclass
class RoundTrips:
    """What the server was asked while counting: ``count`` round trips; ``statements`` the text of
    each statement sent (parsed or queried), in order, for finding where they went."""

    count: int = 0
    statements: list[str] = field(default_factory=list)


class _Tracer:
    """Traces each connection the pool lends; counts its round trips when it comes back."""

    def __init__(self, trips: RoundTrips) -> None:
        self.trips = trips
        self._open: dict[int, tuple[Any, IO[bytes], int]] = {}  # id(conn) -> (conn, trace file, its fd)
        self._lock = threading.Lock()

    def lent(self, conn: Any) -> None:
        from psycopg.pq import Trace

        out = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _finish, when the connection comes back
        fd = os.dup(out.fileno())  # libpq's stream owns this one
        conn.pgconn.trace(fd)
        conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        with self._lock:
            self._open[id(conn)] = (conn, out, fd)
            _NAMES[id(conn)] = _prepared_texts(conn)

    def returned(self, conn: Any) -> None:
        with self._lock:
            found = self._open.pop(id(conn), None)
        if found is not None:
            self._finish(*found)

    def close(self) -> None:
        with self._lock:
            left, self._open = list(self._open.values()), {}
        for found in left:
            self._finish(*found)

    def _finish(self, conn: Any, out: IO[bytes], fd: int) -> None:
        conn.pgconn.untrace()  # flushes the stream
        os.close(fd)
        out.seek(0)
        with self._lock:
            names = _NAMES.setdefault(id(conn), {})
        count, statements = parse_trace(out.read().decode("utf-8", errors="replace"), names)
        out.close()
        with self._lock:
            self.trips.count += count
            self.trips.statements.extend(statements)


def _prepared_texts(conn: Any) -> dict[str, str]:
    """The text of each statement psycopg prepared on ``conn`` before it was traced (its ``Parse``
    is not in the trace), by name: a statement run by name shows as itself. Read from psycopg's own
    table (not public: empty if it moved); a name a dead connection of the same ``id`` used is forgotten."""
    names = getattr(getattr(conn, "_prepared", None), "_names", {})
    return {bytes(name).decode(): bytes(key[0]).decode("utf-8", errors="replace") for key, name in names.items()}


# Client messages after which the client does not wait: in pipeline mode psycopg sends statements
# and reads what has already arrived without blocking (a long result may start to arrive before
# the statement after it is sent); it waits only after a Sync, a Flush or a simple Query.
_NO_WAIT = frozenset({"Parse", "Bind", "Describe", "Execute", "Close"})


def parse_trace(text: str, names: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Round trips and statement texts of a libpq trace (``F``/``B`` lines, timestamps suppressed):
    a round trip is a run of client messages that ends in a wait (a ``Sync``, a ``Flush`` or a
    ``Query``) followed by the server's. ``names``: the text of each prepared statement seen so far
    on the connection (filled in), so a statement run by name shows."""
    names = {} if names is None else names
    count = 0
    sending = False
    syncs = 0  # Syncs (and simple Queries) sent whose ReadyForQuery has not come back yet
    statements: list[str] = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        direction, kind, rest = parts[0], parts[2], "\t".join(parts[3:]).strip()
        if direction == "B" and kind == "ReadyForQuery":
            syncs = max(0, syncs - 1)
        if direction == "F":
            syncs += kind in ("Sync", "Query")
            # a Flush while a Sync's answers are still coming (psycopg's, as it leaves pipeline mode)
            # asks for nothing the Sync does not: no wait of its own
            sending = sending or (kind not in _NO_WAIT and not (kind == "Flush" and syncs))
            if kind == "Query":
                statements.append(rest.strip('"'))
            elif kind == "Parse":  # "name" "text" nparams ...
                name, _, tail = rest[1:].partition('" "')
                names[name] = tail.rsplit('"', 1)[0]
                statements.append(names[name])
            elif kind == "Bind":  # "portal" "name" ...
                name = rest.split('"')[3] if rest.count('"') >= 4 else ""
                if name and statements[-1:] != [names.get(name)]:
                    statements.append(names.get(name, f"(prepared {name})"))
        elif direction == "B" and sending:
            count += 1
            sending = False
    return count, statements


@contextmanager
def count_round_trips(db: Any) -> Iterator[RoundTrips]:
    """Count the round trips of ``db``'s (a :class:`~tiermem.storage.postgres.db.PgDatabase`) pool
    inside the block, whichever store of the URL or thread makes them."""
    pool: SharedPool = db._pool
    trips = RoundTrips()
    tracer = _Tracer(trips)
    pool.watchers.append(tracer)
    try:
        yield trips
    finally:
        pool.watchers.remove(tracer)
        tracer.close()
