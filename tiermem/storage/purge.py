"""SQL of ``tiermem purge`` (see :mod:`tiermem.purge`): find content in every table, erase it, keep
only hashes, and leave no copy behind where the backend allows (SQLite: free pages, the FTS5
shadow tables, the WAL; PostgreSQL: the tables' dead rows, by VACUUM).

The SQL is the same on every backend: a user's rows are read and matched here, in Python. Every
column that may hold text of every table is classified here. :data:`CONTENT_COLUMNS` hold what people,
agents or models wrote: a text purge deletes the facts that contain the text, turns tombstones
into hashes and replaces the text by :data:`PLACEHOLDER` everywhere else (inside JSON values for
:data:`JSON_COLUMNS`). :data:`KEY_COLUMNS` hold ids, names, hashes, times and days: never
changed (a user purge deletes the user's rows whatever they hold). :func:`unclassified_columns`
lists any column in neither, and a test fails on it, so a new table cannot slip past purge.

Matching (:class:`Matcher`) is case-insensitive (Unicode simple case folding, as ``re``
does it), and a run of white space in the text matches any run of white space, so a text also
matches where a record wraps it onto continuation lines or a line break was folded.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.storage.facts import TOMBSTONE_HASH_PREFIX, tombstone_key
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

PLACEHOLDER = "[purged]"

#: What people, agents or models wrote. (Derived copies too: ``chunks`` and ``search_docs`` are
#: cut from the Markdown files and rebuilt from them after the files are rewritten.)
CONTENT_COLUMNS: dict[str, tuple[str, ...]] = {
    "facts": ("content", "norm", "source"),
    "audit": ("content", "reason", "source"),
    "tombstones": ("norm", "content", "reason"),
    "summaries": ("summary",),
    "outbox": ("messages", "last_error"),
    "plans": ("data",),
    "core_versions": ("content",),
    "chunks": ("text",),
    "search_docs": ("text", "context"),
    "store_items": ("value", "texts"),  # LangGraph store items (tiermem.integrations.langgraph)
    "call_log": ("prompt", "completion", "error"),  # the LLM call log: texts only with log_prompts (and errors)
    "session_items": ("item",),  # agent SDK session items, verbatim (tiermem.integrations.openai_agents)
}

#: Ids, names, hashes, times, days, enum values: nothing a person wrote.
KEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "facts": ("id", "user_id", "agent_name", "category", "created_at", "updated_at"),
    "audit": ("user_id", "agent_name", "at", "action", "fact_id", "run_id"),
    "tombstones": ("user_id", "agent_name", "at"),
    "summaries": ("user_id", "agent_name", "key", "updated_at"),
    "meta": ("key", "value"),
    "chunks": ("user_id", "agent_name", "tier", "path", "day", "content_hash"),
    "indexed_files": ("user_id", "path", "sha256"),
    "outbox": ("thread_id", "user_id", "agent_name", "status", "enqueued_at", "not_before", "claimed_by",
               "claimed_at", "lease_until"),
    "extracted_hashes": ("user_id", "agent_name", "thread_id", "md5", "at"),
    "flush_hashes": ("namespace", "digest", "at"),
    "consolidated_days": ("user_id", "day", "at"),
    "consolidated_prefix": ("user_id", "day", "sha256", "at"),
    "plans": ("id", "user_id", "agent_name", "status", "created_at", "updated_at"),
    "change_epochs": ("user_id", "agent_name", "topic"),
    "search_docs": ("source", "ref", "user_id", "agent_name", "tier", "category", "at", "embed_hash"),
    "search_removed": ("user_id",),
    "embeddings": ("content_hash", "model"),
    "core_versions": ("user_id", "created_at", "cause", "sha256"),
    "dream_state": ("user_id", "daily_sha256", "days", "at"),
    "journal_intents": ("user_id", "namespace", "day", "blocks", "at"),  # hashes and lengths, no text
    # PostgreSQL: the Daily files and MEMORY.md as rows (their bytes, in memory_blocks.data, are the
    # files a purge rewrites or removes through MemoryFiles)
    "memory_files": ("user_id", "rel"),
    "memory_blocks": ("user_id", "rel"),
    # PostgreSQL: the vector index (halfvec copies of the embeddings, dropped with their search items)
    "search_models": ("model",),
    "search_terms": ("kind",),
    "search_vectors": ("content_hash", "user_id", "agent_name", "tier", "category", "at"),
    "store_items": ("user_id", "namespace", "key", "created_at", "updated_at", "expires_at"),
    "call_log": ("at", "user_id", "agent_name", "purpose", "provider", "model", "outcome"),
    "session_items": ("user_id", "agent_name", "session_id", "added_at"),
    "agent_sessions": ("user_id", "agent_name", "session_id", "created_at", "updated_at"),
}

#: Columns the database computes from content columns (PostgreSQL's text search vectors, and its
#: keyword vocabulary kept by triggers): they change with them and need no handling of their own
#: (a term no item holds any more is dropped when the purge compacts the store).
DERIVED_COLUMNS: dict[str, tuple[str, ...]] = {
    "search_docs": ("words", "grams"),
    "search_terms": ("term",),
}

#: JSON documents: the text is replaced inside their string values, and they are written back
#: the way their owners write them.
JSON_COLUMNS: dict[tuple[str, str], dict[str, Any]] = {
    ("outbox", "messages"): {"ensure_ascii": False},
    ("plans", "data"): {"ensure_ascii": False, "sort_keys": True, "separators": (",", ":")},
    ("store_items", "value"): {"ensure_ascii": False},
    ("store_items", "texts"): {"ensure_ascii": False},
    ("session_items", "item"): {"ensure_ascii": False},
}

#: Plain text columns a text purge rewrites in place (facts, tombstones, JSON and the search
#: index have their own handling).
SCRUBBED_COLUMNS: dict[str, tuple[str, ...]] = {
    "facts": ("source",),
    "audit": ("content", "reason", "source"),
    "summaries": ("summary",),
    "outbox": ("last_error",),
    "call_log": ("prompt", "completion", "error"),
}

#: The key of each table whose rows a text purge rewrites in place.
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "facts": ("id",), "audit": ("id",), "summaries": ("user_id", "agent_name", "key"), "outbox": ("id",),
    "core_versions": ("id",), "call_log": ("id",),
}
# Deleted last when a user goes: deleting facts and chunks writes to them through triggers.
_LAST = ("search_docs", "change_epochs")


class Matcher:
    """Where a text occurs: case-insensitive, any run of white space matching any other."""

    def __init__(self, text: str) -> None:
        words = text.split()
        if not words:
            raise ValueError("nothing to match")
        self.text = text
        self.pattern = re.compile(r"\s+".join(re.escape(word) for word in words), re.IGNORECASE)

    def found(self, value: object) -> bool:
        return isinstance(value, str) and self.pattern.search(value) is not None

    def sub(self, value: str) -> tuple[str, int]:
        """``value`` with every occurrence replaced by :data:`PLACEHOLDER`, and how many there were."""
        return self.pattern.subn(PLACEHOLDER, value)

    def sub_json(self, value: Any) -> tuple[Any, int]:
        """A decoded JSON value with the text replaced in every string (keys left alone)."""
        if isinstance(value, str):
            return self.sub(value)
        if isinstance(value, list):
            pairs = [self.sub_json(v) for v in value]
            return [v for v, _ in pairs], sum(n for _, n in pairs)
        if isinstance(value, dict):
            done = {k: self.sub_json(v) for k, v in value.items()}
            return {k: v for k, (v, _) in done.items()}, sum(n for _, n in done.values())
        return value, 0

    def found_json(self, raw: object) -> bool:
        if not isinstance(raw, str):
            return False
        try:
            return self.sub_json(json.loads(raw))[1] > 0
        except ValueError:
            return self.found(raw)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def unclassified_columns(db: Database) -> list[str]:
    """``table.column`` of every column that may hold text, of every plain table (not the index
    shadow tables), that is in neither :data:`CONTENT_COLUMNS` nor :data:`KEY_COLUMNS`."""
    out: list[str] = []
    for table in db.parts.tables(db):
        known = {*CONTENT_COLUMNS.get(table, ()), *KEY_COLUMNS.get(table, ()), *DERIVED_COLUMNS.get(table, ())}
        out += [f"{table}.{column}" for column in db.parts.text_columns(db, table) if column not in known]
    return out


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
        """Rows of ``user_id`` (every agent) holding the text, per table (search_docs left out:
        it mirrors facts and chunks)."""
        out: dict[str, int] = {}
        for table, columns in CONTENT_COLUMNS.items():
            if table == "search_docs":
                continue
            if table == "facts":
                columns = ("content",)  # the facts a purge deletes (a matching source is only rewritten)
            found = len(self._matching(table, columns, user_id, matcher))
            if found:
                out[table] = found
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
    def delete_facts(self, user_id: str, matcher: Matcher, at: str, also: str | None = None) -> list[ErasedFact]:
        """Delete the facts of ``user_id`` holding the text (and the fact ``also``): each leaves a
        hashed tombstone (it still blocks re-extraction) and an audit entry without content; the
        content of the fact's earlier audit entries is dropped."""
        rows = [r for r in self._rows("SELECT id, user_id, agent_name, content, norm FROM facts WHERE user_id = ?"
                                      " ORDER BY rowid", [user_id]) if matcher.found(r["content"]) or r["id"] == also]
        erased: list[ErasedFact] = []
        for row in rows:
            scope = Scope(row["user_id"], row["agent_name"])
            self.conn.execute("DELETE FROM facts WHERE id = ?", (row["id"],))
            self._hashed_tombstone(scope, row["norm"], at)
            self.conn.execute("UPDATE audit SET content = NULL WHERE fact_id = ?", (row["id"],))
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
        rows = [r for r in self._matching("tombstones", ("content", "norm", "reason"), user_id, matcher,
                                          ("user_id", "agent_name", "at"))
                if not (r["content"] == "" and str(r["norm"]).startswith(TOMBSTONE_HASH_PREFIX))]  # hashed already
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
            new = {c: matcher.sub(row[c])[0] if isinstance(row[c], str) else row[c] for c in columns}
            new.update(extra(new) if extra is not None else {})
            sets = ", ".join(f"{c} = ?" for c in new)
            where = " AND ".join(f"{k} = ?" for k in keys)
            self.conn.execute(f"UPDATE {table} SET {sets} WHERE {where}", (*new.values(), *(row[k] for k in keys)))
        return len(rows)

    def scrub_outbox(self, user_id: str, matcher: Matcher) -> list[OutboxChange]:
        """Replace the text inside queued messages (every status); the changed items."""
        changes: list[OutboxChange] = []
        style = JSON_COLUMNS[("outbox", "messages")]
        for row in self._rows("SELECT id, thread_id, user_id, agent_name, messages FROM outbox WHERE user_id = ?"
                              " ORDER BY id", [user_id]):
            text, count = _rewrite_json(row["messages"], matcher, style)
            if count:
                self.conn.execute("UPDATE outbox SET messages = ? WHERE id = ?", (text, row["id"]))
                changes.append(OutboxChange(Scope(row["user_id"], row["agent_name"]), row["thread_id"],
                                            _as_list(row["messages"]), _as_list(text)))
        return changes

    def scrub_store_items(self, user_id: str, matcher: Matcher) -> int:
        """Replace the text inside LangGraph store items (their values and search texts); how many
        items changed. An erasure is the one write that changes a value behind its owner's back."""
        changed = 0
        for row in self._rows("SELECT namespace, key, value, texts FROM store_items WHERE user_id = ?"
                              " ORDER BY namespace, key", [user_id]):
            value, in_value = _rewrite_json(row["value"], matcher, JSON_COLUMNS[("store_items", "value")])
            texts, in_texts = _rewrite_json(row["texts"], matcher, JSON_COLUMNS[("store_items", "texts")])
            if in_value or in_texts:
                self.conn.execute("UPDATE store_items SET value = ?, texts = ? WHERE user_id = ? AND namespace = ?"
                                  " AND key = ?", (value, texts, user_id, row["namespace"], row["key"]))
                changed += 1
        return changed

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
    def delete_user(self, user_id: str, namespace_prefixes: Sequence[str]) -> dict[str, int]:
        """Delete every row of ``user_id`` in every table with a ``user_id`` column, and its
        journal digests; rows per table."""
        out: dict[str, int] = {}
        conn = self.conn
        for table in self._user_tables():
            if table == "search_removed":
                continue
            count = conn.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,)).rowcount
            if count and table != "search_docs":
                out[table] = out.get(table, 0) + count
        digests = sum(conn.execute("DELETE FROM flush_hashes WHERE substr(namespace, 1, ?) = ?",
                                   (len(p), p)).rowcount for p in namespace_prefixes)
        if digests:
            out["flush_hashes"] = digests
        return out

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
    return matcher.found_json(value) if (table, column) in JSON_COLUMNS else matcher.found(value)


def _rewrite_json(raw: str, matcher: Matcher, style: dict[str, Any],
                  bump: dict[str, int] | None = None) -> tuple[str, int]:
    """``raw`` JSON with the text replaced in its string values (plain text if it is not JSON);
    ``bump`` sets top-level integer fields of a changed document."""
    try:
        value = json.loads(raw)
    except ValueError:
        return matcher.sub(raw)
    new, count = matcher.sub_json(value)
    if count and bump and isinstance(new, dict):
        new.update({k: v for k, v in bump.items() if isinstance(new.get(k), int)})
    return json.dumps(new, **style), count


def _as_list(raw: str) -> list[Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return value if isinstance(value, list) else []
