"""SQL for agent SDK sessions (:mod:`tiermem.integrations.openai_agents`): items kept as added.

A framework's session replays its history to the model on every run, so an item must come back
exactly as it was added: each item is one row of ``session_items`` holding its JSON text as given
(``text`` on both backends, never ``jsonb``, which would reorder keys), ordered by ``id``, with
the secrets in its string leaves redacted as every write is (R68, ``redact_secrets``;
:func:`tiermem.redact.redact_json`: an item without secrets keeps its exact text). The session id
is an id: one holding a secret is stored as :func:`tiermem.redact.redact_id` makes it, and every
method maps the id it is given the same way. These
rows are the session's history, not memory: the *text* of the conversation reaches the Daily
journal and the update queue through the normal, redacting path (``mem.queue.add``).

``agent_sessions`` holds one row per session with its **generation**: :meth:`clear` deletes the
items and moves the generation on, so the conversation that follows is journaled as a new one
(the journal dedups messages by their position in a conversation; after a clear, positions start
at 0 again).

One SQL text serves SQLite and PostgreSQL; every method runs in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from tiermem.clock import utc_iso
from tiermem.storage.sql import ROWS, WriteKey
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Connection, Database

_WHERE = "user_id = ? AND agent_name = ? AND session_id = ?"
_T = TypeVar("_T")


@dataclass(frozen=True)
class SessionHistory:
    """A session's items (JSON texts, oldest first) and its generation."""

    items: list[str]
    generation: int


class SessionItemRepository:
    """The session tables of one database (every scope; each call names its scope and session)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _key(self, scope: Scope, session_id: str) -> tuple[str, str, str]:
        return scope.user_id, scope.agent_name, self.db.redactor.ident(session_id)  # as stored

    def append(self, scope: Scope, session_id: str, items: list[str], now: datetime,
               plan: Callable[[SessionHistory], _T]) -> _T:
        """Add ``items`` (JSON texts) after the session's others, in one transaction that first reads
        the history before them and hands it to ``plan``; ``plan``'s answer is returned, and when it
        raises nothing is written. (The session's row is written first: on PostgreSQL its lock keeps
        two appends to one session in order; SQLite's write transactions are serial anyway.)"""
        at = utc_iso(now)
        key = self._key(scope, session_id)
        items = [self.db.redactor.json_text(item) for item in items]
        with self.db.transaction(WriteKey.named("session", *key)) as conn:
            _touch(conn, key, at)
            answer = plan(SessionHistory(_items(conn, key), _generation(conn, key)))
            conn.executemany("INSERT INTO session_items (user_id, agent_name, session_id, item, added_at)"
                             " VALUES (?, ?, ?, ?, ?)", [(*key, item, at) for item in items])
        return answer

    def history(self, scope: Scope, session_id: str) -> SessionHistory:
        """Every item of the session, oldest first, and its generation (0 for a new session)."""
        key = self._key(scope, session_id)
        with self.db.transaction(ROWS) as conn:  # one consistent read
            return SessionHistory(_items(conn, key), _generation(conn, key))

    def latest(self, scope: Scope, session_id: str, limit: int) -> list[str]:
        """The ``limit`` most recent items, oldest first."""
        rows = self.db.rows(f"SELECT item FROM session_items WHERE {_WHERE} ORDER BY id DESC LIMIT ?",
                            (*self._key(scope, session_id), limit), what="reading session items")
        return [str(row[0]) for row in reversed(rows)]

    def pop(self, scope: Scope, session_id: str) -> str | None:
        """Remove and return the most recent item (``None`` when the session has none)."""
        key = self._key(scope, session_id)
        with self.db.transaction(WriteKey.named("session", *key)) as conn:
            row = conn.execute(f"DELETE FROM session_items WHERE id = (SELECT MAX(id) FROM session_items"
                               f" WHERE {_WHERE}) RETURNING item", key).fetchone()
        return None if row is None else str(row[0])

    def clear(self, scope: Scope, session_id: str, now: datetime) -> int:
        """Delete the session's items and start its next generation; returns the items deleted."""
        key = self._key(scope, session_id)
        with self.db.transaction(WriteKey.named("session", *key)) as conn:
            _touch(conn, key, utc_iso(now))
            deleted = conn.execute(f"DELETE FROM session_items WHERE {_WHERE}", key).rowcount
            conn.execute(f"UPDATE agent_sessions SET generation = generation + 1 WHERE {_WHERE}", key)
        return int(deleted)

    def sessions(self, scope: Scope) -> list[str]:
        """The ids (as stored) of the scope's sessions that hold items, in id order."""
        rows = self.db.rows("SELECT DISTINCT session_id FROM session_items WHERE user_id = ? AND agent_name = ?"
                            " ORDER BY session_id", (scope.user_id, scope.agent_name), what="listing sessions")
        return [str(row[0]) for row in rows]


def _touch(conn: Connection, key: tuple[str, str, str], at: str) -> None:
    conn.execute("INSERT INTO agent_sessions (user_id, agent_name, session_id, generation, created_at, updated_at)"
                 " VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (user_id, agent_name, session_id)"
                 " DO UPDATE SET updated_at = excluded.updated_at", (*key, at, at))


def _items(conn: Connection, key: tuple[str, str, str]) -> list[str]:
    return [str(row[0]) for row in conn.execute(f"SELECT item FROM session_items WHERE {_WHERE} ORDER BY id", key)]


def _generation(conn: Connection, key: tuple[str, str, str]) -> int:
    row = conn.execute(f"SELECT generation FROM agent_sessions WHERE {_WHERE}", key).fetchone()
    return 0 if row is None else int(row[0])
