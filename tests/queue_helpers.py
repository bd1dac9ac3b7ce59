"""Helpers shared by the queue durability tests and the chaos test."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tiermem.tiers.markdown import parse_records


def thread(start: int, count: int, tag: str = "t1") -> list[dict[str, str]]:
    """Messages ``start`` .. ``start + count - 1`` of a conversation (``thread(0, n)`` is the thread so far)."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"{tag} message number {i} about topic {i * 7}"}
            for i in range(start, start + count)]


def journal_texts(root: Path) -> list[str]:
    """Every record text of every Daily file under ``root``."""
    files = sorted(root.glob("memory/*.md")) + sorted(root.glob("users/*/memory/*.md"))
    return [r.text for path in files for r in parse_records(path.read_text())]


def assert_once(root: Path, messages: list[dict[str, str]]) -> None:
    texts = journal_texts(root)
    for message in messages:
        record = f"{message['role']}: {message['content']}"
        assert texts.count(record) == 1, (record, texts.count(record))


def outbox(root: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(root / "tiermem.db") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM outbox ORDER BY id")]


def sql(root: Path, statement: str, *args: Any) -> None:
    with sqlite3.connect(root / "tiermem.db") as conn:
        conn.execute(statement, args)


def extraction(*contents: str) -> str:
    empty = {"summary": "", "shouldUpdate": False}
    return json.dumps({
        "user": {"workContext": empty, "personalContext": empty, "topOfMind": empty},
        "history": {"recentMonths": empty, "earlierContext": empty, "longTermBackground": empty},
        "newFacts": [{"content": c, "category": "knowledge", "confidence": 0.9} for c in contents],
        "factsToRemove": [],
    })
