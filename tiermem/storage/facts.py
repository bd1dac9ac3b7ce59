"""SQL for facts, their audit history, tombstones and the per-scope summaries.

Methods run on the calling thread's connection; wrap read-check-write sequences in
``repo.atomic()`` so they hold the write lock (one writer per store on either backend, see
:class:`~tiermem.storage.sql.Database`). The SQL is the portable subset both backends run.
Every write passes its texts through the store's redaction (``db.redactor``, R68): contents,
summaries, audit reasons, and sources (thread ids) as identifiers.
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tiermem.clock import parse_utc, utc_iso
from tiermem.storage.sql import STORE, WriteKey
from tiermem.types import AuditEntry, Fact, Scope
from tiermem.validate import normalise

if TYPE_CHECKING:
    from tiermem.storage.sql import Database, Row

_FACT_COLUMNS = "id, user_id, agent_name, content, category, confidence, created_at, updated_at, source"
_BATCH = 500  # values of an IN list per query
TOMBSTONE_HASH_PREFIX = "sha256:"


def tombstone_key(norm: str) -> str:
    """The ``norm`` a purged tombstone keeps instead of the text: ``sha256:`` + the hex SHA-256 of
    the casefolded, whitespace-folded text (``validate.normalise``); its ``content`` is empty."""
    return TOMBSTONE_HASH_PREFIX + hashlib.sha256(norm.encode("utf-8", errors="surrogatepass")).hexdigest()


def _fact(row: Row) -> Fact:
    return Fact(
        id=row["id"],
        content=row["content"],
        category=row["category"],
        confidence=row["confidence"],
        created_at=parse_utc(row["created_at"]),
        updated_at=parse_utc(row["updated_at"]),
        source=row["source"],
        user_id=row["user_id"],
        agent_name=row["agent_name"],
    )


def _chunks(values: list[str], size: int = _BATCH) -> Iterator[list[str]]:
    """``values`` in slices small enough for one ``IN (...)`` list on either backend."""
    for start in range(0, len(values), size):
        yield values[start:start + size]


class _Stamps(dict[datetime, str]):
    """``utc_iso`` of each distinct time once (a batch's rows mostly share one timestamp)."""

    def __call__(self, at: datetime) -> str:
        text = self.get(at)
        if text is None:
            text = self[at] = utc_iso(at)
        return text


class FactRepository:
    """Facts, audit, tombstones and summaries of every scope in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @contextmanager
    def atomic(self, key: WriteKey = STORE) -> Iterator[None]:
        with self.db.transaction(key):
            yield

    # --- facts -----------------------------------------------------------------------------
    def insert(self, fact: Fact, norm: str) -> bool:
        """Insert; ``False`` if the id is taken (the caller draws another). The id conflict is
        answered by the statement itself, so it also leaves a Postgres transaction usable."""
        fact, norm = self._clean(fact, norm)
        rows = self.db.conn.execute(
            f"INSERT INTO facts ({_FACT_COLUMNS}, norm) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            (fact.id, fact.user_id, fact.agent_name, fact.content, fact.category, fact.confidence,
             utc_iso(fact.created_at), utc_iso(fact.updated_at), fact.source, norm),
        ).fetchall()
        return bool(rows)

    def insert_many(self, rows: builtins.list[tuple[Fact, str]], *, redacted: bool = False) -> None:
        """Insert ``(fact, norm)`` rows in one statement (``FactStore.admit``). The caller makes
        sure the ids are free (:meth:`taken_ids`, under its scope's lock); one that a writer of
        another scope takes meanwhile fails the transaction with ``IntegrityError`` (``FactStore.admit``
        draws again). ``redacted=True``: the
        contents and sources already went through this store's redactor (the fact store does,
        before its duplicate check), so they are not scanned twice."""
        if not redacted:
            rows = [self._clean(fact, norm) for fact, norm in rows]
        iso = _Stamps()
        self.db.defer(
            f"INSERT INTO facts ({_FACT_COLUMNS}, norm) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(f.id, f.user_id, f.agent_name, f.content, f.category, f.confidence, iso(f.created_at),
              iso(f.updated_at), f.source, norm) for f, norm in rows], many=True,
        )

    def taken_ids(self, ids: builtins.list[str]) -> set[str]:
        """Which of ``ids`` are used by a fact of any scope."""
        taken: set[str] = set()
        for part in _chunks(ids):
            marks = ", ".join("?" * len(part))
            taken.update(r[0] for r in self.db.conn.execute(f"SELECT id FROM facts WHERE id IN ({marks})", part))
        return taken

    def find_by_norms(self, scope: Scope, norms: builtins.list[str]) -> dict[str, Fact]:
        """``norm -> fact`` for the facts of ``scope`` holding one of ``norms`` (one query per 500)."""
        found: dict[str, Fact] = {}
        for part in _chunks(norms):
            marks = ", ".join("?" * len(part))
            rows = self.db.conn.execute(
                f"SELECT {_FACT_COLUMNS}, norm FROM facts WHERE user_id = ? AND agent_name = ? AND norm IN ({marks})",
                (scope.user_id, scope.agent_name, *part),
            )
            found.update((row["norm"], _fact(row)) for row in rows)
        return found

    def admission(self, scope: Scope, norms: builtins.list[str],
                  ids: builtins.list[str]) -> tuple[int, dict[str, Fact], bool] | None:
        """What a batch needs before it admits anything, in one query: the scope's fact count,
        :meth:`find_by_norms` of ``norms``, and whether any of ``ids`` is taken (any scope).
        ``None`` when there are too many norms or ids to ask at once (ask one by one then)."""
        if len(norms) > _BATCH or len(ids) > _BATCH or not norms or not ids:
            return None
        columns = ", ".join(f"f.{c.strip()}" for c in _FACT_COLUMNS.split(","))
        rows = self.db.conn.execute(
            f"SELECT c.n, c.taken, {columns}, f.norm FROM (SELECT"
            " (SELECT COUNT(*) FROM facts WHERE user_id = ? AND agent_name = ?) AS n,"
            f" (SELECT COUNT(*) FROM facts WHERE id IN ({', '.join('?' * len(ids))})) AS taken) AS c"
            f" LEFT JOIN facts f ON f.user_id = ? AND f.agent_name = ? AND f.norm IN ({', '.join('?' * len(norms))})",
            (scope.user_id, scope.agent_name, *ids, scope.user_id, scope.agent_name, *norms),
        ).fetchall()
        found = {row["norm"]: _fact(row) for row in rows if row["id"] is not None}
        return int(rows[0]["n"]), found, int(rows[0]["taken"]) > 0

    def id_exists(self, fact_id: str) -> bool:
        return self.db.conn.execute("SELECT 1 FROM facts WHERE id = ?", (fact_id,)).fetchone() is not None

    def get(self, scope: Scope, fact_id: str) -> Fact | None:
        row = self.db.conn.execute(
            f"SELECT {_FACT_COLUMNS} FROM facts WHERE id = ? AND user_id = ? AND agent_name = ?",
            (fact_id, scope.user_id, scope.agent_name),
        ).fetchone()
        return _fact(row) if row else None

    def get_any(self, fact_id: str) -> Fact | None:
        """A fact by id in whatever scope (import conflicts)."""
        row = self.db.conn.execute(f"SELECT {_FACT_COLUMNS} FROM facts WHERE id = ?", (fact_id,)).fetchone()
        return _fact(row) if row else None

    def find_by_norm(self, scope: Scope, norm: str) -> Fact | None:
        row = self.db.conn.execute(
            f"SELECT {_FACT_COLUMNS} FROM facts WHERE user_id = ? AND agent_name = ? AND norm = ?",
            (scope.user_id, scope.agent_name, norm),
        ).fetchone()
        return _fact(row) if row else None

    def list(self, scope: Scope, category: str | None = None) -> list[Fact]:
        sql = f"SELECT {_FACT_COLUMNS} FROM facts WHERE user_id = ? AND agent_name = ?"
        args: list[Any] = [scope.user_id, scope.agent_name]
        if category is not None:
            sql += " AND category = ?"
            args.append(category)
        sql += " ORDER BY confidence DESC, created_at ASC, id ASC"
        return [_fact(row) for row in self.db.conn.execute(sql, args)]

    def page(self, scope: Scope, category: str | None, limit: int, offset: int) -> builtins.list[Fact]:
        """``limit`` facts from ``offset`` in the order of the index ``facts_scope_rank`` (with a
        category: ``facts_scope_category``) walked backwards: highest confidence first, the newest
        first among equal ones. A page is one walk of the index, never a sort of the whole scope
        (``list``'s order is not the index's)."""
        sql = f"SELECT {_FACT_COLUMNS} FROM facts WHERE user_id = ? AND agent_name = ?"
        args: list[Any] = [scope.user_id, scope.agent_name]
        if category is not None:
            sql += " AND category = ?"
            args.append(category)
        sql += " ORDER BY confidence DESC, created_at DESC, rowid DESC LIMIT ? OFFSET ?"
        return [_fact(row) for row in self.db.conn.execute(sql, [*args, limit, offset])]

    def count(self, scope: Scope, category: str | None = None) -> int:
        sql, args = "SELECT COUNT(*) FROM facts WHERE user_id = ? AND agent_name = ?", [scope.user_id, scope.agent_name]
        if category is not None:
            sql += " AND category = ?"
            args.append(category)
        row = self.db.conn.execute(sql, args).fetchone()
        return int(row[0])

    def lowest(self, scope: Scope) -> Fact | None:
        """The eviction candidate: lowest confidence, oldest first on ties (``created_at``, then
        insertion order: a batch's facts share one timestamp; ``rowid`` is SQLite's own, and a
        ``bigserial`` column of the Postgres table). One seek in the index ``facts_scope_rank``
        (user, agent, confidence, created_at, rowid), however many facts the scope holds."""
        row = self.db.conn.execute(
            f"SELECT {_FACT_COLUMNS} FROM facts WHERE user_id = ? AND agent_name = ?"
            " ORDER BY confidence ASC, created_at ASC, rowid ASC LIMIT 1",
            (scope.user_id, scope.agent_name),
        ).fetchone()
        return _fact(row) if row else None

    def _clean(self, fact: Fact, norm: str) -> tuple[Fact, str]:
        """``fact`` with its content and source redacted (``norm`` follows a changed content)."""
        content = self.db.redactor.text(fact.content)
        source = self.db.redactor.optional_ident(fact.source)
        if content == fact.content and source == fact.source:
            return fact, norm
        return replace(fact, content=content, source=source), normalise(content) if content != fact.content else norm

    def update(self, fact: Fact, norm: str) -> None:
        fact, norm = self._clean(fact, norm)
        self.db.conn.execute(
            "UPDATE facts SET content = ?, norm = ?, category = ?, confidence = ?, updated_at = ?"
            " WHERE id = ? AND user_id = ? AND agent_name = ?",
            (fact.content, norm, fact.category, fact.confidence, utc_iso(fact.updated_at),
             fact.id, fact.user_id, fact.agent_name),
        )

    def delete(self, scope: Scope, fact_id: str) -> bool:
        cur = self.db.conn.execute(
            "DELETE FROM facts WHERE id = ? AND user_id = ? AND agent_name = ?",
            (fact_id, scope.user_id, scope.agent_name),
        )
        return int(cur.rowcount) > 0

    def scopes(self) -> builtins.list[Scope]:
        rows = self.db.conn.execute("SELECT DISTINCT user_id, agent_name FROM facts ORDER BY 1, 2")
        return [Scope(r[0], r[1]) for r in rows]

    # --- audit -----------------------------------------------------------------------------
    def audit(self, scope: Scope, entry: AuditEntry) -> None:
        clean = self.db.redactor
        entry = replace(entry, content=clean.optional(entry.content), reason=clean.text(entry.reason),
                        source=clean.optional_ident(entry.source))
        self.db.defer(
            "INSERT INTO audit (user_id, agent_name, at, action, fact_id, content, reason, source, run_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (scope.user_id, scope.agent_name, utc_iso(entry.at), entry.action, entry.fact_id,
             entry.content, entry.reason, entry.source, entry.run_id),
        )

    def audit_many(self, scope: Scope, entries: builtins.list[AuditEntry], *, redacted: bool = False) -> None:
        """:meth:`audit` for several entries, in order, in one statement. ``redacted=True``: their
        texts already went through this store's redactor (see :meth:`insert_many`)."""
        if not redacted:
            clean = self.db.redactor
            entries = [replace(e, content=clean.optional(e.content), reason=clean.text(e.reason),
                               source=clean.optional_ident(e.source)) for e in entries]
        iso = _Stamps()
        self.db.defer(
            "INSERT INTO audit (user_id, agent_name, at, action, fact_id, content, reason, source, run_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(scope.user_id, scope.agent_name, iso(e.at), e.action, e.fact_id, e.content, e.reason, e.source,
              e.run_id) for e in entries], many=True,
        )

    def history(self, scope: Scope, limit: int | None = None, fact_id: str | None = None) -> builtins.list[AuditEntry]:
        sql = "SELECT * FROM audit WHERE user_id = ? AND agent_name = ?"
        args: list[Any] = [scope.user_id, scope.agent_name]
        if fact_id is not None:
            sql += " AND fact_id = ?"
            args.append(fact_id)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        rows = self.db.conn.execute(sql, args).fetchall()
        return [
            AuditEntry(r["id"], parse_utc(r["at"]), r["action"], r["fact_id"], r["content"], r["reason"],
                       r["source"], r["run_id"])
            for r in reversed(rows)
        ]

    # --- tombstones ------------------------------------------------------------------------
    def add_tombstone(self, scope: Scope, norm: str, content: str, reason: str, at: str) -> None:
        cleaned = self.db.redactor.text(content)
        if cleaned != content:
            content, norm = cleaned, normalise(cleaned)
        self.db.conn.execute(
            "INSERT INTO tombstones (user_id, agent_name, norm, content, reason, at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (user_id, agent_name, norm) DO UPDATE SET reason = excluded.reason, at = excluded.at",
            (scope.user_id, scope.agent_name, norm, content, reason, at),
        )

    def is_tombstoned(self, scope: Scope, norm: str) -> bool:
        """A tombstone holds ``norm`` itself, or only its hash after a purge (:func:`tombstone_key`)."""
        row = self.db.conn.execute(
            "SELECT 1 FROM tombstones WHERE user_id = ? AND agent_name = ? AND norm IN (?, ?)",
            (scope.user_id, scope.agent_name, norm, tombstone_key(norm)),
        ).fetchone()
        return row is not None

    def tombstoned_norms(self, scope: Scope, norms: builtins.list[str]) -> set[str]:
        """Which of ``norms`` are tombstoned in ``scope`` (as text, or as the hash a purge keeps)."""
        keys = {key: norm for norm in norms for key in (norm, tombstone_key(norm))}
        hit: set[str] = set()
        for part in _chunks(list(keys)):
            marks = ", ".join("?" * len(part))
            rows = self.db.conn.execute(
                f"SELECT norm FROM tombstones WHERE user_id = ? AND agent_name = ? AND norm IN ({marks})",
                (scope.user_id, scope.agent_name, *part),
            )
            hit.update(keys[row[0]] for row in rows)
        return hit

    def remove_tombstones(self, scope: Scope, norms: builtins.list[str]) -> None:
        self.db.defer(
            "DELETE FROM tombstones WHERE user_id = ? AND agent_name = ? AND norm IN (?, ?)",
            [(scope.user_id, scope.agent_name, norm, tombstone_key(norm)) for norm in norms], many=True,
        )

    def remove_tombstone(self, scope: Scope, norm: str) -> None:
        self.db.conn.execute(
            "DELETE FROM tombstones WHERE user_id = ? AND agent_name = ? AND norm IN (?, ?)",
            (scope.user_id, scope.agent_name, norm, tombstone_key(norm)),
        )

    def tombstones(self, scope: Scope) -> builtins.list[dict[str, str]]:
        rows = self.db.conn.execute(
            "SELECT norm, content, reason, at FROM tombstones WHERE user_id = ? AND agent_name = ? ORDER BY at, norm",
            (scope.user_id, scope.agent_name),
        )
        return [dict(r) for r in rows]

    # --- summaries -------------------------------------------------------------------------
    def summaries(self, scope: Scope) -> dict[str, tuple[str, str]]:
        """``key -> (summary, updatedAt)``."""
        rows = self.db.conn.execute(
            "SELECT key, summary, updated_at FROM summaries WHERE user_id = ? AND agent_name = ?",
            (scope.user_id, scope.agent_name),
        )
        return {r["key"]: (r["summary"], r["updated_at"]) for r in rows}

    def set_summary(self, scope: Scope, key: str, summary: str, at: str) -> None:
        summary = self.db.redactor.text(summary)
        self.db.conn.execute(
            "INSERT INTO summaries (user_id, agent_name, key, summary, updated_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (user_id, agent_name, key) DO UPDATE SET summary = excluded.summary,"
            " updated_at = excluded.updated_at",
            (scope.user_id, scope.agent_name, key, summary, at),
        )
