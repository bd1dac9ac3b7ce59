"""SQL for the Daily tier: journaled-message digests (R9) and days a Deep Dream consolidated (R12).

Digests live in *namespaces*: ``conv:<user>:<agent>:<conversation>`` for the messages of a
conversation, shared by every writer of the journal (:mod:`tiermem.tiers.conversation`). Older
stores may also hold ``daily:``, ``queue:`` and ``ingest:`` namespaces; retention forgets them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from tiermem.clock import utc_iso
from tiermem.storage.db import Database

_BATCH = 500  # bound the number of SQL variables per statement


class FlushHashRepository:
    """Digests (hex) of messages already journaled, per namespace."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def seen(self, namespace: str, digests: Sequence[str]) -> set[str]:
        """The subset of ``digests`` already recorded in ``namespace``."""
        found: set[str] = set()
        unique = sorted(set(digests))
        for start in range(0, len(unique), _BATCH):
            part = unique[start:start + _BATCH]
            marks = ", ".join("?" * len(part))
            rows = self.db.conn.execute(
                f"SELECT digest FROM flush_hashes WHERE namespace = ? AND digest IN ({marks})",
                [namespace, *part],
            )
            found.update(str(r[0]) for r in rows)
        return found

    def remember(self, namespace: str, digests: Iterable[str], at: datetime) -> None:
        stamp = utc_iso(at)
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO flush_hashes (namespace, digest, at) VALUES (?, ?, ?)",
                [(namespace, d, stamp) for d in set(digests)],
            )

    def forget_before(self, namespace_prefix: str, moment: datetime) -> int:
        """Drop hashes older than ``moment`` in namespaces starting with ``namespace_prefix``."""
        escaped = namespace_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        with self.db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM flush_hashes WHERE namespace LIKE ? ESCAPE '\\' AND at < ?",
                (escaped + "%", utc_iso(moment)),
            )
            return int(cur.rowcount)


class ConsolidatedDayRepository:
    """Days (``YYYY-MM-DD``) of a user's journal that a Deep Dream has consumed."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def mark(self, user_id: str, days: Iterable[str], at: datetime) -> None:
        stamp = utc_iso(at)
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO consolidated_days (user_id, day, at) VALUES (?, ?, ?)",
                [(user_id, day, stamp) for day in sorted(set(days))],
            )

    def days(self, user_id: str) -> set[str]:
        rows = self.db.conn.execute("SELECT day FROM consolidated_days WHERE user_id = ?", (user_id,))
        return {str(r[0]) for r in rows}
