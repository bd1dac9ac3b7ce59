"""SQL for key-value store items (the LangGraph store, :mod:`tiermem.integrations.langgraph`).

One row per (user, namespace, key): ``value`` is the item's JSON text as put, with the secrets in
its string leaves redacted (R68, ``redact_secrets``; :func:`tiermem.redact.redact_json`: a value
without secrets keeps its exact text, so it comes back as it went in); ``texts`` a JSON list of the
redacted texts a ``query=`` search reads (``[]``: not searchable); times are ISO-8601 UTC text
(:func:`tiermem.clock.utc_iso`), so they compare as text on both backends. ``namespace`` is the
labels joined with ``.`` (no label holds one), so a prefix is a text prefix ending at a label
boundary. Labels and keys are ids: one that holds a secret is stored as
:func:`tiermem.redact.redact_id` makes it (every method maps what it is given the same way, so it
still names one item), except a first label that is the user's id (user ids are never redacted).
An item whose ``expires_at`` has passed is invisible to every read, and
:meth:`StoreItemRepository.sweep` deletes it. One SQL text serves both backends.

Methods run on the calling thread's connection; writes open (or join) ``db.transaction()``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tiermem.clock import utc_iso
from tiermem.storage.sql import ROWS

if TYPE_CHECKING:
    from tiermem.redact import Redactor
    from tiermem.storage.sql import Database

_COLUMNS = "user_id, namespace, key, value, texts, created_at, updated_at, expires_at, ttl_minutes"
_LIVE = "(expires_at IS NULL OR expires_at > ?)"


@dataclass(frozen=True)
class StoredItem:
    user_id: str
    namespace: str  # labels joined with "."
    key: str
    value: str  # JSON text as put (secrets redacted)
    texts: str  # JSON list of redacted search texts
    created_at: str
    updated_at: str
    expires_at: str | None
    ttl_minutes: float | None


def _item(row: Any) -> StoredItem:
    ttl = row[8]
    return StoredItem(str(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]), str(row[6]),
                      None if row[7] is None else str(row[7]), None if ttl is None else float(ttl))


def expiry(now: datetime, ttl_minutes: float | None) -> str | None:
    return None if ttl_minutes is None else utc_iso(now + timedelta(minutes=ttl_minutes))


def stored_namespace(redactor: Redactor, user_id: str, namespace: str) -> str:
    """``namespace`` (labels joined with ``.``) as stored: each label redacted as an id (its marker
    holds no ``.``, so the labels stay apart and a prefix stays a prefix), a first label that is
    ``user_id`` kept."""
    if not namespace:
        return namespace
    labels = namespace.split(".")
    return ".".join(label if i == 0 and label == user_id else redactor.ident(label) for i, label in enumerate(labels))


def _prefix_condition(prefix: str) -> tuple[str, list[Any]]:
    """Rows whose namespace is ``prefix`` or lies under it (a label boundary: ``foo`` is not under
    ``fo``). ``substr``/``length`` count characters on both backends; no LIKE (its wildcards and
    SQLite's case folding would match other namespaces)."""
    if not prefix:
        return "1 = 1", []
    below = prefix + "."
    return "(namespace = ? OR substr(namespace, 1, ?) = ?)", [prefix, len(below), below]


class StoreItemRepository:
    """Store items of every user in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _place(self, user_id: str, namespace: str, key: str) -> tuple[str, str, str]:
        return user_id, stored_namespace(self.db.redactor, user_id, namespace), self.db.redactor.ident(key)

    def get(self, user_id: str, namespace: str, key: str, now: datetime) -> StoredItem | None:
        user_id, namespace, key = self._place(user_id, namespace, key)
        rows = self.db.rows(f"SELECT {_COLUMNS} FROM store_items WHERE user_id = ? AND namespace = ? AND key = ?"
                            f" AND {_LIVE}", [user_id, namespace, key, utc_iso(now)], "reading a store item")
        return _item(rows[0]) if rows else None

    def put(self, user_id: str, namespace: str, key: str, value: str, texts: str, now: datetime,
            ttl_minutes: float | None) -> None:
        """Insert or replace the item (its ``created_at`` stays; an expired one starts afresh);
        ``value`` and ``texts`` are JSON texts, redacted here (R68)."""
        user_id, namespace, key = self._place(user_id, namespace, key)
        value, texts = self.db.redactor.json_text(value), self.db.redactor.json_text(texts)
        at = utc_iso(now)
        with self.db.transaction(ROWS) as conn:
            conn.execute("DELETE FROM store_items WHERE user_id = ? AND namespace = ? AND key = ?"
                         " AND expires_at IS NOT NULL AND expires_at <= ?", (user_id, namespace, key, at))
            conn.execute(
                f"INSERT INTO store_items ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (user_id, namespace, key) DO UPDATE SET value = excluded.value, texts = excluded.texts,"
                " updated_at = excluded.updated_at, expires_at = excluded.expires_at,"
                " ttl_minutes = excluded.ttl_minutes",
                (user_id, namespace, key, value, texts, at, at, expiry(now, ttl_minutes), ttl_minutes))

    def delete(self, user_id: str, namespace: str, key: str) -> None:
        user_id, namespace, key = self._place(user_id, namespace, key)
        with self.db.transaction(ROWS) as conn:
            conn.execute("DELETE FROM store_items WHERE user_id = ? AND namespace = ? AND key = ?",
                         (user_id, namespace, key))

    def under(self, user_id: str, prefix: str, now: datetime, limit: int | None = None,
              offset: int = 0) -> builtins.list[StoredItem]:
        """Live items of ``user_id`` in ``prefix`` or below it, most recently updated first."""
        condition, args = _prefix_condition(stored_namespace(self.db.redactor, user_id, prefix))
        sql = (f"SELECT {_COLUMNS} FROM store_items WHERE user_id = ? AND {condition} AND {_LIVE}"
               " ORDER BY updated_at DESC, namespace, key")
        params: list[Any] = [user_id, *args, utc_iso(now)]
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return [_item(r) for r in self.db.rows(sql, params, "searching store items")]

    def namespaces(self, user_id: str | None, now: datetime) -> builtins.list[tuple[str, str]]:
        """``(user, namespace as stored)`` of every live item (of ``user_id``, or of everyone), distinct."""
        sql = f"SELECT DISTINCT user_id, namespace FROM store_items WHERE {_LIVE}"
        args: list[Any] = [utc_iso(now)]
        if user_id is not None:
            sql += " AND user_id = ?"
            args.append(user_id)
        return [(str(r[0]), str(r[1])) for r in self.db.rows(sql, args, "listing store namespaces")]

    def refresh(self, items: Sequence[StoredItem], now: datetime) -> int:
        """Move the expiry of ``items`` that have a TTL to ``now`` + their TTL (a read counts as use)."""
        rows = [(expiry(now, item.ttl_minutes), item.user_id, item.namespace, item.key)
                for item in items if item.ttl_minutes is not None]
        if not rows:
            return 0
        with self.db.transaction(ROWS) as conn:
            conn.executemany("UPDATE store_items SET expires_at = ? WHERE user_id = ? AND namespace = ? AND key = ?"
                             " AND ttl_minutes IS NOT NULL", rows)
        return len(rows)

    def sweep(self, now: datetime) -> int:
        """Delete the expired items; how many."""
        with self.db.transaction(ROWS) as conn:
            cursor = conn.execute("DELETE FROM store_items WHERE expires_at IS NOT NULL AND expires_at <= ?",
                                  (utc_iso(now),))
            return int(cursor.rowcount)
