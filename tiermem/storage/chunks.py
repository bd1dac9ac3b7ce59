"""SQL for the searchable pieces of the Markdown tiers (``MEMORY.md`` bullets, daily records).

A file is indexed as a list of chunks with line ranges, so hits can cite
``memory/2026-03-14.md#L12-L14``. ``indexed_files`` remembers each file's hash, so a file edited
by hand (even while no process ran) is noticed and re-indexed. Files belong to a user; their rows
carry ``agent_name = '*'`` (all agents of the user share them). A chunk's text is redacted before
it is stored (R68), so a secret typed into ``MEMORY.md`` or a Daily file by hand is not indexed.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tiermem.storage.sql import user_key

if TYPE_CHECKING:
    from tiermem.storage.sql import Connection, Database

SHARED_AGENT = "*"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_BATCH = 500  # chunks per INSERT (9 values each: well under SQLite's limit on a statement's variables)


@dataclass(frozen=True)
class Chunk:
    """One searchable piece of a Markdown file (lines are 1-based, inclusive)."""

    tier: str  # "core" | "daily"
    path: str  # relative to the memory root, with forward slashes
    line_start: int
    line_end: int
    text: str
    day: str | None = None  # YYYY-MM-DD for daily chunks

    @property
    def ref(self) -> str:
        return f"{self.path}#L{self.line_start}-L{self.line_end}"


ChunkListener = Callable[[str, list[int]], None]  # ("added" | "deleted", chunk row ids)
Ids = list[int] | Callable[[], list[int]]  # chunk row ids, or how to read them (a deferred insert's)
_FILE_HASH = "SELECT sha256 FROM indexed_files WHERE user_id = ? AND path = ?"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _insert(conn: Connection, user_id: str, path: str, chunks: Sequence[Chunk]) -> list[int]:
    """Insert ``chunks`` of one file; returns their row ids in order (:func:`_insert_later`)."""
    return _insert_later(conn.execute, user_id, path, chunks)()


def _insert_later(run: Callable[..., Any], user_id: str, path: str, chunks: Sequence[Chunk]) -> Callable[[], list[int]]:
    """Insert ``chunks`` of one file; returns how to read their row ids in order. One statement per
    :data:`_BATCH` chunks (one round trip on PostgreSQL, however many records a block holds): the
    rows of one ``INSERT`` take increasing ids in the order of its ``VALUES``, so the sorted ids
    are the chunks' in order. ``run``: ``conn.execute``, or ``db.defer`` (the ids are read when
    the returned function is called)."""
    results: list[Any] = []
    for start in range(0, len(chunks), _BATCH):
        part = chunks[start:start + _BATCH]
        values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(part))
        args = [value for c in part for value in (user_id, SHARED_AGENT, c.tier, path, c.line_start, c.line_end,
                                                  c.text, c.day, content_hash(c.text))]
        results.append(run("INSERT INTO chunks (user_id, agent_name, tier, path, line_start, line_end, text, day,"
                           f" content_hash) VALUES {values} RETURNING id", args))
    return lambda: [i for result in results for i in sorted(int(r[0]) for r in result.fetchall())]


class ChunkRepository:
    """Chunks and file hashes of every user in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.listeners: list[ChunkListener] = []
        self._held = threading.local()

    def file_hash(self, user_id: str, path: str) -> str | None:
        row = self.db.conn.execute(_FILE_HASH, (user_id, path)).fetchone()
        return str(row[0]) if row else None

    def prefetch_hash(self, user_id: str, path: str) -> None:
        """Inside a write transaction, send ahead the read of ``path``'s hash that :meth:`append_chunks`
        makes (:meth:`Database.prefetch`)."""
        self.db.prefetch(_FILE_HASH, (user_id, path))

    def indexed_paths(self, user_id: str) -> list[str]:
        rows = self.db.conn.execute("SELECT path FROM indexed_files WHERE user_id = ? ORDER BY path", (user_id,))
        return [str(r[0]) for r in rows]

    def replace_file(self, user_id: str, path: str, file_sha256: str, chunks: Sequence[Chunk]) -> list[int]:
        """Make ``chunks`` the whole index of ``path`` (atomic); returns the new row ids."""
        chunks = self._clean(chunks)
        with self.db.transaction(user_key(user_id)) as conn:
            old = [int(r[0]) for r in conn.execute(
                "SELECT id FROM chunks WHERE user_id = ? AND path = ?", (user_id, path))]
            conn.execute("DELETE FROM chunks WHERE user_id = ? AND path = ?", (user_id, path))
            new = _insert(conn, user_id, path, chunks)
            conn.execute(
                "INSERT INTO indexed_files (user_id, path, sha256) VALUES (?, ?, ?)"
                " ON CONFLICT (user_id, path) DO UPDATE SET sha256 = excluded.sha256",
                (user_id, path, file_sha256),
            )
        self._emit("deleted", old)
        self._emit("added", new)
        return new

    def append_chunks(self, user_id: str, path: str, expected_sha256: str, file_sha256: str,
                      chunks: Sequence[Chunk]) -> bool:
        """Add ``chunks`` of text appended to ``path`` if the index still holds the file as it was
        before the append (hash ``expected_sha256``; a file the index never held counts as empty,
        so the append that creates a file is indexed from its block alone); ``False`` (nothing
        changed) otherwise. The writes go with the transaction's next wait or its ``COMMIT``
        (:meth:`Database.defer`); listeners held back (:meth:`held_notifications`) get the new ids then."""
        chunks = self._clean(chunks)
        with self.db.transaction(user_key(user_id)) as conn:
            row = conn.execute(_FILE_HASH, (user_id, path)).fetchone()
            if (str(row[0]) if row is not None else EMPTY_SHA256) != expected_sha256:
                return False
            new = _insert_later(self.db.defer, user_id, path, chunks)
            self.db.defer("INSERT INTO indexed_files (user_id, path, sha256) VALUES (?, ?, ?)"
                          " ON CONFLICT (user_id, path) DO UPDATE SET sha256 = excluded.sha256",
                          (user_id, path, file_sha256))
        self._emit("added", new)
        return True

    def _clean(self, chunks: Sequence[Chunk]) -> list[Chunk]:
        """``chunks`` with their text redacted (line ranges unchanged: citations still hold)."""
        return [replace(c, text=self.db.redactor.text(c.text)) for c in chunks]

    def forget_file(self, user_id: str, path: str) -> None:
        """Drop a file that no longer exists from the index."""
        with self.db.transaction(user_key(user_id)) as conn:
            old = [int(r[0]) for r in conn.execute(
                "SELECT id FROM chunks WHERE user_id = ? AND path = ?", (user_id, path))]
            conn.execute("DELETE FROM chunks WHERE user_id = ? AND path = ?", (user_id, path))
            conn.execute("DELETE FROM indexed_files WHERE user_id = ? AND path = ?", (user_id, path))
        self._emit("deleted", old)

    @contextmanager
    def held_notifications(self) -> Iterator[list[tuple[str, Ids]]]:
        """Inside this block, listener calls of this thread's writes are collected in the yielded
        list instead of made; hand it to :meth:`notify` later (e.g. after releasing a file lock)."""
        held: list[tuple[str, Ids]] = []
        previous = getattr(self._held, "calls", None)
        self._held.calls = held
        try:
            yield held
        finally:
            self._held.calls = previous

    def notify(self, calls: Sequence[tuple[str, Ids]]) -> None:
        """Make listener calls collected by :meth:`held_notifications`."""
        for event, ids in calls:
            self._emit(event, ids)

    def _emit(self, event: str, ids: Ids) -> None:
        held: list[tuple[str, Ids]] | None = getattr(self._held, "calls", None)
        if held is not None:  # read when told: after the transaction, for ids of a deferred insert
            held.append((event, ids))
            return
        ids = ids() if callable(ids) else ids
        if not ids:
            return
        for listener in list(self.listeners):
            listener(event, ids)

    def chunks(self, user_id: str, path: str | None = None) -> list[Chunk]:
        sql = "SELECT tier, path, line_start, line_end, text, day FROM chunks WHERE user_id = ?"
        args: list[str] = [user_id]
        if path is not None:
            sql += " AND path = ?"
            args.append(path)
        rows = self.db.conn.execute(sql + " ORDER BY path, line_start", args)
        return [Chunk(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]
