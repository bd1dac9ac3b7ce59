"""The one writer of conversations to the Daily journal (R8, R9, R10).

The session flush (trimmed turns, session end), the update queue and ``tiermem ingest`` all
journal messages through :meth:`ConversationJournal.write`, so each message of a conversation
reaches the Daily file once, whichever of them sees it first; the others skip it.

- **Conversation id**: a session id, a queue thread id and an ingested ``thread_id`` name the same
  conversation (per user and agent).
- **Position**: each message carries its absolute, 0-based position in the conversation: for
  ``queue.add(thread_id, messages)`` its index in ``messages`` (the thread so far); for a session
  the number of messages added to it before (system messages included, trims do not reset it);
  for ingest its index among the thread's entries in the transcript.
- **Digest** (:func:`conversation_digest`): SHA-256 of the position, the role and the *redacted*
  text, tool-call ids, names and arguments and the ids of the calls a result answers. A secret
  therefore never defeats dedup (both writers see the same redacted text), and a repeated "ok" at
  another position is a message of its own.
- Digests live in the ``flush_hashes`` table under one namespace per (user, agent, conversation)
  (:func:`~tiermem.tiers.daily.conversation_namespace`) and persist, so a restart or a replayed
  queue item does not write the same messages again.
- ``[SCHEDULED]`` pairs are stripped first (R10); positions stay those of the original list.
- Check, append and record happen under the journal's cross-process lock
  (:meth:`~tiermem.tiers.daily.DailyJournal.exclusive`), so two threads or processes writing the
  same conversation at once write it once.
- **Exactly once under a crash** (issue 14): append and record are two steps, so a write first
  commits a *journal intent* (:mod:`tiermem.storage.journal`: the day, the file's size before the
  append, and per block its SHA-256, length, heading line and message digests), then appends,
  then records the digests and clears the intent in one transaction. A process killed anywhere in
  between leaves the intent; whoever takes the journal lock next (every appender runs
  :func:`settle_intents` first) looks at the file: blocks found at the offset are recorded as
  journaled, a block cut short by the kill (a torn tail that starts with the block's heading) is
  truncated away, and a block that never reached the file is forgotten, so the retry writes it
  once. The Daily file itself carries no marker. Where the files are rows of the database that
  records the digests (PostgreSQL), append and record are one transaction: no intent is needed,
  and the write's reads (intents left by older writers, the digests seen, the day's file) go to
  the server together with the lock, so the user's lock is held for three round trips.

An extra block about some messages (a session's LLM summary) is written once too
(:meth:`ConversationJournal.write_about`). Dedup governs the Daily write only: the running
summary of a session and the queue's extraction hashes (``outbox.extracted``, R28) are kept
elsewhere and see every message.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import NamedTuple

from tiermem import faults
from tiermem.errors import TiermemError
from tiermem.redact import redact_data
from tiermem.storage.files import MemoryFiles
from tiermem.storage.journal import FlushHashRepository, IntentBlock, JournalIntent
from tiermem.tiers.daily import (
    MAX_RECORDS,
    DailyJournal,
    JournalWriter,
    PendingBlock,
    check_kind,
    conversation_namespace,
    day_rel,
)
from tiermem.tiers.flush import kept_indices
from tiermem.tiers.records import TOOL_RESULT_MAX_CHARS, message_records, tool_names
from tiermem.tiers.turns import ChatMessage, to_message
from tiermem.types import Scope
from tiermem.validate import MAX_MESSAGE_CHARS

log = logging.getLogger(__name__)

SETTLE_HOOK = "conversation-intents"
Group = tuple[PendingBlock, list[str]]  # a block to append and the digests of the messages in it


class NumberedMessage(NamedTuple):
    """A message with its 0-based position in its conversation."""

    position: int
    message: ChatMessage


def numbered(messages: Iterable[ChatMessage], start: int = 0) -> list[NumberedMessage]:
    """``messages`` numbered from ``start``."""
    return [NumberedMessage(start + offset, m) for offset, m in enumerate(messages)]


@dataclass(frozen=True)
class JournalResult:
    """What one :meth:`ConversationJournal.write` did."""

    written: int  # messages journaled now (those without any text count too: they are done)
    skipped: int  # messages some writer journaled before
    scheduled: int  # messages of [SCHEDULED] turns, left out (R10)
    records: int  # records appended
    path: Path | None  # the daily file written, if any


def conversation_digest(item: NumberedMessage, scrub: Callable[[str], str] | None = None) -> str:
    """The identity of a message in its conversation (hex SHA-256; see the module docstring)."""
    message = item.message
    redact = scrub if scrub is not None else _same
    parts = [str(item.position), message.role, redact(message.text), "\x1e", *message.tool_result_ids, "\x1e"]
    for call in message.tool_calls:
        parts += [call.id, call.name, redact(call.arguments)]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", errors="surrogatepass")).hexdigest()


def _same(text: str) -> str:
    return text


class ConversationJournal:
    """Journals the messages of one scope's conversations, each once (see the module docstring)."""

    def __init__(self, journal: DailyJournal, hashes: FlushHashRepository | None, scope: Scope,
                 tool_max_chars: int = TOOL_RESULT_MAX_CHARS) -> None:
        self.journal = journal
        if hashes is not None and journal.flush_hashes is not None:
            hashes = journal.flush_hashes  # the journal store's own: its writes join the journal's transaction
        self.hashes = hashes
        self.scope = scope
        self.tool_max_chars = min(tool_max_chars, MAX_MESSAGE_CHARS)
        if hashes is not None:  # every appender of this journal settles crashed writes first
            journal.on_lock.setdefault(SETTLE_HOOK, partial(settle_intents, journal, hashes))
            journal.on_lock_reads.setdefault(SETTLE_HOOK, partial(hashes.prefetch_intents, journal.paths.user_id))
        # append and record commit together where the files are rows of the hashes' database
        self.atomic = hashes is not None and hashes is journal.flush_hashes and not journal.files.durable_files

    def namespace(self, conversation_id: str) -> str:
        return conversation_namespace(self.scope.user_id, self.scope.agent_name, conversation_id)

    def write(self, conversation_id: str, kind: str, messages: Sequence[NumberedMessage], *,
              at: datetime | None = None) -> JournalResult:
        """Append the messages not journaled before as one ``## <kind> (HH:MM)`` block (at ``at``,
        now by default) and remember their digests. A failed append raises ``StorageError`` and
        remembers nothing, so the caller may retry the same messages."""
        kept = self._redacted([messages[i] for i in kept_indices([m.message for m in messages])])
        scheduled = len(messages) - len(kept)
        digests = [conversation_digest(m, self.journal.scrub) for m in kept]
        names = tool_names([m.message for m in kept])
        namespace = self.namespace(conversation_id)
        kind = check_kind(kind)  # bad kind or time: InvalidInput before anything happens
        moment = self.journal.moment(at)
        with self.journal.exclusive(days=[moment.date()], reads=self._reads(namespace, digests)) as writer:
            seen = self.hashes.seen(namespace, digests) if self.hashes is not None else set()
            fresh: dict[str, NumberedMessage] = {}
            for digest, item in zip(digests, kept, strict=True):
                if digest not in seen and digest not in fresh:
                    fresh[digest] = item
            groups, silent = self._groups(kind, fresh, names, moment)
            path = self._commit(writer, namespace, groups)
            self._remember(namespace, silent)
        records = sum(block.records for block, _ in groups)
        return JournalResult(len(fresh), len(kept) - len(fresh), scheduled, records, path)

    def write_about(self, conversation_id: str, kind: str, about: Sequence[NumberedMessage],
                    lines: Sequence[str], *, at: datetime | None = None) -> Path | None:
        """Append an extra block (e.g. a session summary, R8) about the messages ``about``, unless
        a ``kind`` block about exactly these messages was written before: a replay after a
        restart writes it once. Returns the file written, or None when it was already there."""
        digests = [conversation_digest(m, self.journal.scrub) for m in self._redacted(about)]
        identity = hashlib.sha256("\x1f".join([kind, *digests]).encode("utf-8")).hexdigest()
        block = self.journal.block(kind, list(lines), at)  # InvalidInput before anything happens
        namespace = self.namespace(conversation_id)
        with self.journal.exclusive(days=[block.day], reads=self._reads(namespace, [identity])) as writer:
            if self.hashes is not None and self.hashes.seen(namespace, [identity]):
                return None
            return self._commit(writer, namespace, [(block, [identity])])

    def _reads(self, namespace: str, digests: list[str]) -> list[Callable[[], None]]:
        """The check of ``digests``, sent ahead with the lock (:meth:`DailyJournal.exclusive`)."""
        return [] if self.hashes is None else [partial(self.hashes.prefetch_seen, namespace, digests)]

    def _redacted(self, messages: Sequence[NumberedMessage]) -> list[NumberedMessage]:
        """With redaction on, each message redacted whole (tool inputs, JSON inside strings: R68)
        before its digest and its records are made, so a thread journaled from a live session and
        the same thread from the queue's already redacted copy have the same digests."""
        if self.journal.scrub is None:
            return list(messages)
        out = []
        for item in messages:
            raw = dict(item.message.raw)
            clean = redact_data(raw)
            out.append(item if clean == raw else NumberedMessage(item.position, to_message(clean)))
        return out

    def _groups(self, kind: str, fresh: dict[str, NumberedMessage], names: dict[str, str],
                moment: datetime) -> tuple[list[Group], list[str]]:
        """The blocks for ``fresh`` (at most MAX_RECORDS records each; a message's records never
        straddle two blocks) and the digests of messages that make no record at all."""
        groups: list[Group] = []
        records: list[str] = []
        digests: list[str] = []
        silent: list[str] = []
        for digest, item in fresh.items():
            own = message_records(item.message, names, self.tool_max_chars)
            if not own:
                (digests if records else silent).append(digest)
                continue
            if records and len(records) + len(own) > MAX_RECORDS:
                groups.append((self.journal.block(kind, records, moment), digests))
                records, digests = [], []
            records += own
            digests.append(digest)
        if records:
            groups.append((self.journal.block(kind, records, moment), digests))
        return groups, silent

    def _commit(self, writer: JournalWriter, namespace: str, groups: list[Group]) -> Path | None:
        """Intent, append, record (see the module docstring); the caller holds the journal lock."""
        if not groups:
            return None
        intent = None
        if self.hashes is not None and not self.atomic:
            day = groups[0][0].day
            blocks = [IntentBlock(hashlib.sha256(b.text.encode("utf-8")).hexdigest(), len(b.text.encode("utf-8")),
                                  b.text.split("\n", 1)[0], d) for b, d in groups]
            found = self.journal.files.stat(day_rel(day))
            intent = self.hashes.announce(self.journal.paths.user_id, namespace, day.isoformat(),
                                          found.size if found is not None else 0, blocks, self.journal.now())
        faults.point("journal.intent")
        path = None
        for block, _ in groups:
            path = writer.write(block)
        faults.point("journal.appended")
        self._remember(namespace, [d for _, digests in groups for d in digests], intent)
        faults.point("journal.recorded")
        return path

    def _remember(self, namespace: str, digests: list[str], intent: int | None = None) -> None:
        if self.hashes is None or (not digests and intent is None):
            return
        try:  # stamped now, not with the record's time: retention ages digests from when they were written
            self.hashes.remember(namespace, digests, self.journal.now(), intent=intent)
        except TiermemError as exc:  # the records stand; the intent lets the next writer record them
            if self.atomic:  # no intent: the append must not stand either (its transaction rolls back)
                raise
            log.warning("could not record the journaled messages of %s (the next write settles them): %s",
                        namespace, exc)


