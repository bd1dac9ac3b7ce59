"""Feeding a recorded transcript through the Daily tier and extraction (``tiermem ingest``).

Records are ``{"role", "content"}`` messages with optional ``thread_id``, ``user_id``,
``agent_name`` and ``timestamp`` (ISO-8601; a naive one is read in the configured time zone).
Each thread is cut into batches of at most ``extract_min_turns`` user turns that never span two
days; a batch becomes a Daily block on its own day (one record per message, through the one
conversation writer, :mod:`tiermem.tiers.conversation`: the thread id is the conversation id and
an entry's position is its index among the thread's entries) and, with an LLM, one extraction
call. Ingesting the same file twice writes and extracts nothing new (R9/R28), nor does a session
or queue thread of the same id that already journaled the same messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.queue.process import CONVERSATION_KIND, conversation_journal, prepare_messages
from tiermem.storage.journal import FlushHashRepository
from tiermem.storage.outbox import OutboxRepository
from tiermem.tiers.conversation import NumberedMessage
from tiermem.tiers.flush import prepare_flush
from tiermem.tiers.turns import to_message
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.memory import Memory

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

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "threads": self.threads, "batches": self.batches,
                "dailyLines": self.daily_lines, "llmCalls": self.llm_calls, "factsAdded": self.facts_added,
                "skippedDuplicates": self.skipped_duplicates, "runs": self.runs}


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
    """Write each batch to the Daily tier (on its own day) and extract from it when an LLM is set."""
    records = _records(mem, rows)
    report = IngestReport(messages=len(records), threads=len({(r.thread_id, r.scope) for r in records}))
    hashes, outbox = FlushHashRepository(mem.db), OutboxRepository(mem.db)
    batches = list(_batches(records, mem.settings.extract_min_turns, mem.settings.tz()))
    for done, batch in enumerate(batches, start=1):
        _ingest_batch(mem, batch, hashes, outbox, report)
        if progress is not None:
            progress(done, len(batches))
    return report


def _ingest_batch(mem: Memory, batch: list[_Record], hashes: FlushHashRepository, outbox: OutboxRepository,
                  report: IngestReport) -> None:
    first = batch[0]
    target = mem if first.scope == mem.scope else mem.for_scope(first.scope.user_id, first.scope.agent_name)
    messages = prepare_messages([r.message for r in batch], scrub=mem.settings.redact_secrets)
    thread = [NumberedMessage(r.position, to_message(m)) for r, m in zip(batch, messages, strict=True)]
    hashes = hashes if target is mem else FlushHashRepository(target.db)  # the scope's store, its transaction
    journaled = conversation_journal(target, hashes).write(first.thread_id, CONVERSATION_KIND, thread, at=first.at)
    report.daily_lines += journaled.records
    flush = prepare_flush(messages, partial(_seen, outbox, first))
    report.skipped_duplicates += flush.duplicates_dropped
    if not flush.messages:
        return
    report.batches += 1
    if target.llm is not None:
        result = target.extract([m.to_dict() for m in flush.messages], thread_id=first.thread_id)
        report.llm_calls += result.llm_calls
        report.facts_added += len(result.added)
        report.runs.append(result.run_id)
    outbox.mark_extracted(first.scope, first.thread_id, flush.digests, mem.clock.now())


def _seen(outbox: OutboxRepository, record: _Record, digests: list[str]) -> set[str]:
    return outbox.extracted(record.scope, record.thread_id) & set(digests)
