"""Feeding a recorded transcript through the Daily tier and extraction (``tiermem ingest``).

Records are ``{"role", "content"}`` messages with optional ``thread_id``, ``user_id``,
``agent_name`` and ``timestamp`` (ISO-8601; a naive one is read in the configured time zone).
Each thread is cut into batches of at most ``extract_min_turns`` user turns that never span two
days; a batch becomes a Daily block on its own day (one record per message, through the one
conversation writer, :mod:`tiermem.tiers.conversation`: the thread id is the conversation id and
an entry's position is its index among the thread's entries) and, with an LLM, one extraction
call. Ingesting the same file twice writes and extracts nothing new (R9/R28), nor does a session
or queue thread of the same id that already journaled the same messages.

While its batches are extracted, a thread is an item of the update queue's outbox claimed by this
run (R34): when an extraction fails (after the provider's retries) the item stays queued with its
error — pending with backoff, dead after ``queue_max_attempts`` — and the threads after it are
queued without calling the LLM; the report counts them (:attr:`IngestReport.queued`), and the queue
(``tiermem queue retry``, a worker) extracts them later (R67).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import groupby
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.queue.process import CONVERSATION_KIND, conversation_journal, prepare_messages
from tiermem.queue.worker import QueuePolicy
from tiermem.storage.journal import FlushHashRepository
from tiermem.storage.outbox import OutboxRepository
from tiermem.tiers.conversation import NumberedMessage
from tiermem.tiers.flush import prepare_flush
from tiermem.tiers.turns import to_message
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.memory import Memory

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass
class IngestReport:
    messages: int = 0
    threads: int = 0
    batches: int = 0
    daily_lines: int = 0
    llm_calls: int = 0
    facts_added: int = 0
    skipped_duplicates: int = 0
    runs: list[str] = field(default_factory=list)
    queued: int = 0  # threads left in the update queue because extraction failed
    error: str | None = None  # why extraction failed (the first failure)

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "threads": self.threads, "batches": self.batches,
                "dailyLines": self.daily_lines, "llmCalls": self.llm_calls, "factsAdded": self.facts_added,
                "skippedDuplicates": self.skipped_duplicates, "runs": self.runs, "queued": self.queued,
                "error": self.error}


@dataclass(frozen=True)
class _Record:
    thread_id: str
    scope: Scope
    at: datetime | None
    message: dict[str, Any]
    position: int  # index among the entries of its thread (and scope)


def read_transcript(raw: bytes, source: str = "the transcript") -> list[dict[str, Any]]:
    """:func:`parse_transcript` of a file's bytes; bytes that are not UTF-8 are an ``InvalidInput``
    naming ``source`` and the line and column of the first bad byte."""
    return parse_transcript(validate.utf8(raw, source), source)


def parse_transcript(text: str, source: str = "the transcript") -> list[dict[str, Any]]:
    """A JSON list or JSON Lines of message objects; ``InvalidInput`` with the line on error."""
    if not isinstance(text, str):
        raise InvalidInput(f"{source} must be text, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise InvalidInput(f"{source} is empty")
    if stripped.startswith("["):
        data = validate.json_value(stripped, source)
        rows = data if isinstance(data, list) else [data]
    else:
        rows = [validate.json_value(line, f"{source} line {number}")
                for number, line in enumerate(stripped.split("\n"), start=1) if line.strip()]
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise InvalidInput(f"{source}: entry {number} is not a JSON object (each message is"
                               " {\"role\": ..., \"content\": ...})")
    return list(rows)


def _timestamp(stamp: Any, index: int, tz: Any) -> datetime:
    """An entry's ``timestamp``: ISO-8601, naive ones read in ``tz``, within the calendar."""
    try:
        at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        at = at if at.tzinfo else at.replace(tzinfo=tz)
        at.astimezone(UTC)  # OverflowError at the ends of the calendar
        at.astimezone(tz)
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(f"entry {index}: bad timestamp {str(stamp)[:40]!r} (expected ISO-8601, e.g."
                           " 2026-03-14T10:00:00Z)") from exc
    return at


def _records(mem: Memory, rows: list[dict[str, Any]]) -> list[_Record]:
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise InvalidInput("a transcript is a list of message objects ({\"role\": ..., \"content\": ...})")
    validate.json_depth(rows, "the transcript")
    tz = mem.settings.tz()
    out = []
    counts: dict[tuple[str, Scope], int] = {}
    for index, row in enumerate(rows):
        scope = Scope(validate.name(row.get("user_id", mem.scope.user_id), "user_id"),
                      validate.name(row.get("agent_name", mem.scope.agent_name), "agent_name"))
        stamp = row.get("timestamp")
        at = _timestamp(stamp, index, tz) if stamp is not None else None
        message = {k: v for k, v in row.items() if k not in ("thread_id", "user_id", "agent_name", "timestamp")}
        thread = validate.thread_id(str(row.get("thread_id", "ingest")))
        position = counts.get((thread, scope), 0)
        counts[(thread, scope)] = position + 1
        out.append(_Record(thread, scope, at, message, position))
    prepare_messages([r.message for r in out], scrub=False)  # validate everything before writing anything
    return out


def _batches(records: list[_Record], min_turns: int, tz: Any) -> Iterator[list[_Record]]:
    """Per thread, in order: cut at ``min_turns`` user turns and at a change of day."""
    threads: dict[tuple[str, Scope], list[_Record]] = {}
    for record in records:
        threads.setdefault((record.thread_id, record.scope), []).append(record)
    for items in threads.values():
        batch: list[_Record] = []
        turns = 0
        for record in items:
            day = record.at.astimezone(tz).date() if record.at else None
            first_day = batch[0].at.astimezone(tz).date() if batch and batch[0].at else None
            starts_turn = record.message.get("role") == "user"
            if batch and ((starts_turn and turns >= min_turns) or (day and first_day and day != first_day)):
                yield batch
                batch, turns = [], 0
            batch.append(record)
            turns += starts_turn
        if batch:
            yield batch