# --- settling the writes of a process that died between intent and record ------------------------

def settle_intents(journal: DailyJournal, hashes: FlushHashRepository) -> None:
    """Settle every intent of ``journal``'s user (the caller holds the journal lock): record the
    digests of the blocks that reached the file, cut a torn block off, forget the rest."""
    for intent in hashes.intents(journal.paths.user_id):
        rel = day_rel(date.fromisoformat(intent.day))
        written = _written(journal.files, rel, intent)
        if written:
            hashes.remember(intent.namespace, written, journal.now(), intent=intent.id)
        else:
            hashes.cancel(intent.id)
        log.info("settled an interrupted journal write to %s: %d of its messages were written", rel,
                 len(written))


def _written(files: MemoryFiles, rel: str, intent: JournalIntent) -> list[str]:
    """The digests of the intent's blocks found in ``rel`` (a torn last block is cut off)."""
    data = files.read(rel) or b""
    found: list[str] = []
    pos = intent.offset
    if len(data) >= pos:
        for block in intent.blocks:
            end = _block_at(data, pos, block, intent.day)
            if end is None:
                if _torn(data[pos:], block, intent.day):
                    files.truncate(rel, pos)  # a file is never left empty: cut back to 0 it goes
                    log.warning("cut the torn tail of an interrupted append from %s (back to %d bytes)", rel, pos)
                    return found
                break
            found += block.digests
            pos = end
        else:
            return found
    if found:
        return found
    # the file changed around the offset (a hand edit, a purge): look for the blocks anywhere
    return [d for block in intent.blocks if _anywhere(data, block) for d in block.digests]


