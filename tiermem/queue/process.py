"""What processing one queued item means (R8, R9, R28).

1. The thread's messages go to the Daily tier through the one conversation writer
   (:class:`~tiermem.tiers.conversation.ConversationJournal`): each message at its position in the
   thread (the item's ``first_position`` plus its index in the item), ``[SCHEDULED]`` pairs out,
   written only if neither this queue nor a session of the same id journaled it before — so a
   retry, a replayed item or the session flush never writes a record twice.
2. With an LLM, the messages not extracted before (the thread's own extraction hashes, R28, kept
   apart from the journal's) go through extraction; those hashes are recorded only after
   extraction succeeded, so a failure leaves the turns to the next attempt.

A process killed at any step leaves a state the retry recognises: the journal write is settled
from its write-ahead intent (each message once, :mod:`tiermem.tiers.conversation`); an extraction
that applied its facts but was killed before recording its hashes runs again, and the fact store
merges the same facts by their normalised text instead of adding them twice; the item itself
stays claimed until its lease runs out or its claimer is found gone (:mod:`tiermem.storage.outbox`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from tiermem import faults, validate
from tiermem.errors import InvalidInput
from tiermem.queue.worker import Deferred
from tiermem.redact import redact_data
from tiermem.storage.journal import FlushHashRepository
from tiermem.storage.outbox import OutboxItem, OutboxRepository
from tiermem.tiers.conversation import ConversationJournal, NumberedMessage
from tiermem.tiers.flush import prepare_flush
from tiermem.tiers.turns import to_message
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.memory import Memory

log = logging.getLogger(__name__)

CONVERSATION_KIND = "Conversation"
MAX_ITEM_BYTES = 4_000_000


def prepare_messages(messages: Any, scrub: bool) -> list[dict[str, Any]]:
    """Validate a thread (OpenAI or Anthropic shape) and redact secrets before it is persisted."""
    checked = validate.messages(messages)
    cleaned = [_scrub_message(m) for m in checked] if scrub else [dict(m) for m in checked]
    try:
        size = len(json.dumps(cleaned, ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"messages must be JSON-serialisable: {exc}") from exc
    if size > MAX_ITEM_BYTES:
        raise InvalidInput(f"the thread is {size} bytes; the limit per queued item is {MAX_ITEM_BYTES}")
    return cleaned


def conversation_journal(mem: Memory, hashes: FlushHashRepository) -> ConversationJournal:
    """The conversation writer of ``mem``'s scope (the same journal, hashes and lock as its sessions)."""
    return ConversationJournal(mem.daily, hashes, mem.scope, mem.settings.tool_result_max_chars)


def _scrub_message(message: dict[str, Any]) -> dict[str, Any]:
    """Every string of the message redacted: content, text blocks, tool-call arguments, tool inputs
    and results (R68)."""
    return dict(redact_data(message))


class QueueProcessor:
    """Processes outbox items for any scope of one root (other scopes get their own Memory)."""

    def __init__(self, memory: Memory, outbox: OutboxRepository, hashes: FlushHashRepository,
                 open_scope: Callable[[Scope], Memory]) -> None:
        self.memory = memory
        self.outbox = outbox
        self.hashes = hashes
        self.open_scope = open_scope

    def __call__(self, item: OutboxItem, force: bool = False) -> None:
        mem = self.memory if item.scope == self.memory.scope else self.open_scope(item.scope)
        thread = [NumberedMessage(position, to_message(m)) for position, m in item.positioned()]
        conversation_journal(mem, self.hashes).write(item.thread_id, CONVERSATION_KIND, thread)
        faults.point("queue.journaled")
        batch = prepare_flush([m.message for m in thread], partial(self._extracted, item))
        if not batch.messages:
            log.debug("queue item %s: nothing new to extract in thread %s", item.id, item.thread_id)
            return
        if mem.llm is not None:
            self._hold_small_batch(mem, item, batch.messages, force)
            mem.extract([m.to_dict() for m in batch.messages], thread_id=item.thread_id)
            faults.point("queue.extracted")
        self.outbox.mark_extracted(item.scope, item.thread_id, batch.digests, mem.clock.now())

    @staticmethod
    def _hold_small_batch(mem: Memory, item: OutboxItem, messages: list[Any], force: bool) -> None:
        """P4: extract once a thread has ``extract_min_turns`` new user turns, or once it has been
        quiet for ``extract_idle_seconds``, or on flush. Until then the Daily record is written
        and the item waits (its turns are visible to ``include_pending`` searches)."""
        settings = mem.settings
        user_turns = sum(1 for m in messages if m.role == "user" and not m.is_tool_result)
        quiet_until = item.enqueued_at + timedelta(seconds=settings.extract_idle_seconds)
        if force or user_turns >= settings.extract_min_turns or mem.clock.now() >= quiet_until:
            return
        raise Deferred(quiet_until, f"{user_turns} new user turns < {settings.extract_min_turns}; waiting")

    def _extracted(self, item: OutboxItem, digests: list[str]) -> set[str]:
        return self.outbox.extracted(item.scope, item.thread_id) & set(digests)
