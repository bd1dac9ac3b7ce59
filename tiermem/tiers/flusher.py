"""Moving messages that leave a live session into the Daily tier (R2, R3, R8-R10).

:meth:`SessionFlusher.flush` writes the verbatim record of the messages at once, through the one
conversation writer (:class:`~tiermem.tiers.conversation.ConversationJournal`: ``[SCHEDULED]``
pairs out, each message once per conversation, whether the session or the update queue saw it
first). The agent never waits for an LLM: with one, the summary of the turns is made by a
background job and written as an *extra* ``## Session Summary (HH:MM)`` block, never instead of
the record (once per set of turns, so a replay after a restart does not repeat it); if the call
or its reply fails, there is no summary block and the record stands.

The session's running summary sees every turn that left the session, whether or not its record
was written by another path first: one condensed line per message at once, replaced by the LLM's
event lines when they arrive. A journal write that fails keeps the messages with the session and
retries them with its next flush.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Protocol

from tiermem.calls.trace import call_purpose, note_parse_failure
from tiermem.errors import TiermemError
from tiermem.tiers.conversation import ConversationJournal, NumberedMessage
from tiermem.tiers.flush import kept_indices
from tiermem.tiers.records import parse_summary, summary_lines, summary_request
from tiermem.tiers.worker import BackgroundWorker

if TYPE_CHECKING:
    from tiermem.models.protocols import ChatModel

log = logging.getLogger(__name__)

TRIMMED_KIND = "Trimmed Context"
SESSION_NOTES_KIND = "Session Notes"
SUMMARY_KIND = "Session Summary"


class FlushTarget(Protocol):
    """What the flusher needs from a session."""

    @property
    def conversation_id(self) -> str: ...

    def take_retry(self) -> list[NumberedMessage]: ...

    def keep_for_retry(self, messages: Sequence[NumberedMessage]) -> None: ...

    def add_summary_piece(self, lines: list[str]) -> int: ...

    def set_summary_piece(self, index: int, lines: list[str]) -> None: ...

    def summary_before(self, index: int) -> str: ...

    def notify_summary(self) -> None: ...


class SessionFlusher:
    """Writes what leaves sessions to one user's journal."""

    def __init__(self, conversations: ConversationJournal, llm: Callable[[], ChatModel | None],
                 worker: BackgroundWorker) -> None:
        self.conversations = conversations
        self.journal = conversations.journal
        self._llm_source = llm
        self.worker = worker

    def _llm(self) -> ChatModel | None:
        try:
            return self._llm_source()
        except TiermemError as exc:
            log.warning("no LLM for session summaries (%s); the verbatim records stand alone", exc)
            return None

    def flush(self, session: FlushTarget, kind: str, messages: Sequence[NumberedMessage]) -> None:
        """Record ``messages`` (plus any left over from a failed write) under ``## <kind> (HH:MM)``
        and add them to the running summary."""
        at = self.journal.now()
        self._write(session, kind, [*session.take_retry(), *messages], at)
        leaving = [messages[i] for i in kept_indices([m.message for m in messages])]
        lines = summary_lines([m.message for m in leaving])
        if not lines:
            return
        piece = session.add_summary_piece(lines)
        llm = self._llm()
        if llm is None:
            session.notify_summary()
        else:
            self.worker.submit(partial(self._summarise, llm, session, piece, at, leaving))

    def _write(self, session: FlushTarget, kind: str, messages: list[NumberedMessage], at: datetime) -> None:
        if not messages:
            return
        try:
            result = self.conversations.write(session.conversation_id, kind, messages, at=at)
        except TiermemError as exc:
            log.error("could not write %d messages of session %s to the journal (%s); kept for the next flush",
                      len(messages), session.conversation_id, exc)
            session.keep_for_retry(messages)
            return
        if result.skipped or result.scheduled:
            log.debug("flush of session %s: %d scheduled and %d already journaled messages skipped",
                      session.conversation_id, result.scheduled, result.skipped)

    @call_purpose("session_summary")  # the LLM call log's purpose
    def _summarise(self, llm: ChatModel, session: FlushTarget, piece: int, at: datetime,
                   messages: list[NumberedMessage]) -> None:
        """Background job: the LLM's event lines replace the piece and become an extra block
        (once per set of messages: a replay after a restart does not write it again)."""
        reply: str | None = None
        try:
            request = summary_request([m.message for m in messages], session.summary_before(piece), at.date())
            reply = llm.complete(request)
            lines = parse_summary(reply)
        except Exception as exc:  # any LLM failure: no summary block; the verbatim record stands (R8)
            note_parse_failure(reply, exc)  # a reply without event lines: its call log row is parse_failed
            log.warning("LLM summary of %d messages failed (%s); the verbatim record stands", len(messages), exc)
        else:
            session.set_summary_piece(piece, lines)
            try:
                self.conversations.write_about(session.conversation_id, SUMMARY_KIND, messages, lines, at=at)
            except TiermemError as exc:
                log.warning("could not write the session summary of %s: %s", session.conversation_id, exc)
        session.notify_summary()