def _prefixes(day: str) -> tuple[bytes, ...]:
    """What the journal writes before a block: a new file's title, or a blank line."""
    return f"# Daily Memory: {day}\n\n".encode(), b"\n", b"\n\n"


def _block_at(data: bytes, pos: int, block: IntentBlock, day: str) -> int | None:
    """The end of ``block`` if it starts at ``pos`` (after one of the prefixes), else None."""
    for prefix in _prefixes(day):
        start = pos + len(prefix)
        chunk = data[start:start + block.length]
        if data[pos:start] == prefix and len(chunk) == block.length \
                and hashlib.sha256(chunk).hexdigest() == block.sha256:
            return start + block.length
    return None


def _torn(tail: bytes, block: IntentBlock, day: str) -> bool:
    """``tail`` (the file from the offset on) is the start of ``block`` cut short by a kill."""
    if not tail:
        return False
    for prefix in _prefixes(day):
        expected = prefix + block.head.encode("utf-8") + b"\n"
        if len(tail) < len(prefix) + block.length and (tail.startswith(expected) or expected.startswith(tail)):
            return True
    return False


def _anywhere(data: bytes, block: IntentBlock) -> bool:
    head = block.head.encode("utf-8") + b"\n"
    at = data.find(head)
    while at >= 0:
        if hashlib.sha256(data[at:at + block.length]).hexdigest() == block.sha256:
            return True
        at = data.find(head, at + 1)
    return False
