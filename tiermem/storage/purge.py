"""SQL of ``tiermem purge`` (see :mod:`tiermem.purge`): find content in every table, erase it, keep
only hashes, and leave no copy behind where the backend allows (SQLite: free pages, the FTS5
shadow tables, the WAL; PostgreSQL: the tables' dead rows, by VACUUM).

The SQL is the same on every backend: a user's rows are read and matched here, in Python, column
by column as :mod:`tiermem.storage.purge_columns` classifies them. A text purge deletes the facts
that contain the text, turns tombstones into hashes and replaces the text by ``[purged]``
everywhere else (inside the string values of JSON documents). A LangGraph store item whose key or
a namespace label holds the text is deleted whole (a rewritten key would change the item's
identity and could collide with another's).

Matching is :class:`~tiermem.storage.matcher.Matcher`'s, the same as in the files: case-insensitive,
any run of white space matching any other, in plain text and inside JSON strings (decoded), so a
text is found however a column stores it. :meth:`PurgeRepository.count_text` finds rows as the
writers then change them: a purge's preview counts what the purge erases.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.storage.facts import TOMBSTONE_HASH_PREFIX, tombstone_key
from tiermem.storage.matcher import Matcher
from tiermem.storage.purge_columns import CONTENT_COLUMNS, JSON_COLUMNS, ROW_KEYS, SCRUBBED_COLUMNS
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

# Deleted last when a user goes: deleting facts and chunks writes to them through triggers.
_LAST = ("search_docs", "change_epochs")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ErasedFact:
    """A fact a purge deleted."""

    id: str
    scope: Scope
    content: str


@dataclass(frozen=True)
class OutboxChange:
    """A queued item whose messages a purge rewrote (the caller carries its digests over)."""

    scope: Scope
    thread_id: str
    old: list[Any]
    new: list[Any]


class PurgeRepository:
    """The purge's reads and writes; methods that write run inside the caller's transaction.

    Rows are matched in Python (:class:`Matcher`), read per user: the same SQL on every backend."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def conn(self) -> Any:
        return self.db.conn

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self.db.rows(sql, args, "purge query")

    def _matching(self, table: str, columns: Sequence[str], user_id: str, matcher: Matcher,
                  extra: Sequence[str] = ()) -> list[Any]:
        """Rows of ``user_id`` in ``table`` where any of ``columns`` holds the text (JSON columns
        by their string values); each row has ``columns``, then ``extra``."""
        wanted = list(dict.fromkeys([*columns, *extra]))
        rows = self._rows(f"SELECT {', '.join(wanted)} FROM {table} WHERE user_id = ?", [user_id])
        return [r for r in rows if any(_found_in(table, c, r[c], matcher) for c in columns)]

    # --- finding ---------------------------------------------------------------------------
    def count_text(self, user_id: str, matcher: Matcher) -> dict[str, int]:
        """Rows of ``user_id`` (every agent) a text purge deletes or rewrites, per table, found as
        its writers find them: facts deleted (a fact whose source only holds it is rewritten, not
        counted), audit entries, tombstones not hashed yet, store items, and every other row holding
        the text (search_docs left out: it mirrors facts and chunks)."""
        facts = self.facts_to_delete(user_id, matcher)
        out = {"facts": len(facts),
               "audit": len(self._audit_to_erase(user_id, matcher, {str(r["id"]) for r in facts})),
               "tombstones": len(self._tombstones_to_hash(user_id, matcher)),
               "store_items": len(self._store_item_changes(user_id, matcher))}
        for table, columns in CONTENT_COLUMNS.items():
            if table not in out and table != "search_docs":
                out[table] = len(self._matching(table, columns, user_id, matcher))
        return {table: n for table, n in out.items() if n}

    def facts_to_delete(self, user_id: str, matcher: Matcher, also: str | None = None) -> list[Any]:
        """The facts of ``user_id`` holding the text (and the fact ``also``), oldest first."""
        return [r for r in self._rows("SELECT id, user_id, agent_name, content, norm FROM facts WHERE user_id = ?"
                                      " ORDER BY rowid", [user_id]) if matcher.found(r["content"]) or r["id"] == also]

    def _audit_to_erase(self, user_id: str, matcher: Matcher, fact_ids: set[str]) -> list[Any]:
        """Audit entries of ``user_id`` holding the text, and those with content of ``fact_ids``."""
        rows = self._rows("SELECT id, fact_id, content, reason, source FROM audit WHERE user_id = ? ORDER BY id",
                          [user_id])
        return [r for r in rows if (r["fact_id"] in fact_ids and r["content"] is not None)
                or any(matcher.found(r[c]) for c in ("content", "reason", "source"))]

    def _tombstones_to_hash(self, user_id: str, matcher: Matcher) -> list[Any]:
        return [r for r in self._matching("tombstones", ("content", "norm", "reason"), user_id, matcher,
                                          ("user_id", "agent_name", "at"))
                if not (r["content"] == "" and str(r["norm"]).startswith(TOMBSTONE_HASH_PREFIX))]  # hashed already

    def _store_item_changes(self, user_id: str, matcher: Matcher) -> list[tuple[Any, str | None, str | None]]:
        """LangGraph store items of ``user_id`` the purge changes: ``(row, None, None)`` for an item
        deleted whole (its key or a namespace label holds the text; a first label that is the user's
        id is no text), else ``(row, value, texts)`` with the text replaced inside."""
        out: list[tuple[Any, str | None, str | None]] = []
        for row in self._rows("SELECT namespace, key, value, texts FROM store_items WHERE user_id = ?"
                              " ORDER BY namespace, key", [user_id]):
            labels = str(row["namespace"]).split(".")
            if any(matcher.found(name) for name in (row["key"], *(labels[1:] if labels[0] == user_id else labels))):
                out.append((row, None, None))
                continue
            value, in_value = _rewrite("store_items", "value", row["value"], matcher)
            texts, in_texts = _rewrite("store_items", "texts", row["texts"], matcher)
            if in_value or in_texts:
                out.append((row, value, texts))
        return out

    def known_texts(self, user_id: str, matcher: Matcher | None) -> tuple[set[str], list[str]]:
        """What the purge's vectors may have been made of, before anything changes:
        ``(embed hashes of the items holding the text, texts holding it)`` — items, facts,
        tombstones, audit entries and ``MEMORY.md`` versions of ``user_id`` (all of the user's with
        ``matcher`` None)."""

        def hit(*values: object) -> bool:
            return matcher is None or any(matcher.found(v) for v in values)

        hashes = {str(r[0]) for r in self._rows(
            "SELECT embed_hash, text, context FROM search_docs WHERE user_id = ? AND embed_hash IS NOT NULL",
            [user_id]) if hit(r[1], r[2])}
        texts: list[str] = []
        for table, column in (("search_docs", "text"), ("facts", "content"), ("tombstones", "content"),
                              ("audit", "content"), ("core_versions", "content")):
            texts += [str(r[0]) for r in self._rows(f"SELECT {column} FROM {table} WHERE user_id = ?"
                                                    f" AND {column} IS NOT NULL", [user_id]) if hit(r[0])]
        for row in self._rows("SELECT texts FROM store_items WHERE user_id = ?", [user_id]):  # LangGraph store
            texts += [str(t) for t in _as_list(row[0]) if hit(t)]
        return hashes, texts

    def linked_items(self, hashes: Iterable[str]) -> list[tuple[str, str, str, str | None]]:
        """``(embed hash, user id, text, text of the chunk before it)`` of every item (every user)
        linked to one of ``hashes``; the chunk before is ``None`` for a fact or a file's first chunk."""
        wanted = sorted(set(hashes))
        out: list[tuple[str, str, str, str | None]] = []
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            rows = self._rows(
                "SELECT d.embed_hash, d.user_id, d.text, (SELECT p.text FROM chunks p WHERE p.user_id = c.user_id"
                " AND p.path = c.path AND p.line_start < c.line_start ORDER BY p.line_start DESC LIMIT 1)"
                " FROM search_docs d LEFT JOIN chunks c ON d.source = 'chunk' AND d.ref = CAST(c.id AS TEXT)"
                f" WHERE d.embed_hash IN ({', '.join('?' for _ in part)})", part)
            out += [(str(r[0]), str(r[1]), str(r[2]), None if r[3] is None else str(r[3])) for r in rows]
        return out

    def count_vectors(self, hashes: Iterable[str]) -> int:
        """The stored vectors (every model) of ``hashes``."""
        wanted = sorted(set(hashes))
        return sum(int(self._rows(f"SELECT COUNT(*) FROM embeddings WHERE content_hash IN"
                                  f" ({', '.join('?' for _ in part)})", part)[0][0])
                   for part in (wanted[i:i + 500] for i in range(0, len(wanted), 500)))

    def user_rows(self, user_id: str, namespace_prefixes: Sequence[str]) -> dict[str, int]:
        """Rows of ``user_id`` per table (and its journal digests under ``flush_hashes``)."""
        out: dict[str, int] = {}
        for table in self._user_tables():
            if table in ("search_docs", "search_removed"):
                continue
            count = int(self._rows(f"SELECT COUNT(*) FROM {table} WHERE user_id = ?", [user_id])[0][0])
            if count:
                out[table] = count
        digests = sum(int(self._rows("SELECT COUNT(*) FROM flush_hashes WHERE substr(namespace, 1, ?) = ?",
                                     [len(p), p])[0][0]) for p in namespace_prefixes)
        if digests:
            out["flush_hashes"] = digests
        return out

    def _user_tables(self) -> list[str]:
        parts = self.db.parts
        tables = [t for t in parts.tables(self.db) if "user_id" in parts.columns(self.db, t)]
        return [t for t in tables if t not in _LAST] + [t for t in _LAST if t in tables]

    # --- erasing a text ----------------------------------------------------------------------
    def erase_audit(self, user_id: str, matcher: Matcher, fact_ids: set[str]) -> int:
        """Audit entries of ``user_id``: the text replaced in their content, reason and source, and
        the content of the entries of ``fact_ids`` (the facts about to be deleted) dropped; how many
        entries changed. Runs before the purge writes entries of its own."""
        rows = self._audit_to_erase(user_id, matcher, fact_ids)
        for row in rows:
            new = {c: _rewrite("audit", c, row[c], matcher)[0] for c in ("content", "reason", "source")}
            if row["fact_id"] in fact_ids:
                new["content"] = None
            self.conn.execute("UPDATE audit SET content = ?, reason = ?, source = ? WHERE id = ?",
                              (new["content"], new["reason"], new["source"], row["id"]))
        return len(rows)

    def delete_facts(self, rows: Sequence[Any], at: str) -> list[ErasedFact]:
        """Delete the facts of ``rows`` (:meth:`facts_to_delete`): each leaves a hashed tombstone (it
        still blocks re-extraction) and an audit entry without content."""
        erased: list[ErasedFact] = []
        for row in rows:
            scope = Scope(row["user_id"], row["agent_name"])
            self.conn.execute("DELETE FROM facts WHERE id = ?", (row["id"],))
            self._hashed_tombstone(scope, row["norm"], at)
            self._audit(scope, at, row["id"], "purged: content erased")
            erased.append(ErasedFact(row["id"], scope, row["content"]))
        return erased

    def _hashed_tombstone(self, scope: Scope, norm: str, at: str) -> None:
        self.conn.execute(
            "INSERT INTO tombstones (user_id, agent_name, norm, content, reason, at) VALUES (?, ?, ?, '', ?, ?)"
            " ON CONFLICT (user_id, agent_name, norm) DO NOTHING",
            (scope.user_id, scope.agent_name, tombstone_key(norm), "purged", at))

    def hash_tombstones(self, user_id: str, matcher: Matcher) -> int:
        """Tombstones of ``user_id`` holding the text keep only the hash of their casefolded text."""
        rows = self._tombstones_to_hash(user_id, matcher)
        for row in rows:
            self.conn.execute("DELETE FROM tombstones WHERE user_id = ? AND agent_name = ? AND norm = ?",
                              (row["user_id"], row["agent_name"], row["norm"]))
            self._hashed_tombstone(Scope(row["user_id"], row["agent_name"]), row["norm"], row["at"])
        return len(rows)

    def scrub_columns(self, user_id: str, matcher: Matcher) -> dict[str, int]:
        """Replace the text in :data:`SCRUBBED_COLUMNS` and ``MEMORY.md`` versions; rows per table."""
        out: dict[str, int] = {}
        for table, columns in SCRUBBED_COLUMNS.items():
            out[table] = self._scrub(table, columns, user_id, matcher)
        out["core_versions"] = self._scrub("core_versions", ("content",), user_id, matcher,
                                           lambda row: {"sha256": sha256_hex(row["content"])})
        return {table: n for table, n in out.items() if n}

    def _scrub(self, table: str, columns: Sequence[str], user_id: str, matcher: Matcher,
               extra: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
        keys = ROW_KEYS[table]
        rows = self._matching(table, columns, user_id, matcher, keys)
        for row in rows:
            new = {c: _rewrite(table, c, row[c], matcher)[0] for c in columns}
            new.update(extra(new) if extra is not None else {})
            sets = ", ".join(f"{c} = ?" for c in new)
            where = " AND ".join(f"{k} = ?" for k in keys)
            self.conn.execute(f"UPDATE {table} SET {sets} WHERE {where}", (*new.values(), *(row[k] for k in keys)))
        return len(rows)

    def scrub_outbox(self, user_id: str, matcher: Matcher) -> list[OutboxChange]:
        """Replace the text inside queued items' messages and last errors (every status); the
        changed items."""
        changes: list[OutboxChange] = []
        for row in self._matching("outbox", ("messages", "last_error"), user_id, matcher,
                                  ("id", "thread_id", "agent_name")):
            text = _rewrite("outbox", "messages", row["messages"], matcher)[0]
            error = _rewrite("outbox", "last_error", row["last_error"], matcher)[0]
            self.conn.execute("UPDATE outbox SET messages = ?, last_error = ? WHERE id = ?", (text, error, row["id"]))
            changes.append(OutboxChange(Scope(user_id, row["agent_name"]), row["thread_id"],
                                        _as_list(row["messages"]), _as_list(text)))
        return changes

    def scrub_store_items(self, user_id: str, matcher: Matcher) -> int:
        """Replace the text inside LangGraph store items (their values and search texts), and delete
        the items whose key or a namespace label holds it; how many items changed. An erasure is
        the one write that changes a value behind its owner's back."""
        changes = self._store_item_changes(user_id, matcher)
        for row, value, texts in changes:
            place = (user_id, row["namespace"], row["key"])
            if value is None:
                self.conn.execute("DELETE FROM store_items WHERE user_id = ? AND namespace = ? AND key = ?", place)
            else:
                self.conn.execute("UPDATE store_items SET value = ?, texts = ? WHERE user_id = ? AND namespace = ?"
                                  " AND key = ?", (value, texts, *place))
        return len(changes)

    def scrub_session_items(self, user_id: str, matcher: Matcher) -> int:
        """Replace the text inside agent SDK session items (kept verbatim otherwise); how many changed."""
        changed = 0
        style = JSON_COLUMNS[("session_items", "item")]
        for row in self._rows("SELECT id, item FROM session_items WHERE user_id = ? ORDER BY id", [user_id]):
            text, count = _rewrite_json(row["item"], matcher, style)
            if count:
                self.conn.execute("UPDATE session_items SET item = ? WHERE id = ?", (text, row["id"]))
                changed += 1
        return changed

    def scrub_plans(self, user_id: str, matcher: Matcher) -> int:
        """Replace the text inside plans; a changed plan's revision moves (it is the plan's epoch)."""
        changed = 0
        style = JSON_COLUMNS[("plans", "data")]
        for row in self._rows("SELECT id, revision, data FROM plans WHERE user_id = ? ORDER BY id", [user_id]):
            revision = int(row["revision"]) + 1
            text, count = _rewrite_json(row["data"], matcher, style, {"revision": revision})
            if not count:
                continue
            self.conn.execute("UPDATE plans SET data = ?, revision = ? WHERE id = ?", (text, revision, row["id"]))
            changed += 1
        return changed

    def drop_stale_index(self, user_id: str, matcher: Matcher) -> int:
        """After the files were rewritten and re-indexed: chunks that still hold the text (their
        file could not be re-indexed) are dropped and their file marked for re-indexing; keyword
        contexts that still hold it are cleared. Returns the chunks dropped."""
        with self.db.transaction() as conn:
            stale = self._matching("chunks", ("text",), user_id, matcher, ("id", "path"))
            conn.executemany("DELETE FROM chunks WHERE id = ?", [(r["id"],) for r in stale])
            conn.executemany("DELETE FROM indexed_files WHERE user_id = ? AND path = ?",
                             [(user_id, p) for p in sorted({str(r["path"]) for r in stale})])
            contexts = self._matching("search_docs", ("context",), user_id, matcher, ("id",))
            conn.executemany("UPDATE search_docs SET context = '' WHERE id = ?", [(r["id"],) for r in contexts])
        return len(stale)

    # --- erasing a user ----------------------------------------------------------------------
    def delete_user(self, user_id: str, namespace_prefixes: Sequence[str]) -> None:
        """Delete every row of ``user_id`` in every table with a ``user_id`` column, and its
        journal digests (:meth:`user_rows` counts them first)."""
        for table in self._user_tables():
            if table != "search_removed":
                self.conn.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
        for prefix in namespace_prefixes:
            self.conn.execute("DELETE FROM flush_hashes WHERE substr(namespace, 1, ?) = ?", (len(prefix), prefix))

    # --- vectors, audit, compaction ----------------------------------------------------------
    def delete_vectors(self, hashes: Iterable[str]) -> int:
        """Delete the stored vectors (every model) of ``hashes`` that no remaining item links to."""
        wanted = sorted(set(hashes))
        removed = 0
        with self.db.transaction() as conn:
            for start in range(0, len(wanted), 500):
                part = wanted[start:start + 500]
                marks = ", ".join("?" for _ in part)
                removed += conn.execute(
                    f"DELETE FROM embeddings WHERE content_hash IN ({marks}) AND content_hash NOT IN"
                    f" (SELECT embed_hash FROM search_docs WHERE embed_hash IN ({marks}))", [*part, *part]).rowcount
        return removed

    def _audit(self, scope: Scope, at: str, fact_id: str | None, reason: str) -> None:
        self.conn.execute("INSERT INTO audit (user_id, agent_name, at, action, fact_id, content, reason, source,"
                          " run_id) VALUES (?, ?, ?, 'purged', ?, NULL, ?, NULL, NULL)",
                          (scope.user_id, scope.agent_name, at, fact_id, reason))

    def record(self, scope: Scope, at: str, fact_id: str | None, reason: str) -> None:
        """The purge's own audit entry: what was purged as a hash and counts, never the text."""
        with self.db.transaction():
            self._audit(scope, at, fact_id, reason)

    def prefix_mark(self, user_id: str, day: str) -> tuple[int, str] | None:
        """The consolidated prefix mark ``(offset, sha256)`` of a day, where the store has them."""
        if "consolidated_prefix" not in self.db.parts.tables(self.db):
            return None
        row = self.conn.execute('SELECT "offset", sha256 FROM consolidated_prefix WHERE user_id = ? AND day = ?',
                                (user_id, day)).fetchone()
        return (int(row[0]), str(row[1])) if row is not None else None

    def move_prefix_mark(self, user_id: str, day: str, offset: int, sha256: str) -> None:
        self.conn.execute('UPDATE consolidated_prefix SET "offset" = ?, sha256 = ? WHERE user_id = ? AND day = ?',
                          (offset, sha256, user_id, day))

    def compact(self) -> tuple[bool, bool]:
        """Leave no copy of the erased text in the database's free space or log (SQLite: rebuild
        the FTS5 indexes, VACUUM, truncate the WAL; PostgreSQL: VACUUM the tables). Returns
        ``(vacuumed, log truncated)``; see :attr:`tiermem.storage.sql.Backend.compact`."""
        return self.db.parts.compact(self.db)

    def secure_delete(self, on: bool) -> bool:
        """Overwrite deleted content where the backend can (SQLite's ``secure_delete``) on this
        thread's connection; returns the previous setting."""
        return self.db.parts.secure_delete(self.db, on)


def _found_in(table: str, column: str, value: object, matcher: Matcher) -> bool:
    return _rewrite(table, column, value, matcher)[1] > 0


def _rewrite(table: str, column: str, value: Any, matcher: Matcher) -> tuple[Any, int]:
    """A column's value with the text replaced (in the string values of :data:`JSON_COLUMNS`), and
    how many occurrences there were; a value that is no string is left as it is."""
    if not isinstance(value, str):
        return value, 0
    style = JSON_COLUMNS.get((table, column))
    return matcher.sub(value) if style is None else _rewrite_json(value, matcher, style)


def _rewrite_json(raw: str, matcher: Matcher, style: dict[str, Any],
                  bump: dict[str, int] | None = None) -> tuple[str, int]:
    """``raw`` JSON with the text replaced in its string values (matched as text if it is not JSON),
    written back in ``style`` if it changed; ``bump`` sets top-level integer fields of a changed
    document."""
    try:
        value = json.loads(raw)
    except ValueError:
        return matcher.sub(raw)
    new, count = matcher.sub_json(value)
    if not count:
        return raw, 0
    if bump and isinstance(new, dict):
        new.update({k: v for k, v in bump.items() if isinstance(new.get(k), int)})
    return json.dumps(new, **style), count


def _as_list(raw: str) -> list[Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return value if isinstance(value, list) else []