def ingest(mem: Memory, rows: list[dict[str, Any]], progress: Progress | None = None) -> IngestReport:
    """Write each batch to the Daily tier (on its own day) and extract from it when an LLM is set.
    What could not be extracted stays in the update queue (:attr:`IngestReport.queued`)."""
    records = _records(mem, rows)
    report = IngestReport(messages=len(records), threads=len({(r.thread_id, r.scope) for r in records}))
    batches = list(_batches(records, mem.settings.extract_min_turns, mem.settings.tz()))
    run = _Run(mem, report, progress, len(batches))
    for _, thread in groupby(batches, key=lambda batch: (batch[0].thread_id, batch[0].scope)):
        run.thread(list(thread))
    return report


class _Run:
    """One ingest: per thread, its batches journaled on their days, then extracted in order while
    the thread is an outbox item claimed by this process (R34, R67): a failed extraction leaves
    it to the queue (pending with backoff, dead after ``queue_max_attempts``), and once one has
    failed the threads after it go to the queue without calling the LLM."""

    def __init__(self, mem: Memory, report: IngestReport, progress: Progress | None, total: int) -> None:
        self.mem, self.report, self.progress, self.total = mem, report, progress, total
        self.hashes, self.outbox = FlushHashRepository(mem.db), OutboxRepository(mem.db)
        self.policy = QueuePolicy.from_settings(mem.settings)
        self.done = 0

    def thread(self, batches: list[list[_Record]]) -> None:
        first = batches[0][0]
        mem = self.mem
        target = mem if first.scope == mem.scope else mem.for_scope(first.scope.user_id, first.scope.agent_name)
        prepared = [self._journal(target, batch) for batch in batches]
        whole = [message for messages in prepared for message in messages]  # index = position: a queue item
        if target.llm is None or not prepare_flush(whole, partial(_seen, self.outbox, first)).messages:
            for messages in prepared:  # nothing new, or nothing to extract with: counted as extracted
                self._extract(None, first, messages)
        elif self.report.error is not None:
            self.outbox.put(first.thread_id, first.scope, whole, mem.clock.now())
            self.report.queued += 1
            self._tick(len(prepared))
        else:
            self._extract_claimed(target, first, prepared, whole)

    def _journal(self, target: Memory, batch: list[_Record]) -> list[dict[str, Any]]:
        """The batch's messages, validated and redacted, journaled on the batch's day."""
        first = batch[0]
        messages = prepare_messages([r.message for r in batch], scrub=self.mem.settings.redact_secrets)
        thread = [NumberedMessage(r.position, to_message(m)) for r, m in zip(batch, messages, strict=True)]
        hashes = self.hashes if target is self.mem else FlushHashRepository(target.db)  # the scope's transaction
        journaled = conversation_journal(target, hashes).write(first.thread_id, CONVERSATION_KIND, thread, at=first.at)
        self.report.daily_lines += journaled.records
        return messages

    def _extract_claimed(self, target: Memory, first: _Record, prepared: list[list[dict[str, Any]]],
                         whole: list[dict[str, Any]]) -> None:
        """Extract the thread's batches under an outbox item of the whole thread; the lease is
        renewed after each batch (one extraction takes less than a lease, see ``lease_seconds``)."""
        item = self.outbox.put_claimed(first.thread_id, first.scope, whole, self.mem.clock.now(),
                                       self.policy.lease_seconds)
        left = len(prepared)
        try:
            for messages in prepared:
                self._extract(target, first, messages)
                left -= 1
                self.outbox.renew(item, self.mem.clock.now(), self.policy.lease_seconds)
        except Exception as exc:  # any failure keeps the item, as the queue does (R67)
            error = f"{type(exc).__name__}: {exc}"
            retry_at = self.mem.clock.now() + timedelta(seconds=self.policy.backoff(item.attempts))
            status = self.outbox.failed(item, error, retry_at, self.policy.max_attempts)
            log.info("ingest: extraction of thread %s failed, its queue item is %s: %s", first.thread_id, status, error)
            self.report.error = str(exc) or type(exc).__name__
            self.report.queued += 1
            self._tick(left)  # the queue has them
        else:
            self.outbox.done(item)

    def _extract(self, target: Memory | None, first: _Record, messages: list[dict[str, Any]]) -> None:
        """Extract what is new in one batch (``target`` None: only mark it extracted)."""
        flush = prepare_flush(messages, partial(_seen, self.outbox, first))
        self.report.skipped_duplicates += flush.duplicates_dropped
        if flush.messages:
            self.report.batches += 1
            if target is not None:
                result = target.extract([m.to_dict() for m in flush.messages], thread_id=first.thread_id)
                self.report.llm_calls += result.llm_calls
                self.report.facts_added += len(result.added)
                self.report.runs.append(result.run_id)
            self.outbox.mark_extracted(first.scope, first.thread_id, flush.digests, self.mem.clock.now())
        self._tick(1)

    def _tick(self, batches: int) -> None:
        self.done += batches
        if self.progress is not None:
            self.progress(self.done, self.total)


def _seen(outbox: OutboxRepository, record: _Record, digests: list[str]) -> set[str]:
    return outbox.extracted(record.scope, record.thread_id) & set(digests)
