"""PostgreSQL's claim of an update-queue item: one statement that locks the oldest due pending
row with ``FOR UPDATE SKIP LOCKED`` and marks it claimed. Claimers on any number of hosts take
different items at once; none waits for another's item or for the store's write lock (the
statement is its own transaction). A row a writer holds at that moment (``put`` replacing its
messages) is skipped: the claimer takes the next one, or finds nothing and comes back later."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiermem.storage.outbox import claim_sql

if TYPE_CHECKING:
    from tiermem.storage.outbox import ClaimRequest
    from tiermem.storage.sql import Database

ROW_LOCK = " FOR UPDATE SKIP LOCKED"


def claim(db: Database, request: ClaimRequest) -> Any:
    """The claimed row of the oldest due pending item, or None."""
    sql, args = claim_sql(request, ROW_LOCK)
    return db.conn.execute(sql, args).fetchone()
