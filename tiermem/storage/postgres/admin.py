"""PostgreSQL's catalogue (a table's columns, the store's plain tables, in the current schema) and
the maintenance export, import and purge need."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiermem.storage.sql import Database


def columns(db: Database, table: str) -> list[str]:
    """``table``'s column names in order (information_schema, the current schema)."""
    rows = db.rows("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                   " AND table_name = ? ORDER BY ordinal_position", [table], what="reading the schema")
    return [str(r[0]) for r in rows]


def tables(db: Database) -> list[str]:
    """The store's tables in the current schema, without tiermem_schema (the migration log)."""
    rows = db.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                   " AND table_type = 'BASE TABLE' AND table_name <> 'tiermem_schema' ORDER BY table_name",
                   what="reading the schema")
    return [str(r[0]) for r in rows]


#: information_schema data types that hold text (tsvector: words cut from text; ARRAY: e.g. bigrams).
_TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "tsvector", "ARRAY")


def text_columns(db: Database, table: str) -> list[str]:
    """The columns of ``table`` that may hold text (text, JSON, text search vectors, arrays)."""
    rows = db.rows("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema ="
                   " current_schema() AND table_name = ? ORDER BY ordinal_position", [table],
                   what="reading the schema")
    return [str(r[0]) for r in rows if str(r[1]) in _TEXT_TYPES]


@contextmanager
def snapshot(db: Database) -> Iterator[Any]:
    """One consistent state: a transaction behind the store's write lock (every writer of the
    store takes it, so nothing commits while the export reads)."""
    with db.transaction() as conn:
        yield conn


def sync_ids(db: Database, table: str, column: str) -> None:
    """Move the identity sequence of ``table.column`` past the largest id stored (ids an import
    wrote explicitly would otherwise be handed out again)."""
    db.conn.execute(f'SELECT setval(pg_get_serial_sequence(?, ?), COALESCE((SELECT MAX("{column}") FROM'
                    f' "{table}"), 0) + 1, false)', [table, column])


def secure_delete(db: Database, on: bool) -> bool:
    """Nothing to set: PostgreSQL has no such switch (dead rows go when the table is vacuumed)."""
    return False


#: Vocabularies that keep a term after the last item holding it is gone (document frequency 0),
#: as FTS5 keeps it until a merge: ``(table, frequency column)``.
VOCABULARIES = (("search_terms", "df"),)


def compact(db: Database) -> tuple[bool, bool]:
    """After a purge: drop the terms no item holds any more from the keyword vocabulary (as
    rebuilding FTS5 does on SQLite), then ``VACUUM`` the store's tables, so the deleted and
    rewritten rows' old versions are gone from them (the server's own write-ahead log and backups
    are the administrator's: tiermem has no step for them). Returns ``(vacuumed, True)``."""
    present = tables(db)
    with db.transaction() as conn:
        for table, frequency in VOCABULARIES:
            if table in present:
                conn.execute(f'DELETE FROM "{table}" WHERE "{frequency}" <= 0')
    for table in present:
        db.conn.execute(f'VACUUM "{table}"')
    return True, True
