"""SQL for plans: one row per plan, the plan as JSON in ``data`` plus indexed scope/status columns.

A partial unique index allows at most one ``active`` plan per (user, agent). Methods run on the
calling thread's connection; wrap read-modify-write sequences in ``db.transaction()``. Every write
redacts the plan first (:func:`redacted`: title, checklist, session ids; R68).
The export section (:func:`dump_plans`, :func:`restore_plans`) writes the stored records back exactly.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from dataclasses import replace as evolve
from typing import Any

from tiermem.clock import utc_iso
from tiermem.errors import ImportConflict, StorageError
from tiermem.plans.plan import Plan
from tiermem.redact import Redactor
from tiermem.storage.db import Database
from tiermem.types import Scope

_COLUMNS = "id, user_id, agent_name, status, revision, created_at, updated_at, data"


def _encode(plan: Plan) -> str:
    return json.dumps(plan.to_record(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _decode(row: sqlite3.Row) -> Plan:
    try:
        return Plan.from_record(json.loads(row["data"]))
    except ValueError as exc:
        raise StorageError(f"stored plan {row['id']} is unreadable: {exc}") from exc


def _values(plan: Plan) -> tuple[Any, ...]:
    return (plan.id, plan.user_id, plan.agent_name, plan.status, plan.revision, utc_iso(plan.created_at),
            utc_iso(plan.updated_at), _encode(plan))


def _insert(conn: sqlite3.Connection, plan: Plan) -> None:
    conn.execute(f"INSERT INTO plans ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", _values(plan))


def _update(conn: sqlite3.Connection, plan: Plan) -> None:
    conn.execute(
        "UPDATE plans SET user_id = ?, agent_name = ?, status = ?, revision = ?, created_at = ?, updated_at = ?,"
        " data = ? WHERE id = ?", (*_values(plan)[1:], plan.id))


def redacted(plan: Plan, redactor: Redactor) -> Plan:
    """``plan`` with its title, checklist and session ids redacted, checked again as a stored
    record must be (``InvalidInput`` when a redacted text no longer fits, e.g. a longer title)."""
    clean = evolve(plan, title=redactor.text(plan.title), checklist=redactor.text(plan.checklist),
                   session_ids=tuple(redactor.ident(s) for s in plan.session_ids))
    return plan if clean == plan else Plan.from_record(clean.to_record())


class PlanRepository:
    """Plans of every scope in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, plan: Plan) -> bool:
        """Insert; ``False`` if the id is taken (the caller draws another)."""
        try:
            _insert(self.db.conn, redacted(plan, self.db.redactor))
        except sqlite3.IntegrityError:
            if self.id_exists(plan.id):
                return False
            raise
        return True

    def id_exists(self, plan_id: str) -> bool:
        return self.db.conn.execute("SELECT 1 FROM plans WHERE id = ?", (plan_id,)).fetchone() is not None

    def update(self, plan: Plan) -> None:
        _update(self.db.conn, redacted(plan, self.db.redactor))

    def get(self, scope: Scope, plan_id: str) -> Plan | None:
        row = self.db.conn.execute(
            f"SELECT {_COLUMNS} FROM plans WHERE id = ? AND user_id = ? AND agent_name = ?",
            (plan_id, scope.user_id, scope.agent_name),
        ).fetchone()
        return _decode(row) if row else None

    def active(self, scope: Scope) -> Plan | None:
        row = self.db.conn.execute(
            f"SELECT {_COLUMNS} FROM plans WHERE user_id = ? AND agent_name = ? AND status = 'active'",
            (scope.user_id, scope.agent_name),
        ).fetchone()
        return _decode(row) if row else None

    def active_version(self, scope: Scope) -> tuple[str, int] | None:
        """``(id, revision)`` of the active plan: a cheap epoch (one indexed lookup, no JSON)."""
        row = self.db.conn.execute(
            "SELECT id, revision FROM plans WHERE user_id = ? AND agent_name = ? AND status = 'active'",
            (scope.user_id, scope.agent_name),
        ).fetchone()
        return (str(row[0]), int(row[1])) if row else None

    def list(self, scope: Scope, status: str | None = None) -> builtins.list[Plan]:
        """Newest first."""
        sql = f"SELECT {_COLUMNS} FROM plans WHERE user_id = ? AND agent_name = ?"
        args: builtins.list[Any] = [scope.user_id, scope.agent_name]
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        sql += " ORDER BY created_at DESC, id DESC"
        return [_decode(row) for row in self.db.conn.execute(sql, args)]


# --- export / import (R69) -------------------------------------------------------------------
def dump_plans(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every plan of every scope as its stored record."""
    rows = conn.execute("SELECT data FROM plans ORDER BY user_id, agent_name, created_at, id")
    return [json.loads(row[0]) for row in rows]


def restore_plans(conn: sqlite3.Connection, rows: list[dict[str, Any]], replace: bool) -> int:
    """Write the records back as they were; a differing plan with the same id, or a second active
    plan in a scope, is an :class:`ImportConflict` unless ``replace`` (the imported plan wins and
    the other active plan is paused)."""
    for row in rows:
        plan = Plan.from_record(row)
        old = conn.execute("SELECT data FROM plans WHERE id = ?", (plan.id,)).fetchone()
        if old is not None:
            if json.loads(old[0]) != plan.to_record() and not replace:
                raise ImportConflict(f"plan {plan.id} exists with other content (use --replace)")
            conn.execute("DELETE FROM plans WHERE id = ?", (plan.id,))
        if plan.status == "active":
            _pause_other_active(conn, plan, replace)
        _insert(conn, plan)
    return len(rows)


def _pause_other_active(conn: sqlite3.Connection, plan: Plan, replace: bool) -> None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM plans WHERE user_id = ? AND agent_name = ? AND status = 'active'",
        (plan.user_id, plan.agent_name),
    ).fetchone()
    if row is None:
        return
    if not replace:
        raise ImportConflict(f"scope {plan.user_id}/{plan.agent_name} already has the active plan {row['id']};"
                             f" importing the active plan {plan.id} needs --replace")
    other = _decode(row)
    _update(conn, evolve(other, status="paused", revision=other.revision + 1))
