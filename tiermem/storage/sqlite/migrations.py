"""Schema migrations: a plain ordered list of small steps; ``PRAGMA user_version`` records progress.

Append new steps at the end (steps 12 and later are in :mod:`tiermem.storage.sqlite.steps_late`);
never edit a step that has shipped.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from collections.abc import Callable
from datetime import date
from pathlib import Path

from tiermem.storage.sqlite import steps_late
from tiermem.storage.sqlite.script import run_script

Migration = Callable[[sqlite3.Connection], None]


def _facts(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE facts (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            content TEXT NOT NULL,
            norm TEXT NOT NULL,
            category TEXT NOT NULL,
            confidence REAL NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            source TEXT
        );
        CREATE UNIQUE INDEX facts_scope_norm ON facts (user_id, agent_name, norm);
        CREATE INDEX facts_scope_rank ON facts (user_id, agent_name, confidence, created_at);

        CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            at TEXT NOT NULL,
            action TEXT NOT NULL,
            fact_id TEXT,
            content TEXT,
            reason TEXT NOT NULL,
            source TEXT,
            run_id TEXT
        );
        CREATE INDEX audit_scope ON audit (user_id, agent_name, id);

        CREATE TABLE tombstones (
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            norm TEXT NOT NULL,
            content TEXT NOT NULL,
            reason TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, agent_name, norm)
        );

        CREATE TABLE summaries (
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            key TEXT NOT NULL,
            summary TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (user_id, agent_name, key)
        );

        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """
    )


def _chunks(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            tier TEXT NOT NULL,
            path TEXT NOT NULL,
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            text TEXT NOT NULL,
            day TEXT,
            content_hash TEXT NOT NULL
        );
        CREATE INDEX chunks_file ON chunks (user_id, path);
        CREATE INDEX chunks_scope ON chunks (user_id, tier, day);

        CREATE TABLE indexed_files (
            user_id TEXT NOT NULL,
            path TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            PRIMARY KEY (user_id, path)
        );
        """,
    )


def _outbox(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY,
            thread_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            messages TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            enqueued_at TEXT NOT NULL,
            not_before TEXT NOT NULL,
            claimed_by TEXT,
            claimed_at TEXT
        );
        CREATE UNIQUE INDEX outbox_pending_key ON outbox (thread_id, user_id, agent_name)
            WHERE status = 'pending';
        CREATE INDEX outbox_status ON outbox (status, not_before);

        CREATE TABLE extracted_hashes (
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            md5 TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, agent_name, thread_id, md5)
        );
        """,
    )


def _journal(conn: sqlite3.Connection) -> None:
    """Daily tier: MD5 hashes of flushed messages (R9) and days consumed by a Deep Dream (R12)."""
    run_script(
        conn,
        """
        CREATE TABLE flush_hashes (
            namespace TEXT NOT NULL,
            digest TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (namespace, digest)
        );
        CREATE INDEX flush_hashes_at ON flush_hashes (at);

        CREATE TABLE consolidated_days (
            user_id TEXT NOT NULL,
            day TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, day)
        );

        -- a file's chunks in line order, both ways (neighbouring records, growing daily files)
        CREATE INDEX chunks_file_start ON chunks (user_id, path, line_start);
        CREATE INDEX chunks_file_end ON chunks (user_id, path, line_end);
        """,
    )


def _plans(conn: sqlite3.Connection) -> None:
    """Boulder state (R54-R56): one JSON row per plan; at most one active plan per scope."""
    run_script(
        conn,
        """
        CREATE TABLE plans (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            status TEXT NOT NULL,
            revision INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            data TEXT NOT NULL CHECK (json_valid(data))
        );
        CREATE INDEX plans_scope_status ON plans (user_id, agent_name, status, created_at);
        CREATE UNIQUE INDEX plans_one_active ON plans (user_id, agent_name) WHERE status = 'active';
        """,
    )


