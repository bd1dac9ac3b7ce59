"""Helpers shared by the queue durability tests and the chaos test.

They read and write the store the way the test's backend keeps it (SQLite under the root, or the
PostgreSQL schema ``TIERMEM_DATABASE_URL`` names), through tiermem's own ``Database``; Daily
records are read from the files after the mirror is refreshed (a no-op on SQLite, where the files
are the store).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tiermem.config import load_settings
from tiermem.paths import DEFAULT_USER, USERS_DIR, UserPaths
from tiermem.storage.backend import open_database
from tiermem.storage.sql import Database
from tiermem.tiers.markdown import parse_records


def thread(start: int, count: int, tag: str = "t1") -> list[dict[str, str]]:
    """Messages ``start`` .. ``start + count - 1`` of a conversation (``thread(0, n)`` is the thread so far)."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"{tag} message number {i} about topic {i * 7}"}
            for i in range(start, start + count)]


@contextmanager
def store(root: Path) -> Iterator[Database]:
    """The database of the store at ``root`` (another connection than the test's Memory uses)."""
    db = open_database(root.resolve(), load_settings(root.resolve()))
    try:
        yield db
    finally:
        db.close()


def refresh_mirror(root: Path) -> None:
    """Rewrite the local Daily files and MEMORY.md of every user under ``root`` from the store."""
    users = [DEFAULT_USER] + sorted(p.name for p in (root / USERS_DIR).glob("*") if p.is_dir())
    with store(root) as db:
        for user in users:
            db.parts.files(db, UserPaths.for_user(root, user)).refresh()


def files_are_the_store(root: Path) -> bool:
    """True when the Daily files under ``root`` are the store itself (SQLite): a journal append
    and the record of it are two steps there. Where they live in the database (PostgreSQL) both
    are one transaction, so a crash between them leaves neither."""
    with store(root) as db:
        return db.parts.files(db, UserPaths.for_user(root, DEFAULT_USER)).durable_files


def day_text(root: Path, day: str) -> str:
    """The default user's Daily file of ``day`` (YYYY-MM-DD), as the store holds it."""
    refresh_mirror(root)
    return (root / "memory" / f"{day}.md").read_text(encoding="utf-8")


def journal_texts(root: Path) -> list[str]:
    """Every record text of every Daily file under ``root``."""
    refresh_mirror(root)
    files = sorted(root.glob("memory/*.md")) + sorted(root.glob("users/*/memory/*.md"))
    return [r.text for path in files for r in parse_records(path.read_text())]


def assert_once(root: Path, messages: list[dict[str, str]]) -> None:
    texts = journal_texts(root)
    for message in messages:
        record = f"{message['role']}: {message['content']}"
        assert texts.count(record) == 1, (record, texts.count(record))


def rows(root: Path, query: str, *args: Any) -> list[dict[str, Any]]:
    """The rows of ``query`` (``?`` placeholders) as dicts."""
    with store(root) as db:
        return [dict(zip(row.keys(), row, strict=True)) for row in db.rows(query, args)]


def outbox(root: Path) -> list[dict[str, Any]]:
    return rows(root, "SELECT * FROM outbox ORDER BY id")


def sql(root: Path, statement: str, *args: Any) -> None:
    """Run one write statement (``?`` placeholders), committed on return."""
    with store(root) as db, db.transaction() as conn:
        conn.execute(statement, args)


def extraction(*contents: str) -> str:
    empty = {"summary": "", "shouldUpdate": False}
    return json.dumps({
        "user": {"workContext": empty, "personalContext": empty, "topOfMind": empty},
        "history": {"recentMonths": empty, "earlierContext": empty, "longTermBackground": empty},
        "newFacts": [{"content": c, "category": "knowledge", "confidence": 0.9} for c in contents],
        "factsToRemove": [],
    })
