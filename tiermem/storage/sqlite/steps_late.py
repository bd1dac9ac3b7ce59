"""SQLite schema steps 12 and later (issues 16, 17 and 23): keyword statistics per scope, the
LangGraph store's items, agent SDK session items, the LLM call log, the outbox's first position. Listed in
:data:`tiermem.storage.sqlite.migrations.MIGRATIONS` after the earlier steps."""

from __future__ import annotations

import sqlite3

from tiermem.storage.sqlite.script import run_script


def scope_term_stats(conn: sqlite3.Connection) -> None:
    """Step 12 (issue 16): keyword statistics per scope. ``search_docs.scope_key`` (generated: one
    word per (user, agent), :func:`tiermem.storage.sqlite.search.scope_token`) becomes a third
    column of ``search_words``, so a term's document frequency is counted within a scope by
    intersecting two posting lists; the word index is rebuilt with it (a few seconds per 100k
    items, once). Also the store's random id, which the saved vector index files are checked
    against (:mod:`tiermem.search.index_files`): made with the store, so no search ever writes it."""
    words = "search_words (rowid, text, context, scope_key) VALUES (NEW.id, NEW.text, NEW.context, NEW.scope_key)"
    delete = ("search_words (search_words, rowid, text, context, scope_key)"
              " VALUES ('delete', OLD.id, OLD.text, OLD.context, OLD.scope_key)")
    run_script(
        conn,
        f"""
        ALTER TABLE search_docs ADD COLUMN scope_key TEXT GENERATED ALWAYS AS
            ('s' || hex(user_id) || 'x' || hex(agent_name) || '0') VIRTUAL;
        DROP TRIGGER search_docs_insert;
        DROP TRIGGER search_docs_delete;
        DROP TRIGGER search_docs_text;
        DROP TRIGGER search_docs_context;
        DROP TABLE search_words;
        CREATE VIRTUAL TABLE search_words USING fts5(
            text, context, scope_key, content='search_docs', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO search_words (search_words) VALUES ('rebuild');
        INSERT INTO meta (key, value) VALUES ('search_index_store_id', lower(hex(randomblob(16))))
            ON CONFLICT (key) DO NOTHING;

        CREATE TRIGGER search_docs_insert AFTER INSERT ON search_docs BEGIN
            INSERT INTO {words};
            INSERT INTO search_grams (rowid, text) VALUES (NEW.id, NEW.text);
        END;
        CREATE TRIGGER search_docs_delete AFTER DELETE ON search_docs BEGIN
            INSERT INTO {delete};
            INSERT INTO search_grams (search_grams, rowid, text) VALUES ('delete', OLD.id, OLD.text);
            INSERT INTO search_removed (doc_id, user_id) VALUES (OLD.id, OLD.user_id);
        END;
        CREATE TRIGGER search_docs_text AFTER UPDATE OF text ON search_docs BEGIN
            INSERT INTO {delete};
            INSERT INTO search_grams (search_grams, rowid, text) VALUES ('delete', OLD.id, OLD.text);
            INSERT INTO {words};
            INSERT INTO search_grams (rowid, text) VALUES (NEW.id, NEW.text);
        END;
        CREATE TRIGGER search_docs_context AFTER UPDATE OF context ON search_docs
        WHEN OLD.text IS NEW.text BEGIN
            INSERT INTO {delete};
            INSERT INTO {words};
        END;
        """,
    )


def store_items(conn: sqlite3.Connection) -> None:
    """Step 13 (issue 17): LangGraph store items (:mod:`tiermem.integrations.langgraph`,
    :mod:`tiermem.storage.store_items`): a value exactly as put (JSON text) by (user, namespace,
    key), the redacted texts its ``query=`` search reads, and its expiry (TTL)."""
    run_script(
        conn,
        """
        CREATE TABLE store_items (
            user_id TEXT NOT NULL,
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            texts TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            expires_at TEXT,
            ttl_minutes REAL,
            PRIMARY KEY (user_id, namespace, key)
        );
        CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL;
        CREATE INDEX store_items_recent ON store_items (user_id, updated_at);
        """,
    )