def _change_epochs(conn: sqlite3.Connection) -> None:
    """Per-scope change counters kept by triggers: the system-context epoch of memory (R57)."""
    bump = (
        "INSERT INTO change_epochs (user_id, agent_name, topic, value) VALUES ({row}.user_id, {row}.agent_name,"
        " 'memory', 1) ON CONFLICT (user_id, agent_name, topic) DO UPDATE SET value = value + 1;"
    )
    triggers = "".join(
        f"CREATE TRIGGER {table}_epoch_{event.lower()} AFTER {event} ON {table} BEGIN "
        f"{bump.format(row='OLD' if event == 'DELETE' else 'NEW')} END;\n"
        for table in ("facts", "summaries") for event in ("INSERT", "UPDATE", "DELETE")
    )
    run_script(
        conn,
        """
        CREATE TABLE change_epochs (
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            topic TEXT NOT NULL,
            value INTEGER NOT NULL,
            PRIMARY KEY (user_id, agent_name, topic)
        );
        """ + triggers,
    )


def _search_index(conn: sqlite3.Connection) -> None:
    """Search (R44-R47): one row per searchable item in ``search_docs`` (facts and Markdown
    chunks, kept in sync by triggers), two FTS5 indexes over it (``porter unicode61`` words and
    ``trigram`` substrings), a log of removed items so in-memory vector indexes of other processes
    catch up, and embeddings keyed by (content hash, model).

    ``search_docs.id`` is AUTOINCREMENT: ids only grow, so "id > watermark" finds new items. A
    changed fact or chunk gets a new row (delete + insert). ``embed_hash`` is filled by the search
    engine once the item's vector is stored (NULL = not embedded yet); so is ``context`` (words
    indexed with a lower weight: a daily record's date and its neighbouring records).
    """
    doc_columns = "source, ref, user_id, agent_name, tier, category, at, text"
    fact_values = "'fact', NEW.id, NEW.user_id, NEW.agent_name, 'fact', NEW.category, NEW.created_at, NEW.content"
    chunk_values = "'chunk', CAST(NEW.id AS TEXT), NEW.user_id, NEW.agent_name, NEW.tier, NULL, NEW.day, NEW.text"
    run_script(
        conn,
        f"""
        CREATE TABLE search_docs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            source TEXT NOT NULL,
            ref TEXT NOT NULL,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            tier TEXT NOT NULL,
            category TEXT,
            at TEXT,
            text TEXT NOT NULL,
            context TEXT NOT NULL DEFAULT '',
            embed_hash TEXT
        );
        CREATE UNIQUE INDEX search_docs_ref ON search_docs (source, ref);
        CREATE INDEX search_docs_scope ON search_docs (user_id, agent_name, id);
        CREATE INDEX search_docs_unembedded ON search_docs (id) WHERE embed_hash IS NULL;

        CREATE TABLE search_removed (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            doc_id INTEGER NOT NULL,
            user_id TEXT NOT NULL
        );

        CREATE TABLE embeddings (
            content_hash TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (content_hash, model)
        ) WITHOUT ROWID;

        CREATE VIRTUAL TABLE search_words USING fts5(
            text, context, content='search_docs', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE search_grams USING fts5(
            text, content='search_docs', content_rowid='id', tokenize='trigram'
        );
        CREATE VIRTUAL TABLE search_words_vocab USING fts5vocab(search_words, 'row');
        CREATE VIRTUAL TABLE search_grams_vocab USING fts5vocab(search_grams, 'row');

        CREATE TRIGGER search_docs_insert AFTER INSERT ON search_docs BEGIN
            INSERT INTO search_words (rowid, text, context) VALUES (NEW.id, NEW.text, NEW.context);
            INSERT INTO search_grams (rowid, text) VALUES (NEW.id, NEW.text);
        END;
        CREATE TRIGGER search_docs_delete AFTER DELETE ON search_docs BEGIN
            INSERT INTO search_words (search_words, rowid, text, context) VALUES ('delete', OLD.id, OLD.text,
                                                                                  OLD.context);
            INSERT INTO search_grams (search_grams, rowid, text) VALUES ('delete', OLD.id, OLD.text);
            INSERT INTO search_removed (doc_id, user_id) VALUES (OLD.id, OLD.user_id);
        END;
        CREATE TRIGGER search_docs_text AFTER UPDATE OF text ON search_docs BEGIN
            INSERT INTO search_words (search_words, rowid, text, context) VALUES ('delete', OLD.id, OLD.text,
                                                                                  OLD.context);
            INSERT INTO search_grams (search_grams, rowid, text) VALUES ('delete', OLD.id, OLD.text);
            INSERT INTO search_words (rowid, text, context) VALUES (NEW.id, NEW.text, NEW.context);
            INSERT INTO search_grams (rowid, text) VALUES (NEW.id, NEW.text);
        END;
        CREATE TRIGGER search_docs_context AFTER UPDATE OF context ON search_docs
        WHEN OLD.text IS NEW.text BEGIN
            INSERT INTO search_words (search_words, rowid, text, context) VALUES ('delete', OLD.id, OLD.text,
                                                                                  OLD.context);
            INSERT INTO search_words (rowid, text, context) VALUES (NEW.id, NEW.text, NEW.context);
        END;

        CREATE TRIGGER facts_search_insert AFTER INSERT ON facts BEGIN
            INSERT INTO search_docs ({doc_columns}) VALUES ({fact_values});
        END;
        CREATE TRIGGER facts_search_delete AFTER DELETE ON facts BEGIN
            DELETE FROM search_docs WHERE source = 'fact' AND ref = OLD.id;
        END;
        CREATE TRIGGER facts_search_update AFTER UPDATE ON facts
        WHEN OLD.content IS NOT NEW.content OR OLD.category IS NOT NEW.category
            OR OLD.created_at IS NOT NEW.created_at OR OLD.id IS NOT NEW.id
            OR OLD.user_id IS NOT NEW.user_id OR OLD.agent_name IS NOT NEW.agent_name
        BEGIN
            DELETE FROM search_docs WHERE source = 'fact' AND ref = OLD.id;
            INSERT INTO search_docs ({doc_columns}) VALUES ({fact_values});
        END;

        CREATE TRIGGER chunks_search_insert AFTER INSERT ON chunks BEGIN
            INSERT INTO search_docs ({doc_columns}) VALUES ({chunk_values});
        END;
        CREATE TRIGGER chunks_search_delete AFTER DELETE ON chunks BEGIN
            DELETE FROM search_docs WHERE source = 'chunk' AND ref = CAST(OLD.id AS TEXT);
        END;
        CREATE TRIGGER chunks_search_update AFTER UPDATE ON chunks
        WHEN OLD.text IS NOT NEW.text OR OLD.tier IS NOT NEW.tier OR OLD.day IS NOT NEW.day
            OR OLD.id IS NOT NEW.id OR OLD.user_id IS NOT NEW.user_id
        BEGIN
            DELETE FROM search_docs WHERE source = 'chunk' AND ref = CAST(OLD.id AS TEXT);
            INSERT INTO search_docs ({doc_columns}) VALUES ({chunk_values});
        END;

        INSERT INTO search_docs ({doc_columns})
            SELECT 'fact', id, user_id, agent_name, 'fact', category, created_at, content FROM facts ORDER BY rowid;
        INSERT INTO search_docs ({doc_columns})
            SELECT 'chunk', CAST(id AS TEXT), user_id, agent_name, tier, NULL, day, text FROM chunks ORDER BY id;
        """,
    )


