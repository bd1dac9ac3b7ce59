"""SQL for the durable update queue (R34) and the per-thread hashes of extracted messages (R28).

An item is messages of a thread at their positions, keyed by (thread_id, user_id, agent_name):
``messages[i]`` is the message at position ``first_position + i`` (``queue.add`` gives the thread
so far, from position 0; a coding-agent hook gives only the messages its transcript added since
its last read, from their position). At most one *pending* item exists per key: a newer ``put``
merges into it by position (:func:`unite`), so no turn is lost. Items move pending -> processing
-> (deleted on success | pending again with ``attempts + 1`` | dead after too many failures).

**Claims are leases** (issue 14). :meth:`OutboxRepository.claim` marks an item 'processing' with
a claim token (``claimed_by``: host, PID, a random tag of this process and a claim number),
``claimed_at`` and ``lease_until``; the claimer's heartbeat moves ``lease_until`` on while it works
(:meth:`~OutboxRepository.renew`). An item left 'processing' is reclaimable
(:meth:`~OutboxRepository.recover`) when

- its lease has run out — whatever the claimer's PID says: PIDs are reused (after a container
  restart the new process is PID 1 again, as the dead claimer was), or
- its claimer ran on this host and is provably gone: no process has its PID, that process is a
  zombie, or the PID is this process's own but the tag is not (an earlier incarnation).

A claim made on another host is trusted until its lease runs out. Rows claimed before leases
existed have no ``lease_until``: their lease counts from ``claimed_at``.

Recovering an item counts an attempt (``last_error`` says it was interrupted), so an item that
kills its process every time ends dead with that reason instead of looping for ever. When a newer
pending item of the same thread exists (the agent kept talking while the item was in flight), the
recovered item merges into it (:func:`unite`) instead of colliding with it on the unique key.

``done``, ``defer``, ``release`` and ``failed`` act only while the item is still under the claim
they are given: a claimer whose lease ran out and whose item was taken over changes nothing.

**Backends.** The SQL is one text for SQLite and PostgreSQL; only the claim differs
(:attr:`~tiermem.storage.sql.Backend.claim_outbox`): SQLite takes the write lock first
(``BEGIN IMMEDIATE``: one claimer at a time), PostgreSQL claims in one statement with
``FOR UPDATE SKIP LOCKED``, so workers on any number of hosts take different items at once
without waiting for each other or for the store's write lock.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tiermem.clock import parse_utc, utc_iso
from tiermem.errors import InvalidInput
from tiermem.storage.sql import ROWS, WriteKey
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Connection, Database, Row

DEFAULT_LEASE_SECONDS = 600.0  # for callers that do not pass one (the queue passes its policy's)
_claims = itertools.count(1)


@dataclass(frozen=True)
class ClaimRequest:
    """What a claim sets (ISO times): the token, the claim time, the lease's end, and the time
    an item must be due by (``not_before <= due``; None: ignore the backoff)."""

    token: str
    now: str
    lease_until: str
    due: str | None


def claim_sql(request: ClaimRequest, row_lock: str = "") -> tuple[str, list[str]]:
    """The one statement that claims the oldest due pending item (``row_lock``: the backend's
    row-locking clause for the inner SELECT) and returns its row, with its arguments."""
    due = " AND not_before <= ?" if request.due is not None else ""
    sql = ("UPDATE outbox SET status = 'processing', claimed_by = ?, claimed_at = ?, lease_until = ?"
           f" WHERE id = (SELECT id FROM outbox WHERE status = 'pending'{due} ORDER BY enqueued_at, id LIMIT 1"
           f"{row_lock}) RETURNING *")
    args = [request.token, request.now, request.lease_until]
    return sql, args + ([request.due] if request.due is not None else [])


@dataclass(frozen=True)
class OutboxItem:
    """One queued update (``claimed_by``/``lease_until``: set while it is being processed)."""

    id: int
    thread_id: str
    scope: Scope
    messages: list[dict[str, Any] | None]  # None: no message at that position (see unite)
    status: str
    attempts: int
    last_error: str | None
    enqueued_at: datetime
    not_before: datetime
    claimed_by: str | None = None
    lease_until: datetime | None = None
    first_position: int = 0  # the position of messages[0] in its thread

    def positioned(self) -> list[tuple[int, dict[str, Any]]]:
        """Each message with its position in the thread (a gap's ``None`` entries left out)."""
        return [(self.first_position + i, m) for i, m in enumerate(self.messages) if m is not None]


def _item(row: Any) -> OutboxItem:
    lease = row["lease_until"]
    return OutboxItem(row["id"], row["thread_id"], Scope(row["user_id"], row["agent_name"]),
                      json.loads(row["messages"]), row["status"], row["attempts"], row["last_error"],
                      parse_utc(row["enqueued_at"]), parse_utc(row["not_before"]),
                      row["claimed_by"], parse_utc(lease) if lease else None, int(row["first_position"]))


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), where there is one."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()
    except OSError:
        return None


