"""SQL for plans: one row per plan, its record as JSON in ``data`` plus indexed scope/status columns.

A record is the plain dict a plan is stored (and exported) as: camelCase keys ``id``, ``title``,
``checklist``, ``status``, ``sessionIds``, ``userId``, ``agentName``, ``createdAt``, ``updatedAt``
(ISO-8601 text) and ``revision``. This layer stores and returns records; turning them into
:class:`~tiermem.plans.plan.Plan` objects, and checking them, is :mod:`tiermem.plans`'s business.

A partial unique index allows at most one ``active`` plan per (user, agent). Methods run on the
calling thread's connection; wrap read-modify-write sequences in ``db.transaction()``. Every write
redacts the record first (:func:`redacted`: title, checklist, session ids; R68) and returns the
record as stored. :func:`restore_plans` (export/import) writes records back exactly.
"""

from __future__ import annotations

import builtins
import json
from typing import TYPE_CHECKING, Any

from tiermem.errors import ImportConflict, StorageError
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.redact import Redactor
    from tiermem.storage.sql import Connection, Database, Row

Record = dict[str, Any]
_COLUMNS = "id, user_id, agent_name, status, revision, created_at, updated_at, data"
_ACTIVE = f"SELECT {_COLUMNS} FROM plans WHERE user_id = ? AND agent_name = ? AND status = 'active'"


def _encode(record: Record) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _decode(row: Row) -> Record:
    """The record of a stored row (``data`` is text on SQLite, ``jsonb`` read as text on Postgres)."""
    try:
        record = json.loads(row["data"])
    except ValueError as exc:
        raise StorageError(f"stored plan {row['id']} is unreadable: {exc}") from exc
    if not isinstance(record, dict):
        raise StorageError(f"stored plan {row['id']} is unreadable: its data is not an object")
    return record


def _values(record: Record) -> tuple[Any, ...]:
    """The row of a record: its indexed columns, then the record itself."""
    return (record["id"], record.get("userId", "default"), record.get("agentName", "default"), record["status"],
            record.get("revision", 1), record["createdAt"], record["updatedAt"], _encode(record))


def _insert(conn: Connection, record: Record) -> bool:
    """``False`` when the id is taken. The conflict is answered by the statement, so a Postgres
    transaction stays usable; other violations (a second active plan) still raise."""
    found = conn.execute(f"INSERT INTO plans ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                         " ON CONFLICT (id) DO NOTHING RETURNING id", _values(record)).fetchall()
    return bool(found)


def _update(conn: Connection, record: Record) -> None:
    conn.execute(
        "UPDATE plans SET user_id = ?, agent_name = ?, status = ?, revision = ?, created_at = ?, updated_at = ?,"
        " data = ? WHERE id = ?", (*_values(record)[1:], record["id"]))


def redacted(record: Record, redactor: Redactor) -> Record:
    """``record`` with its title, checklist and session ids redacted (the same dict when nothing
    changed). Redacting twice gives what redacting once gives."""
    title, checklist = redactor.text(record["title"]), redactor.text(record["checklist"])
    sessions = [redactor.ident(s) for s in record.get("sessionIds", [])]
    if title == record["title"] and checklist == record["checklist"] and sessions == record.get("sessionIds", []):
        return record
    return {**record, "title": title, "checklist": checklist, "sessionIds": sessions}


class PlanRepository:
    """Plan records of every scope in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, record: Record) -> Record | None:
        """Insert; the record as stored, or ``None`` if the id is taken (the caller draws another)."""
        record = redacted(record, self.db.redactor)
        return record if _insert(self.db.conn, record) else None

    def id_exists(self, plan_id: str) -> bool:
        return self.db.conn.execute("SELECT 1 FROM plans WHERE id = ?", (plan_id,)).fetchone() is not None

    def update(self, record: Record) -> Record:
        """Overwrite the plan ``record["id"]``; the record as stored."""
        record = redacted(record, self.db.redactor)
        _update(self.db.conn, record)
        return record

    def get(self, scope: Scope, plan_id: str) -> Record | None:
        row = self.db.conn.execute(
            f"SELECT {_COLUMNS} FROM plans WHERE id = ? AND user_id = ? AND agent_name = ?",
            (plan_id, scope.user_id, scope.agent_name),
        ).fetchone()
        return _decode(row) if row else None

    def active(self, scope: Scope) -> Record | None:
        row = self.db.conn.execute(_ACTIVE, (scope.user_id, scope.agent_name)).fetchone()
        return _decode(row) if row else None

    def active_version(self, scope: Scope) -> tuple[str, int] | None:
        """``(id, revision)`` of the active plan: a cheap epoch (one indexed lookup, no JSON)."""
        row = self.db.conn.execute(
            "SELECT id, revision FROM plans WHERE user_id = ? AND agent_name = ? AND status = 'active'",
            (scope.user_id, scope.agent_name),
        ).fetchone()
        return (str(row[0]), int(row[1])) if row else None

    def list(self, scope: Scope, status: str | None = None) -> builtins.list[Record]:
        """Newest first."""
        sql = f"SELECT {_COLUMNS} FROM plans WHERE user_id = ? AND agent_name = ?"
        args: builtins.list[Any] = [scope.user_id, scope.agent_name]
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        sql += " ORDER BY created_at DESC, id DESC"
        return [_decode(row) for row in self.db.conn.execute(sql, args)]


# --- export / import (R69) -------------------------------------------------------------------
def restore_plans(conn: Connection, records: list[Record], replace: bool) -> int:
    """Write checked records back as they are; a differing plan with the same id, or a second
    active plan in a scope, is an :class:`ImportConflict` unless ``replace`` (the imported plan wins
    and the other active plan is paused). :func:`tiermem.plans.records.restore_plans` checks and
    normalises records first."""
    for record in records:
        old = conn.execute("SELECT id, data FROM plans WHERE id = ?", (record["id"],)).fetchone()
        if old is not None:
            if _decode(old) != record and not replace:
                raise ImportConflict(f"plan {record['id']} exists with other content (use --replace)")
            conn.execute("DELETE FROM plans WHERE id = ?", (record["id"],))
        if record["status"] == "active":
            _pause_other_active(conn, record, replace)
        _insert(conn, record)
    return len(records)


def _pause_other_active(conn: Connection, record: Record, replace: bool) -> None:
    row = conn.execute(_ACTIVE, (record.get("userId", "default"), record.get("agentName", "default"))).fetchone()
    if row is None:
        return
    if not replace:
        raise ImportConflict(f"scope {record.get('userId', 'default')}/{record.get('agentName', 'default')} already"
                             f" has the active plan {row['id']}; importing the active plan {record['id']} needs"
                             " --replace")
    other = _decode(row)
    _update(conn, {**other, "status": "paused", "revision": int(other.get("revision", 1)) + 1})