def _dreams(conn: sqlite3.Connection) -> None:
    """Deep Dream (R38, R41): replaced MEMORY.md versions and the last processed daily hash, per user."""
    run_script(
        conn,
        """
        CREATE TABLE core_versions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            cause TEXT NOT NULL,
            content TEXT NOT NULL,
            existed INTEGER NOT NULL,
            sha256 TEXT NOT NULL
        );
        CREATE INDEX core_versions_user ON core_versions (user_id, id);

        CREATE TABLE dream_state (
            user_id TEXT PRIMARY KEY,
            daily_sha256 TEXT NOT NULL,
            days TEXT NOT NULL,
            at TEXT NOT NULL
        );
        """,
    )


def _outbox_leases(conn: sqlite3.Connection) -> None:
    """Step 9 (issue 14): exactly-once queue processing under crashes.

    ``outbox.lease_until``: a claim (``claimed_by``, ``claimed_at``) is a lease until then, renewed
    by the claimer's heartbeat; an item left 'processing' with a lease in the past is reclaimable
    whatever the claimer's PID says (rows claimed before this step have none: their lease counts
    from ``claimed_at``). ``journal_intents``: write-ahead records of Daily appends
    (:mod:`tiermem.storage.journal`), settled by the next writer after a crash."""
    run_script(
        conn,
        """
        ALTER TABLE outbox ADD COLUMN lease_until TEXT;

        CREATE TABLE journal_intents (
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            namespace TEXT NOT NULL,
            day TEXT NOT NULL,
            offset INTEGER NOT NULL,
            blocks TEXT NOT NULL CHECK (json_valid(blocks)),
            at TEXT NOT NULL
        );
        CREATE INDEX journal_intents_user ON journal_intents (user_id, id);
        """,
    )