def _started(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, Linux), or "" where unknown."""
    fields = _proc_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else ""


_tags: dict[int, str] = {}


def _tag() -> str:
    """Tells this process from another that had (or will have) its PID; made per PID, so a
    forked child gets its own."""
    pid = os.getpid()
    tag = _tags.get(pid)
    if tag is None:
        tag = _tags.setdefault(pid, f"{_started(pid)}.{secrets.token_hex(4)}")
    return tag


def this_process() -> str:
    """``host:pid/started.random`` of the running process (claim tokens start with it)."""
    return f"{socket.gethostname()}:{os.getpid()}/{_tag()}"


def _claim_token() -> str:
    """A new claim token: this process and a claim number."""
    return f"{this_process()}#{next(_claims)}"


def claimer_gone(claimer: str | None) -> bool:
    """True when the process behind a claim token is provably not running (see the module docstring):
    on this host, no process has its PID, or that process is a zombie, or it started at another
    time than the claimer did (the PID was reused), or it is this process under another tag."""
    if not claimer:
        return True
    process, _, tag = claimer.split("#", 1)[0].partition("/")
    host, _, pid_text = process.rpartition(":")
    if host != socket.gethostname():
        return False  # another host: only its lease tells
    try:
        pid = int(pid_text)
        if pid == os.getpid():
            return tag != _tag()
        os.kill(pid, 0)
    except (ValueError, OverflowError, ProcessLookupError):
        return True
    except OSError:  # e.g. PermissionError: someone else's live process
        return False
    fields = _proc_stat(pid)
    if fields is None:
        return False
    started = tag.partition(".")[0]
    return fields[0] == "Z" or bool(started and len(fields) > 19 and fields[19] != started)


Part = tuple[int, list[dict[str, Any] | None]]  # an item's first position and its messages


def unite(older: Part, newer: Part) -> Part:
    """The messages of two items of one thread, united by position: they start at the smaller first
    position and end at the larger end; where both have a message at a position the newer one
    wins. Ranges that overlap or touch make one contiguous list. Ranges with a gap between them
    (an item recovered while a later slice of its thread was claimed by another worker, or a
    caller that skipped positions) keep both parts' messages at their own positions and ``None``
    at the positions between, which neither item has: the processor journals and extracts the
    messages it has and skips the gap (:meth:`OutboxItem.positioned`), rather than shifting a
    message to another position (its digest would not match, R9) or dropping one part."""
    start = min(older[0], newer[0])
    end = max(older[0] + len(older[1]), newer[0] + len(newer[1]))
    out: list[dict[str, Any] | None] = [None] * (end - start)
    for first, messages in (older, newer):
        for offset, message in enumerate(messages):
            if message is not None:
                out[first - start + offset] = message
    return start, out


class OutboxRepository:
    """The outbox table of one database (all scopes)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, thread_id: str, scope: Scope, messages: Sequence[dict[str, Any] | None], now: datetime,
            first_position: int = 0) -> int:
        """Insert the messages at positions ``first_position`` on, or merge them into the pending
        item with the same key (:func:`unite`: the new ones win); committed on return. The item is
        due now again (unless it failed before: then its backoff stands)."""
        if isinstance(first_position, bool) or not isinstance(first_position, int) or first_position < 0:
            raise InvalidInput(f"first_position must be a whole number >= 0, got {first_position!r}")
        thread_id, items = self.db.redactor.ident(thread_id), self.db.redactor.data(list(messages))  # R68
        key = (thread_id, scope.user_id, scope.agent_name)
        at = utc_iso(now)
        with self.db.transaction(_thread_key(thread_id, scope)) as conn:  # no other put or requeue of it meanwhile
            row = conn.execute("SELECT id, first_position, messages FROM outbox WHERE thread_id = ? AND user_id = ?"
                               " AND agent_name = ? AND status = 'pending'", key).fetchone()
            if row is not None:
                first, merged = unite((int(row["first_position"]), json.loads(row["messages"])),
                                      (first_position, items))
                cur = conn.execute(
                    "UPDATE outbox SET messages = ?, first_position = ?, enqueued_at = ?,"
                    " not_before = CASE WHEN attempts = 0 THEN ? ELSE not_before END"
                    " WHERE id = ? AND status = 'pending'",
                    (json.dumps(merged, ensure_ascii=False), first, at, at, row["id"]))
                if cur.rowcount == 1:
                    return int(row["id"])
                # PostgreSQL: a claimer (which does not take the write lock) took it meanwhile
            inserted = conn.execute(
                "INSERT INTO outbox (thread_id, user_id, agent_name, messages, status, enqueued_at, not_before,"
                " first_position) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?) RETURNING id",
                (*key, json.dumps(items, ensure_ascii=False), at, at, first_position),
            ).fetchone()
        return int(inserted[0])

    def put_claimed(self, thread_id: str, scope: Scope, messages: list[dict[str, Any]], now: datetime,
                    lease_seconds: float = DEFAULT_LEASE_SECONDS) -> OutboxItem:
        """Insert an item already claimed by this process, for a caller that processes it at once
        (``tiermem ingest``): committed before the work starts, so a failure (:meth:`failed`) or a
        crash (:meth:`recover`) leaves it to the queue; :meth:`done` deletes it."""
        thread_id, messages = self.db.redactor.ident(thread_id), self.db.redactor.data(messages)  # R68
        at, lease = utc_iso(now), utc_iso(now + timedelta(seconds=lease_seconds))
        with self.db.transaction(ROWS) as conn:  # a claimed item: the one-pending-per-thread rule is not its
            row = conn.execute(
                "INSERT INTO outbox (thread_id, user_id, agent_name, messages, status, enqueued_at, not_before,"
                " claimed_by, claimed_at, lease_until) VALUES (?, ?, ?, ?, 'processing', ?, ?, ?, ?, ?) RETURNING *",
                (thread_id, scope.user_id, scope.agent_name, json.dumps(messages, ensure_ascii=False), at, at,
                 _claim_token(), at, lease),
            ).fetchone()
        return _item(row)

    def claim(self, now: datetime, ignore_backoff: bool = False,
              lease_seconds: float = DEFAULT_LEASE_SECONDS) -> OutboxItem | None:
        """Take the oldest due pending item under a lease until ``now + lease_seconds`` (atomic
        across processes); the returned item carries the claim token."""
        lease = now + timedelta(seconds=lease_seconds)
        request = ClaimRequest(_claim_token(), utc_iso(now), utc_iso(lease), None if ignore_backoff else utc_iso(now))
        claimed = self.db.parts.claim_outbox(self.db, request)
        return None if claimed is None else _item(claimed)

    def renew(self, item: OutboxItem, now: datetime, lease_seconds: float) -> bool:
        """Heartbeat: extend the lease of a claimed item; False if the claim was lost (taken over)."""
        with self.db.transaction(ROWS) as conn:
            cur = conn.execute("UPDATE outbox SET lease_until = ? WHERE id = ? AND status = 'processing'"
                               " AND claimed_by = ?",
                               (utc_iso(now + timedelta(seconds=lease_seconds)), item.id, item.claimed_by))
        return int(cur.rowcount) == 1

    def done(self, item: OutboxItem) -> bool:
        """Delete a processed item (only while it is still under ``item``'s claim): one statement,
        its own transaction (one round trip on PostgreSQL, like the claim)."""
        cur = self.db.conn.execute("DELETE FROM outbox WHERE id = ? AND COALESCE(claimed_by, '') = ?",
                                   (item.id, item.claimed_by or ""))
        return int(cur.rowcount) == 1

    def defer(self, item: OutboxItem, until: datetime) -> None:
        """Back to pending, not before ``until``, without counting a failure (merged into a newer
        pending item of its thread if there is one)."""
        self._give_back(item, until)

    def release(self, item: OutboxItem) -> None:
        """Give a claimed item back untouched (pending again, or merged like :meth:`defer`)."""
        self._give_back(item, None)

    def _give_back(self, item: OutboxItem, not_before: datetime | None) -> None:
        with self.db.transaction(_thread_key(item.thread_id, item.scope)) as conn:
            row = conn.execute("SELECT * FROM outbox WHERE id = ? AND COALESCE(claimed_by, '') = ?",
                               (item.id, item.claimed_by or "")).fetchone()
            if row is not None:
                _requeue(conn, row, None, not_before or parse_utc(row["not_before"]), None, int(row["attempts"]))

    def failed(self, item: OutboxItem, error: str, retry_at: datetime, max_attempts: int) -> str:
        """Record a failure; the item becomes pending again (or dead), merged into a newer pending
        item of its thread if there is one. Returns the new status ("lost" when the claim was
        taken over meanwhile and nothing was changed)."""
        error = self.db.redactor.text(error)  # a provider's message may quote the request
        with self.db.transaction(_thread_key(item.thread_id, item.scope)) as conn:
            row = conn.execute("SELECT * FROM outbox WHERE id = ? AND COALESCE(claimed_by, '') = ?",
                               (item.id, item.claimed_by or "")).fetchone()
            if row is None:
                return "lost"
            return _requeue(conn, row, error, retry_at, max_attempts)

    def recover(self, now: datetime, lease_seconds: float = DEFAULT_LEASE_SECONDS,
                max_attempts: int | None = None) -> int:
        """Put reclaimable 'processing' items (lease run out, or claimer gone) back to pending,
        each counting an attempt (dead at ``max_attempts``); returns how many. (A look first, without
        the store-wide lock: workers call this whenever they wait, mostly with nothing to take back.)"""
        rows = self.db.conn.execute("SELECT * FROM outbox WHERE status = 'processing'").fetchall()
        if all(_reclaim_reason(row, now, lease_seconds) is None for row in rows):
            return 0
        with self.db.transaction() as conn:
            rows = conn.execute("SELECT * FROM outbox WHERE status = 'processing' ORDER BY id").fetchall()
            count = 0
            for row in rows:
                reason = _reclaim_reason(row, now, lease_seconds)
                if reason is not None:
                    _requeue(conn, row, f"interrupted: {reason}", now, max_attempts)
                    count += 1
        return count

    def next_lease_end(self) -> datetime | None:
        """When the earliest lease of an item being processed runs out (None: nothing is)."""
        row = self.db.conn.execute("SELECT MIN(lease_until) FROM outbox WHERE status = 'processing'").fetchone()
        return parse_utc(row[0]) if row is not None and row[0] else None

    def retry_dead(self, now: datetime, ids: Sequence[int] | None = None) -> int:
        """Dead items (all, or those of ``ids``) become pending again with no attempts counted,
        due now; several of one thread (or one next to a pending item) become one item, messages
        united. Returns how many dead items were retried."""
        only = "" if ids is None else f" AND id IN ({', '.join('?' for _ in ids)})"
        if ids is not None and not ids:
            return 0
        with self.db.transaction() as conn:
            rows = conn.execute(f"SELECT * FROM outbox WHERE status = 'dead'{only} ORDER BY id",
                                [int(i) for i in ids or ()]).fetchall()
            for row in rows:
                _requeue(conn, row, None, now, None, 0)
        return len(rows)

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
        thread_id = self.db.redactor.ident(thread_id)  # as stored
        rows = self.db.conn.execute(
            "SELECT md5 FROM extracted_hashes WHERE user_id = ? AND agent_name = ? AND thread_id = ?",
            (scope.user_id, scope.agent_name, thread_id),
        )
        return {r[0] for r in rows}

    def mark_extracted(self, scope: Scope, thread_id: str, hashes: list[str], now: datetime) -> None:
        thread_id = self.db.redactor.ident(thread_id)
        with self.db.transaction(ROWS) as conn:
            conn.executemany(
                "INSERT INTO extracted_hashes (user_id, agent_name, thread_id, md5, at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(scope.user_id, scope.agent_name, thread_id, h, utc_iso(now)) for h in hashes],
            )


