"""SQL for Deep Dream: versions of ``MEMORY.md`` (R41) and the last processed daily hash (R38).

Both are per user, like the Markdown files. A *version* is the text a rewrite replaced, kept so
that ``rollback`` can restore it; its ``cause`` says what replaced it: a ``dream``, a
``rollback``, an ``edit`` (``tiermem core edit``) and, where ``MEMORY.md`` lives in the database
(PostgreSQL), also a plain ``write`` or a ``hand edit`` of the mirrored file — there every text
is kept. ``existed`` tells whether there was a text at all.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tiermem.clock import parse_utc, utc_iso
from tiermem.storage.sql import ROWS, Database, Row, user_key


@dataclass(frozen=True)
class CoreVersion:
    """One kept ``MEMORY.md`` text."""

    id: int
    user_id: str
    created_at: datetime
    cause: str  # what replaced this text: "dream", "rollback", "edit", "write", "hand edit"
    content: str
    existed: bool
    sha256: str

    @property
    def bullets(self) -> int:
        return sum(1 for line in self.content.split("\n") if line.lstrip().startswith(("- ", "* ", "+ ")))

    def to_dict(self, with_content: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "userId": self.user_id,
            "createdAt": utc_iso(self.created_at),
            "cause": self.cause,
            "existed": self.existed,
            "bullets": self.bullets,
            "sha256": self.sha256,
        }
        if with_content:
            data["content"] = self.content
        return data


@dataclass(frozen=True)
class DreamState:
    """What the last successful dream of a user consumed."""

    daily_sha256: str
    days: list[str]
    at: datetime


_COLUMNS = "id, user_id, created_at, cause, content, existed, sha256"


def _version(row: Row) -> CoreVersion:
    return CoreVersion(int(row["id"]), row["user_id"], parse_utc(row["created_at"]), row["cause"],
                       row["content"], bool(row["existed"]), row["sha256"])


class DreamRepository:
    """Versions and dream state of every user in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def save_version(self, user_id: str, content: str, existed: bool, cause: str, at: datetime) -> int:
        """Keep ``content`` (redacted, R68: a hand edit's secret is not kept) as a version; returns its id."""
        content = self.db.redactor.text(content)
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        with self.db.transaction(user_key(user_id)) as conn:
            cur = conn.execute(
                "INSERT INTO core_versions (user_id, created_at, cause, content, existed, sha256)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (user_id, utc_iso(at), cause, content, int(existed), digest),
            )
            return int(cur.fetchone()[0])

    def versions(self, user_id: str) -> list[CoreVersion]:
        """Newest first."""
        rows = self.db.conn.execute(
            f"SELECT {_COLUMNS} FROM core_versions WHERE user_id = ? ORDER BY id DESC", (user_id,))
        return [_version(r) for r in rows]

    def get(self, user_id: str, version_id: int) -> CoreVersion | None:
        row = self.db.conn.execute(
            f"SELECT {_COLUMNS} FROM core_versions WHERE user_id = ? AND id = ?", (user_id, version_id)).fetchone()
        return _version(row) if row else None

    def latest(self, user_id: str) -> CoreVersion | None:
        row = self.db.conn.execute(
            f"SELECT {_COLUMNS} FROM core_versions WHERE user_id = ? ORDER BY id DESC LIMIT 1", (user_id,)).fetchone()
        return _version(row) if row else None

    def has_text(self, user_id: str, sha256: str) -> bool:
        """Whether a kept version of ``user_id`` has this SHA-256 (of its UTF-8 text)."""
        row = self.db.conn.execute(
            "SELECT 1 FROM core_versions WHERE user_id = ? AND sha256 = ? LIMIT 1", (user_id, sha256)).fetchone()
        return row is not None

    def state(self, user_id: str) -> DreamState | None:
        row = self.db.conn.execute(
            "SELECT daily_sha256, days, at FROM dream_state WHERE user_id = ?", (user_id,)).fetchone()
        if row is None:
            return None
        return DreamState(row[0], [d for d in str(row[1]).split(",") if d], parse_utc(row[2]))

    def set_state(self, user_id: str, daily_sha256: str, days: list[str], at: datetime) -> None:
        with self.db.transaction(ROWS) as conn:
            conn.execute(
                "INSERT INTO dream_state (user_id, daily_sha256, days, at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (user_id) DO UPDATE SET daily_sha256 = excluded.daily_sha256,"
                " days = excluded.days, at = excluded.at",
                (user_id, daily_sha256, ",".join(days), utc_iso(at)),
            )
