"""SQLite's catalogue (a table's columns, the store's plain tables) and the maintenance export,
import and purge need."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tiermem.errors import StorageError

if TYPE_CHECKING:
    from tiermem.storage.sql import Database


def columns(db: Database, table: str) -> list[str]:
    """``table``'s column names in order (``PRAGMA table_info``)."""
    return [str(row[1]) for row in db.rows(f'PRAGMA table_info("{table}")', what="reading the schema")]


def tables(db: Database) -> list[str]:
    """The plain tables (no virtual FTS tables, their shadow tables or SQLite's own)."""
    rows = db.rows("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name", what="reading the schema")
    virtual = [str(r[0]) for r in rows if str(r[1] or "").upper().startswith("CREATE VIRTUAL")]
    return [str(r[0]) for r in rows if str(r[0]) not in virtual and not str(r[0]).startswith("sqlite_")
            and not any(str(r[0]).startswith(v + "_") for v in virtual)]


_NOT_TEXT = ("INT", "REAL", "BLOB", "FLOA", "DOUB")


def text_columns(db: Database, table: str) -> list[str]:
    """The columns of ``table`` that may hold text (by declared type: not numbers, not BLOBs)."""
    rows = db.rows(f'PRAGMA table_info("{table}")', what="reading the schema")
    return [str(r[1]) for r in rows if not any(word in str(r[2]).upper() for word in _NOT_TEXT)]


@contextmanager
def snapshot(db: Database) -> Iterator[Any]:
    """A read transaction (``BEGIN`` ... ``COMMIT``): one consistent state, no writer kept out,
    possible on a read-only store."""
    conn = db.conn
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def sync_ids(db: Database, table: str, column: str) -> None:
    """Nothing to do: SQLite's next id is always past the largest one stored."""


def secure_delete(db: Database, on: bool) -> bool:
    """``PRAGMA secure_delete`` on this thread's connection (deleted content is overwritten with
    zeros); returns the previous setting."""
    before = bool(db.conn.execute("PRAGMA secure_delete").fetchone()[0])
    db.conn.execute(f"PRAGMA secure_delete = {'ON' if on else 'OFF'}")
    return before


def compact(db: Database) -> tuple[bool, bool]:
    """After a purge: rebuild the FTS5 indexes (their shadow tables keep deleted terms until
    merged), ``VACUUM`` (no free page keeps old text) and checkpoint the WAL with ``TRUNCATE``.
    Returns ``(vacuumed, wal_truncated)``; a reader holding the WAL open makes the second False."""
    conn = db.conn
    try:
        rows = db.rows("SELECT name, sql FROM sqlite_master WHERE type = 'table'", what="reading the schema")
        fts = [str(r[0]) for r in rows if re.search(r"USING\s+fts5\s*\(", str(r[1] or ""), re.IGNORECASE)
               and not re.search(r"content\s*=\s*(''|\"\")", str(r[1]), re.IGNORECASE)]  # not fts5vocab
        with db.transaction():
            for table in sorted(fts):
                conn.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'rebuild\')')
        conn.execute("VACUUM")
        busy = int(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
    except sqlite3.Error as exc:
        raise StorageError(f"the content was removed, but compacting {db.label} failed: {exc};"
                           " run the purge again") from exc
    return True, busy == 0
