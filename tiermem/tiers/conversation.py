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
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from tiermem.errors import TiermemError
from tiermem.storage.journal import FlushHashRepository
from tiermem.tiers.daily import MAX_RECORDS, DailyJournal, JournalWriter, check_kind, conversation_namespace
from tiermem.tiers.flush import kept_indices
from tiermem.tiers.records import TOOL_RESULT_MAX_CHARS, message_records, tool_names
from tiermem.tiers.turns import ChatMessage
from tiermem.types import Scope
from tiermem.validate import MAX_MESSAGE_CHARS

log = logging.getLogger(__name__)


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
        self.hashes = hashes
        self.scope = scope
        self.tool_max_chars = min(tool_max_chars, MAX_MESSAGE_CHARS)

    def namespace(self, conversation_id: str) -> str:
        return conversation_namespace(self.scope.user_id, self.scope.agent_name, conversation_id)

    def write(self, conversation_id: str, kind: str, messages: Sequence[NumberedMessage], *,
              at: datetime | None = None) -> JournalResult:
        """Append the messages not journaled before as one ``## <kind> (HH:MM)`` block (at ``at``,
        now by default) and remember their digests. A failed append raises ``StorageError`` and
        remembers nothing, so the caller may retry the same messages."""
        kept = [messages[i] for i in kept_indices([m.message for m in messages])]
        scheduled = len(messages) - len(kept)
        digests = [conversation_digest(m, self.journal.scrub) for m in kept]
        names = tool_names([m.message for m in kept])
        namespace = self.namespace(conversation_id)
        check_kind(kind)  # bad kind or time: InvalidInput before anything happens
        self.journal.moment(at)
        with self.journal.exclusive() as writer:
            seen = self.hashes.seen(namespace, digests) if self.hashes is not None else set()
            fresh: dict[str, NumberedMessage] = {}
            for digest, item in zip(digests, kept, strict=True):
                if digest not in seen and digest not in fresh:
                    fresh[digest] = item
            records = [r for item in fresh.values()
                       for r in message_records(item.message, names, self.tool_max_chars)]
            path = self._append(writer, kind, records, at)
            self._remember(namespace, list(fresh))
        return JournalResult(len(fresh), len(kept) - len(fresh), scheduled, len(records), path)

    def write_about(self, conversation_id: str, kind: str, about: Sequence[NumberedMessage],
                    lines: Sequence[str], *, at: datetime | None = None) -> Path | None:
        """Append an extra block (e.g. a session summary, R8) about the messages ``about``, unless
        a ``kind`` block about exactly these messages was written before: a replay after a
        restart writes it once. Returns the file written, or None when it was already there."""
        digests = [conversation_digest(m, self.journal.scrub) for m in about]
        identity = hashlib.sha256("\x1f".join([kind, *digests]).encode("utf-8")).hexdigest()
        block = self.journal.block(kind, list(lines), at)  # InvalidInput before anything happens
        namespace = self.namespace(conversation_id)
        with self.journal.exclusive() as writer:
            if self.hashes is not None and self.hashes.seen(namespace, [identity]):
                return None
            path = writer.write(block)
            self._remember(namespace, [identity])
        return path

    @staticmethod
    def _append(writer: JournalWriter, kind: str, records: list[str], at: datetime | None) -> Path | None:
        path = None
        for start in range(0, len(records), MAX_RECORDS):
            path = writer.append(kind, records[start:start + MAX_RECORDS], at=at)
        return path

    def _remember(self, namespace: str, digests: list[str]) -> None:
        if self.hashes is None or not digests:
            return
        try:  # stamped now, not with the record's time: retention ages digests from when they were written
            self.hashes.remember(namespace, digests, self.journal.now())
        except TiermemError as exc:  # the records stand; at worst a replay writes them again
            log.warning("could not record the journaled messages of %s: %s", namespace, exc)
