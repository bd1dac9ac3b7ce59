"""Export a whole memory database to JSON and import it back, losslessly (R69).

Import *restores*: facts keep their ids, timestamps and confidence; nothing is re-admitted
through dedup, threshold or cap. An id that exists with other content is an
:class:`~tiermem.errors.ImportConflict` unless ``replace=True``. Parts of the store register a
:class:`Section` (facts, summaries, tombstones, audit here; plans and others in their modules).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tiermem.errors import ImportConflict, InvalidInput
from tiermem.storage.db import Database
from tiermem.storage.plans import dump_plans, restore_plans

FORMAT = "tiermem-export"
VERSION = 1


@dataclass(frozen=True)
class Section:
    """How one table (or group) is dumped to JSON rows and restored from them."""

    name: str
    dump: Callable[[sqlite3.Connection], list[dict[str, Any]]]
    restore: Callable[[sqlite3.Connection, list[dict[str, Any]], bool], int]


SECTIONS: dict[str, Section] = {}


def register_section(section: Section) -> None:
    SECTIONS[section.name] = section


def _rows(conn: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    return [dict(row) for row in conn.execute(sql)]


def _dump_facts(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return _rows(conn, "SELECT id, user_id, agent_name, content, category, confidence, created_at, updated_at,"
                       " source FROM facts ORDER BY user_id, agent_name, created_at, id")


def _restore_facts(conn: sqlite3.Connection, rows: list[dict[str, Any]], replace: bool) -> int:
    from tiermem.validate import normalise

    count = 0
    for row in rows:
        existing = conn.execute("SELECT content, user_id, agent_name FROM facts WHERE id = ?", (row["id"],)).fetchone()
        if existing is not None:
            same = (existing[0], existing[1], existing[2]) == (row["content"], row["user_id"], row["agent_name"])
            if not same and not replace:
                raise ImportConflict(f"fact {row['id']} exists with other content (use --replace)")
            conn.execute("DELETE FROM facts WHERE id = ?", (row["id"],))
        if replace:  # the restored fact wins over a same-content fact with another id
            conn.execute(
                "DELETE FROM facts WHERE user_id = ? AND agent_name = ? AND norm = ? AND id != ?",
                (row["user_id"], row["agent_name"], normalise(row["content"]), row["id"]),
            )
        conn.execute(
            "INSERT INTO facts (id, user_id, agent_name, content, norm, category, confidence, created_at,"
            " updated_at, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row["id"], row["user_id"], row["agent_name"], row["content"], normalise(row["content"]),
             row["category"], row["confidence"], row["created_at"], row["updated_at"], row.get("source")),
        )
        count += 1
    return count


def _simple_section(name: str, table: str, columns: tuple[str, ...], order: str, key: tuple[str, ...]) -> Section:
    cols = ", ".join(columns)

    def dump(conn: sqlite3.Connection) -> list[dict[str, Any]]:
        return _rows(conn, f"SELECT {cols} FROM {table} ORDER BY {order}")

    def restore(conn: sqlite3.Connection, rows: list[dict[str, Any]], replace: bool) -> int:
        marks = ", ".join("?" for _ in columns)
        where = " AND ".join(f"{k} = ?" for k in key)
        for row in rows:
            old = conn.execute(f"SELECT {cols} FROM {table} WHERE {where}", [row[k] for k in key]).fetchone()
            if old is not None and dict(old) != {c: row.get(c) for c in columns} and not replace:
                raise ImportConflict(f"{name} {[row[k] for k in key]} exists with other content (use --replace)")
            conn.execute(f"INSERT OR REPLACE INTO {table} ({cols}) VALUES ({marks})", [row.get(c) for c in columns])
        return len(rows)

    return Section(name, dump, restore)


register_section(Section("facts", _dump_facts, _restore_facts))
register_section(_simple_section(
    "summaries", "summaries", ("user_id", "agent_name", "key", "summary", "updated_at"),
    "user_id, agent_name, key", ("user_id", "agent_name", "key")))
register_section(_simple_section(
    "tombstones", "tombstones", ("user_id", "agent_name", "norm", "content", "reason", "at"),
    "user_id, agent_name, norm", ("user_id", "agent_name", "norm")))
register_section(_simple_section(
    "audit", "audit", ("id", "user_id", "agent_name", "at", "action", "fact_id", "content", "reason", "source",
                       "run_id"), "id", ("id",)))
register_section(Section("plans", dump_plans, restore_plans))
register_section(_simple_section(
    "core_versions", "core_versions", ("id", "user_id", "created_at", "cause", "content", "existed", "sha256"),
    "id", ("id",)))
register_section(_simple_section(
    "dream_state", "dream_state", ("user_id", "daily_sha256", "days", "at"), "user_id", ("user_id",)))


def export_data(db: Database) -> dict[str, Any]:
    """Everything registered, from every scope, as one JSON-ready dict."""
    conn = db.conn
    conn.execute("BEGIN")  # one consistent snapshot
    try:
        data: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        for section in SECTIONS.values():
            data[section.name] = section.dump(conn)
    finally:
        conn.execute("COMMIT")
    return data


def import_data(db: Database, data: Any, replace: bool = False) -> dict[str, int]:
    """Restore an export; all or nothing. Returns rows restored per section."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidInput(f"not a tiermem export (expected format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise InvalidInput(f"unsupported export version {data.get('version')!r}")
    counts: dict[str, int] = {}
    with db.transaction() as conn:
        for name, section in SECTIONS.items():
            rows = data.get(name, [])
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise InvalidInput(f"export section {name!r} must be a list of objects")
            try:
                counts[name] = section.restore(conn, rows, replace)
            except (KeyError, TypeError, sqlite3.IntegrityError) as exc:
                raise InvalidInput(f"export section {name!r} is malformed: {exc}") from exc
    return counts
