"""Per-scope change counters that triggers bump on every write to facts and summaries.

``memory_epoch`` is one primary-key lookup: the system context (R57) compares it instead of
re-rendering the memory text. Writes from other threads, processes and hosts move it too (SQLite
triggers, or the plpgsql triggers of the Postgres schema).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Database


def memory_epoch(db: Database, scope: Scope) -> int:
    """How many times the scope's facts or summaries changed (0: never)."""
    row = db.conn.execute(
        "SELECT value FROM change_epochs WHERE user_id = ? AND agent_name = ? AND topic = 'memory'",
        (scope.user_id, scope.agent_name),
    ).fetchone()
    return int(row[0]) if row else 0
