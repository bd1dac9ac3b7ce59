"""SQLite's claim of an update-queue item: under the write lock (``BEGIN IMMEDIATE``), so
claimers in every process take turns and no two take one item."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiermem.storage.outbox import claim_sql

if TYPE_CHECKING:
    from tiermem.storage.outbox import ClaimRequest
    from tiermem.storage.sql import Database


def claim(db: Database, request: ClaimRequest) -> Any:
    """The claimed row of the oldest due pending item, or None."""
    sql, args = claim_sql(request)
    with db.transaction() as conn:
        return conn.execute(sql, args).fetchone()