def session_items(conn: sqlite3.Connection) -> None:
    """Step 14 (issue 17): agent SDK session items (:mod:`tiermem.storage.session_items`): each item
    verbatim as JSON text in insertion order, and per session its generation (bumped by a clear, so
    the conversation after a clear is journaled as a new one)."""
    run_script(
        conn,
        """
        CREATE TABLE agent_sessions (
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            session_id TEXT NOT NULL,
            generation INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (user_id, agent_name, session_id)
        );
        CREATE TABLE session_items (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            session_id TEXT NOT NULL,
            item TEXT NOT NULL,
            added_at TEXT NOT NULL
        );
        CREATE INDEX session_items_session ON session_items (user_id, agent_name, session_id, id);
        """,
    )


def call_log(conn: sqlite3.Connection) -> None:
    """Step 15 (issue 17): the LLM call log (:mod:`tiermem.calls`, :mod:`tiermem.storage.call_log`):
    one row per attempt of a model call, of the scope whose Memory made it; ``prompt`` and
    ``completion`` only with ``log_prompts``. Rows older than ``call_log_retention_days`` are deleted
    (by ``at``)."""
    run_script(
        conn,
        """
        CREATE TABLE call_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            user_id TEXT NOT NULL,
            agent_name TEXT NOT NULL,
            purpose TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            tokens_counted INTEGER NOT NULL,
            latency_ms REAL NOT NULL,
            outcome TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            error TEXT,
            cost REAL,
            prompt TEXT,
            completion TEXT
        );
        CREATE INDEX call_log_at ON call_log (at);
        """,
    )


def outbox_first_position(conn: sqlite3.Connection) -> None:
    """Step 16 (issue 23): an outbox item's messages start at ``first_position`` of their thread (a
    coding-agent hook queues only what its transcript added since its last read); the items queued
    before this step held the thread from its start: 0."""
    run_script(conn, "ALTER TABLE outbox ADD COLUMN first_position INTEGER NOT NULL DEFAULT 0;")


def facts_scope_category(conn: sqlite3.Connection) -> None:
    """Step 17 (issue 22): the facts of a scope by category, then in ``facts_scope_rank``'s order, so
    one category's page of the viewer's Facts list (``FactRepository.page``) and its count read that
    category's entries only, not every fact of the scope (about +4% CPU per fact written without
    embedding, measured with ``add_many``)."""
    run_script(conn, "CREATE INDEX facts_scope_category ON facts (user_id, agent_name, category, confidence,"
                     " created_at);")


#: The ``change_epochs`` topic counting a scope's search items added and removed (issue 25).
SEARCH_EPOCH_SQL = """
        CREATE TRIGGER search_docs_epoch_insert AFTER INSERT ON search_docs BEGIN
            INSERT INTO change_epochs (user_id, agent_name, topic, value) VALUES (NEW.user_id, NEW.agent_name,
                'search', 1) ON CONFLICT (user_id, agent_name, topic) DO UPDATE SET value = value + 1;
        END;
        CREATE TRIGGER search_docs_epoch_delete AFTER DELETE ON search_docs BEGIN
            INSERT INTO change_epochs (user_id, agent_name, topic, value) VALUES (OLD.user_id, OLD.agent_name,
                'search', 1) ON CONFLICT (user_id, agent_name, topic) DO UPDATE SET value = value + 1;
        END;
        INSERT INTO change_epochs (user_id, agent_name, topic, value)
            SELECT user_id, agent_name, 'search', COUNT(*) FROM search_docs GROUP BY user_id, agent_name;
        CREATE INDEX search_removed_user ON search_removed (user_id, seq);
"""


def search_epochs(conn: sqlite3.Connection) -> None:
    """Step 18 (issue 25): each scope's search items added or removed are counted (``change_epochs``,
    topic ``search``), so a process learns that a scope changed from one primary-key read and catches
    up with that scope's new rows only; the removal log by user, so that catch-up reads the user's
    removals only. Existing items count as added once."""
    run_script(conn, SEARCH_EPOCH_SQL)