_LEGACY_MARK_QUIET_SECONDS = 3600.0  # longer than a dream's LLM call with every retry and backoff


def _consolidation_prefix(conn: sqlite3.Connection) -> None:
    """Step 10 (issue 14, R12): a Deep Dream's consolidation mark records the prefix of a day file
    it read — ``offset`` (its length in bytes) and the ``sha256`` of those bytes — and retention
    removes a file only while that prefix is the whole file.

    The day marks of earlier stores (``consolidated_days``) said only "a dream consumed this day",
    even when records were appended after it read the file. Each becomes a mark covering the file
    as it is now only when the file's last change (its mtime) is at least an hour before the mark
    was made — longer than a dream's LLM call with all its retries — so the dream read the file as
    it is now. Otherwise (a later change, no file, a symlink, an unreadable file, an in-memory
    database) the mark is dropped and the day stays until a dream reads it again: a kept file
    costs disk space, a wrong mark would cost notes. ``consolidated_days`` is then dropped.
    """
    run_script(
        conn,
        """
        CREATE TABLE consolidated_prefix (
            user_id TEXT NOT NULL,
            day TEXT NOT NULL,
            offset INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, day)
        );
        """,
    )
    files = [str(r[2]) for r in conn.execute("PRAGMA database_list") if r[1] == "main" and r[2]]
    old = conn.execute("SELECT user_id, day, at FROM consolidated_days ORDER BY user_id, day").fetchall()
    if files:
        base = Path(files[0]).resolve().parent  # tiermem.db sits at the root of the store
        marks = [mark for row in old if (mark := _legacy_mark(base, str(row[0]), str(row[1]), str(row[2])))]
        conn.executemany("INSERT INTO consolidated_prefix (user_id, day, offset, sha256, at) VALUES (?, ?, ?, ?, ?)",
                         marks)
    conn.execute("DROP TABLE consolidated_days")


def _legacy_mark(base: Path, user_id: str, day: str, at: str) -> tuple[str, str, int, str, str] | None:
    """The prefix mark an old day mark becomes (see :func:`_consolidation_prefix`), or ``None``.
    The store's layout as it was when this step shipped: the default user's files at the root,
    any other user's under ``users/<id>/``; day files at ``memory/YYYY-MM-DD.md``."""
    from tiermem.clock import parse_utc

    try:
        made = parse_utc(at).timestamp()
        date.fromisoformat(day)
    except ValueError:
        return None
    if not user_id or user_id in (".", "..") or "/" in user_id or "\\" in user_id:
        return None
    path = (base if user_id == "default" else base / "users" / user_id) / "memory" / f"{day}.md"
    try:
        if not path.resolve().is_relative_to(base):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            data = handle.read()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_mtime > made - _LEGACY_MARK_QUIET_SECONDS:
        return None
    return user_id, day, len(data), hashlib.sha256(data).hexdigest(), at


def _purge(conn: sqlite3.Connection) -> None:
    """Step 11 (issue 14): intentionally empty — purge needed no schema change (hashed tombstones use
    the existing columns); the step stays so every store counts its versions the same way."""


MIGRATIONS: list[Migration] = [
    _facts,
    _chunks,
    _outbox,
    _journal,
    _plans,
    _change_epochs,
    _search_index,
    _dreams,
    _outbox_leases,
    _consolidation_prefix,
    _purge,
    steps_late.scope_term_stats,
    steps_late.store_items,
    steps_late.session_items,
    steps_late.call_log,
    steps_late.outbox_first_position,
    steps_late.facts_scope_category,
    steps_late.search_epochs,
]


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the steps this database has not seen yet (call inside a write transaction)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
        step(conn)
        conn.execute(f"PRAGMA user_version = {number}")
