"""SQL for the durable update queue (R34) and the per-thread hashes of extracted messages (R28).

An item is a thread's messages so far, keyed by (thread_id, user_id, agent_name). At most one
*pending* item exists per key: a newer ``put`` replaces its messages (the newer list contains the
older one, so no turn is lost). Items move pending -> processing -> (deleted on success |
pending again with ``attempts + 1`` | dead after too many failures).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tiermem.clock import parse_utc, utc_iso
from tiermem.storage.db import Database
from tiermem.types import Scope

_ME = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class OutboxItem:
    """One queued update."""

    id: int
    thread_id: str
    scope: Scope
    messages: list[dict[str, Any]]
    status: str
    attempts: int
    last_error: str | None
    enqueued_at: datetime
    not_before: datetime


def _item(row: Any) -> OutboxItem:
    return OutboxItem(row["id"], row["thread_id"], Scope(row["user_id"], row["agent_name"]),
                      json.loads(row["messages"]), row["status"], row["attempts"], row["last_error"],
                      parse_utc(row["enqueued_at"]), parse_utc(row["not_before"]))


def _alive(claimer: str | None) -> bool:
    """Is the process that claimed an item still running (on this host)?"""
    if not claimer:
        return False
    host, _, pid = claimer.rpartition(":")
    if host != socket.gethostname():
        return True  # another host: trust its lease
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


class OutboxRepository:
    """The outbox table of one database (all scopes)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, thread_id: str, scope: Scope, messages: list[dict[str, Any]], now: datetime) -> int:
        """Insert, or replace the messages of the pending item with the same key; committed on return."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO outbox (thread_id, user_id, agent_name, messages, status, enqueued_at, not_before)"
                " VALUES (?, ?, ?, ?, 'pending', ?, ?)"
                " ON CONFLICT (thread_id, user_id, agent_name) WHERE status = 'pending'"
                " DO UPDATE SET messages = excluded.messages, enqueued_at = excluded.enqueued_at,"
                " not_before = CASE WHEN attempts = 0 THEN excluded.not_before ELSE not_before END RETURNING id",
                (thread_id, scope.user_id, scope.agent_name, json.dumps(messages, ensure_ascii=False),
                 utc_iso(now), utc_iso(now)),
            ).fetchone()
        return int(row[0])

    def claim(self, now: datetime, ignore_backoff: bool = False) -> OutboxItem | None:
        """Take the oldest due pending item for this process (atomic across processes)."""
        with self.db.transaction() as conn:
            sql = "SELECT * FROM outbox WHERE status = 'pending'"
            args: list[str] = []
            if not ignore_backoff:
                sql += " AND not_before <= ?"
                args.append(utc_iso(now))
            row = conn.execute(sql + " ORDER BY enqueued_at, id LIMIT 1", args).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE outbox SET status = 'processing', claimed_by = ?, claimed_at = ? WHERE id = ?",
                         (_ME, utc_iso(now), row["id"]))
        return _item(row)

    def done(self, item_id: int) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM outbox WHERE id = ?", (item_id,))

    def defer(self, item_id: int, until: datetime) -> None:
        """Back to pending, not before ``until``, without counting a failure."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE outbox SET status = 'pending', not_before = ?, claimed_by = NULL, claimed_at = NULL"
                         " WHERE id = ?", (utc_iso(until), item_id))

    def release(self, item_id: int) -> None:
        """Give a claimed item back untouched (pending again)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE outbox SET status = 'pending', claimed_by = NULL, claimed_at = NULL WHERE id = ?",
                         (item_id,))

    def failed(self, item: OutboxItem, error: str, retry_at: datetime, max_attempts: int) -> str:
        """Record a failure; the item becomes pending again (or dead). Returns the new status."""
        attempts = item.attempts + 1
        status = "dead" if attempts >= max_attempts else "pending"
        with self.db.transaction() as conn:
            newer = conn.execute(
                "SELECT id FROM outbox WHERE thread_id = ? AND user_id = ? AND agent_name = ? AND status = 'pending'",
                (item.thread_id, item.scope.user_id, item.scope.agent_name),
            ).fetchone()
            if newer is not None and status == "pending":
                # a newer item for the thread arrived meanwhile; it holds these messages too
                conn.execute("UPDATE outbox SET attempts = MAX(attempts, ?), last_error = ? WHERE id = ?",
                             (attempts, error, newer[0]))
                conn.execute("DELETE FROM outbox WHERE id = ?", (item.id,))
                return status
            conn.execute(
                "UPDATE outbox SET status = ?, attempts = ?, last_error = ?, not_before = ?, claimed_by = NULL,"
                " claimed_at = NULL WHERE id = ?",
                (status, attempts, error, utc_iso(retry_at), item.id),
            )
        return status

    def recover(self) -> int:
        """Items left 'processing' by a process that died go back to pending."""
        with self.db.transaction() as conn:
            rows = conn.execute("SELECT id, claimed_by FROM outbox WHERE status = 'processing'").fetchall()
            stale = [r["id"] for r in rows if not _alive(r["claimed_by"])]
            for item_id in stale:
                conn.execute("UPDATE outbox SET status = 'pending', claimed_by = NULL WHERE id = ?", (item_id,))
        return len(stale)

    def retry_dead(self, now: datetime) -> int:
        with self.db.transaction() as conn:
            cur = conn.execute("UPDATE outbox SET status = 'pending', attempts = 0, not_before = ?"
                               " WHERE status = 'dead'"
                               " AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.status = 'pending'"
                               " AND o.thread_id = outbox.thread_id AND o.user_id = outbox.user_id"
                               " AND o.agent_name = outbox.agent_name)", (utc_iso(now),))
        return cur.rowcount

    def items(self, status: str | None = None, scope: Scope | None = None) -> list[OutboxItem]:
        sql = "SELECT * FROM outbox WHERE 1 = 1"
        args: list[str] = []
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        if scope is not None:
            sql += " AND user_id = ? AND agent_name = ?"
            args += [scope.user_id, scope.agent_name]
        return [_item(r) for r in self.db.conn.execute(sql + " ORDER BY enqueued_at, id", args)]

    def backlog(self) -> dict[str, int]:
        """``queue_pending`` (pending or being processed) and ``queue_dead`` (dead-lettered)."""
        counts = self.counts()
        return {"queue_pending": counts.get("pending", 0) + counts.get("processing", 0),
                "queue_dead": counts.get("dead", 0)}

    def counts(self) -> dict[str, int]:
        rows = self.db.conn.execute("SELECT status, COUNT(*) FROM outbox GROUP BY status")
        return {r[0]: int(r[1]) for r in rows}

    # --- hashes of messages already extracted (R28; separate from the Daily flush hashes) ---
    def extracted(self, scope: Scope, thread_id: str) -> set[str]:
        rows = self.db.conn.execute(
            "SELECT md5 FROM extracted_hashes WHERE user_id = ? AND agent_name = ? AND thread_id = ?",
            (scope.user_id, scope.agent_name, thread_id),
        )
        return {r[0] for r in rows}

    def mark_extracted(self, scope: Scope, thread_id: str, hashes: list[str], now: datetime) -> None:
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO extracted_hashes (user_id, agent_name, thread_id, md5, at)"
                " VALUES (?, ?, ?, ?, ?)",
                [(scope.user_id, scope.agent_name, thread_id, h, utc_iso(now)) for h in hashes],
            )
