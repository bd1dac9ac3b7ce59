"""Schema migrations: a plain ordered list of small steps; ``PRAGMA user_version`` records progress.

Append new steps at the end; never edit a step that has shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Execute ``script`` statement by statement inside the current transaction.

    (``executescript`` would COMMIT first.) Statements are split where
    ``sqlite3.complete_statement`` says one ends, so trigger bodies stay whole.
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            conn.execute(buffer)
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buffer[:80]!r}")


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


MIGRATIONS: list[Migration] = [
    _facts,
    _chunks,
]


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the steps this database has not seen yet (call inside a write transaction)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
        step(conn)
        conn.execute(f"PRAGMA user_version = {number}")
