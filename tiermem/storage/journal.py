"""SQL for the Daily tier: journaled-message digests (R9) and the prefix of each day file a Deep
Dream consolidated (R12).

Digests live in *namespaces*: ``conv:<user>:<agent>:<conversation>`` for the messages of a
conversation, shared by every writer of the journal (:mod:`tiermem.tiers.conversation`). Older
stores may also hold ``daily:``, ``queue:`` and ``ingest:`` namespaces; retention forgets them.

A *journal intent* (table ``journal_intents``) is the write-ahead half of a conversation write:
committed before the Daily append, it says which blocks (SHA-256 and byte length of each block's
text, and the digests of the messages in it) are about to be appended to which day's file, from
which byte offset. :meth:`FlushHashRepository.remember` records the digests and deletes the
intent in one transaction. An intent still present when the journal lock is next taken belongs
to a writer that died (or failed) in between; the next writer looks at the file and settles it
(:func:`tiermem.tiers.conversation.settle_intents`). Intents hold no message text. Where the Daily
files are rows of the same database (PostgreSQL), the append and the record commit in one
transaction and a write announces no intent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tiermem.clock import utc_iso
from tiermem.storage.sql import ROWS, Database

_BATCH = 500  # bound the number of SQL variables per statement
_INTENTS = ('SELECT id, user_id, namespace, day, "offset", blocks FROM journal_intents WHERE user_id = ?'
            " ORDER BY id")


@dataclass(frozen=True)
class IntentBlock:
    """One block an intent announced: its text's SHA-256 (hex) and UTF-8 length, its first line
    (``## <kind> (HH:MM)``, no message text) and the digests of the messages it journals."""

    sha256: str
    length: int
    head: str
    digests: list[str]


@dataclass(frozen=True)
class JournalIntent:
    """A Daily append announced before it was made (see the module docstring)."""

    id: int
    user_id: str
    namespace: str
    day: str  # YYYY-MM-DD: the file is the user's memory/<day>.md
    offset: int  # the file's size in bytes before the append
    blocks: list[IntentBlock]


class FlushHashRepository:
    """Digests (hex) of messages already journaled, per namespace."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def seen(self, namespace: str, digests: Sequence[str]) -> set[str]:
        """The subset of ``digests`` already recorded in ``namespace``."""
        found: set[str] = set()
        for sql, args in self._seen_reads(namespace, digests):
            found.update(str(r[0]) for r in self.db.conn.execute(sql, args))
        return found

    def prefetch_seen(self, namespace: str, digests: Sequence[str]) -> None:
        """Send :meth:`seen`'s reads ahead (:meth:`~tiermem.storage.sql.Database.prefetch`)."""
        for sql, args in self._seen_reads(namespace, digests):
            self.db.prefetch(sql, args)

    def _seen_reads(self, namespace: str, digests: Sequence[str]) -> list[tuple[str, list[Any]]]:
        namespace = self.db.redactor.ident(namespace)  # a conversation id may hold a secret (R68)
        unique = sorted(set(digests))
        reads: list[tuple[str, list[Any]]] = []
        for start in range(0, len(unique), _BATCH):
            among, args = self.db.parts.ids_in("digest", unique[start:start + _BATCH])
            reads.append((f"SELECT digest FROM flush_hashes WHERE namespace = ? AND {among}", [namespace, *args]))
        return reads

    def remember(self, namespace: str, digests: Iterable[str], at: datetime, intent: int | None = None) -> None:
        """Record ``digests`` as journaled; with ``intent``, that intent is cleared in the same
        transaction (its append is done and now recorded)."""
        namespace = self.db.redactor.ident(namespace)
        stamp = utc_iso(at)
        rows = [(namespace, d, stamp) for d in sorted(set(digests))]
        with self.db.transaction(ROWS):  # the writes go with COMMIT (Database.defer)
            if rows:
                self.db.defer("INSERT INTO flush_hashes (namespace, digest, at) VALUES (?, ?, ?)"
                              " ON CONFLICT (namespace, digest) DO NOTHING", rows, many=True)
            if intent is not None:
                self.db.defer("DELETE FROM journal_intents WHERE id = ?", (intent,))

    # --- write-ahead intents of Daily appends ----------------------------------------------
    def announce(self, user_id: str, namespace: str, day: str, offset: int, blocks: Sequence[IntentBlock],
                 at: datetime) -> int:
        """Commit the intent to append ``blocks`` to ``day``'s file from byte ``offset``; returns its id."""
        data = json.dumps([[b.sha256, b.length, b.head, b.digests] for b in blocks])
        namespace = self.db.redactor.ident(namespace)
        with self.db.transaction(ROWS) as conn:
            cur = conn.execute(
                'INSERT INTO journal_intents (user_id, namespace, day, "offset", blocks, at) VALUES (?, ?, ?, ?, ?, ?)'
                " RETURNING id",
                (user_id, namespace, day, offset, data, utc_iso(at)),
            )
            return int(cur.fetchone()[0])

    def intents(self, user_id: str) -> list[JournalIntent]:
        """The unsettled intents of ``user_id``'s journal, oldest first."""
        rows = self.db.conn.execute(_INTENTS, (user_id,))
        return [JournalIntent(r[0], r[1], r[2], r[3], int(r[4]),
                              [IntentBlock(str(b[0]), int(b[1]), str(b[2]), [str(d) for d in b[3]])
                               for b in json.loads(r[5])])
                for r in rows]

    def prefetch_intents(self, user_id: str) -> None:
        """Send :meth:`intents`' read ahead (:meth:`~tiermem.storage.sql.Database.prefetch`)."""
        self.db.prefetch(_INTENTS, (user_id,))

    def cancel(self, intent: int) -> None:
        """Drop an intent whose append did not happen."""
        with self.db.transaction(ROWS) as conn:
            conn.execute("DELETE FROM journal_intents WHERE id = ?", (intent,))

    def forget_before(self, namespace_prefix: str, moment: datetime) -> int:
        """Drop hashes older than ``moment`` in namespaces starting with ``namespace_prefix``."""
        escaped = namespace_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        with self.db.transaction(ROWS) as conn:
            cur = conn.execute(
                "DELETE FROM flush_hashes WHERE namespace LIKE ? ESCAPE '\\' AND at < ?",
                (escaped + "%", utc_iso(moment)),
            )
            return int(cur.rowcount)


@dataclass(frozen=True)
class PrefixMark:
    """What a Deep Dream read of one day file (R12): its first ``offset`` bytes, whose SHA-256 is
    ``sha256``. The day is consolidated while this prefix is the whole file."""

    day: str  # YYYY-MM-DD
    offset: int
    sha256: str
    at: str = ""  # when the dream read it (UTC ISO); filled in by the repository


class ConsolidatedDayRepository:
    """The consolidated prefix of each day of a user's journal (table ``consolidated_prefix``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def mark(self, user_id: str, marks: Iterable[PrefixMark], at: datetime) -> None:
        """Record ``marks`` (a newer mark of a day replaces the older one)."""
        stamp = utc_iso(at)
        with self.db.transaction(ROWS) as conn:
            conn.executemany(
                'INSERT INTO consolidated_prefix (user_id, day, "offset", sha256, at) VALUES (?, ?, ?, ?, ?)'
                ' ON CONFLICT (user_id, day) DO UPDATE SET "offset" = excluded."offset", sha256 = excluded.sha256,'
                " at = excluded.at",
                [(user_id, m.day, m.offset, m.sha256, stamp) for m in marks],
            )

    def marks(self, user_id: str) -> dict[str, PrefixMark]:
        """Day (``YYYY-MM-DD``) -> its mark."""
        rows = self.db.conn.execute(
            'SELECT day, "offset", sha256, at FROM consolidated_prefix WHERE user_id = ?', (user_id,))
        return {str(r[0]): PrefixMark(str(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows}

    def forget(self, user_id: str, days: Iterable[str]) -> None:
        """Drop the marks of ``days`` (their files are gone)."""
        with self.db.transaction(ROWS) as conn:
            conn.executemany("DELETE FROM consolidated_prefix WHERE user_id = ? AND day = ?",
                             [(user_id, day) for day in days])