def _thread_key(thread_id: str, scope: Scope) -> WriteKey:
    """The lock of one thread's items (``thread_id`` as stored): at most one of them is pending, and
    a put or a requeue reads, then merges or inserts. (``recover`` and ``retry_dead`` requeue items
    of any thread: they are store-wide.)"""
    return WriteKey.named("outbox", scope.user_id, scope.agent_name, thread_id)


def _reclaim_reason(row: Row, now: datetime, lease_seconds: float) -> str | None:
    """Why a 'processing' row may be taken from its claimer, or None while its claim stands."""
    claimer = row["claimed_by"]
    if row["lease_until"]:
        lease_end: datetime | None = parse_utc(row["lease_until"])
    elif row["claimed_at"]:
        lease_end = parse_utc(row["claimed_at"]) + timedelta(seconds=lease_seconds)
    else:
        lease_end = None
    if lease_end is not None and lease_end <= now:
        return f"the lease of {claimer or 'an unknown claimer'} ran out at {utc_iso(lease_end)}"
    if claimer_gone(claimer):
        return f"the process that claimed it ({claimer or 'unknown'}) is gone"
    return None


def _requeue(conn: Connection, row: Row, error: str | None, not_before: datetime,
             max_attempts: int | None, attempts: int | None = None) -> str:
    """``row`` goes back to pending: after a failure or an interruption with one more attempt
    (dead at ``max_attempts``; ``error`` recorded), or untouched (``attempts`` given, ``error``
    None). The unique key allows one pending item per thread, so when a pending item of its
    thread exists (the agent kept talking while this one was in flight) the two become that one
    item: messages united, the higher attempt count kept (so its next failure may make it
    dead). Returns the new status.

    The merge changes the newer item only while it is still pending: on PostgreSQL a claimer
    (which does not wait for the store's write lock) may take it meanwhile; then this row
    becomes pending itself (no other pending item of the thread can appear: ``put`` waits for
    the write lock this caller holds)."""
    attempts = int(row["attempts"]) + 1 if attempts is None else attempts
    newer = conn.execute("SELECT id, first_position, messages FROM outbox WHERE thread_id = ? AND user_id = ?"
                         " AND agent_name = ? AND status = 'pending' AND id != ?",
                         (row["thread_id"], row["user_id"], row["agent_name"], row["id"])).fetchone()
    if newer is not None:
        first, messages = unite((int(row["first_position"]), json.loads(row["messages"])),
                                (int(newer["first_position"]), json.loads(newer["messages"])))
        merged = conn.execute(
            "UPDATE outbox SET messages = ?, first_position = ?,"
            " attempts = CASE WHEN attempts > ? THEN attempts ELSE ? END,"
            " last_error = COALESCE(?, last_error) WHERE id = ? AND status = 'pending'",
            (json.dumps(messages, ensure_ascii=False), first, attempts, attempts, error, newer["id"]))
        if merged.rowcount == 1:
            conn.execute("DELETE FROM outbox WHERE id = ?", (row["id"],))
            return "pending"
    status = "dead" if max_attempts is not None and attempts >= max_attempts else "pending"
    conn.execute("UPDATE outbox SET status = ?, attempts = ?, last_error = COALESCE(?, last_error), not_before = ?,"
                 " claimed_by = NULL, claimed_at = NULL, lease_until = NULL WHERE id = ?",
                 (status, attempts, error, utc_iso(not_before), row["id"]))
    return status
