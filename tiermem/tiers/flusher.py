"""Moving messages that leave a live session into the Daily tier (R2, R3, R8-R10).

:meth:`SessionFlusher.flush` first applies the shared flush rules (``[SCHEDULED]`` pairs out,
MD5 dedup against the hashes persisted for the session). Without an LLM it writes the
deterministic extractive record at once. With one, the turns have already left the session and
the record is written from a background job: the LLM's event lines, or — if the call or its
reply fails — the extractive record. Either way something is written; a write that fails keeps
the messages with the session and retries them with its next flush.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Protocol

from tiermem.errors import TiermemError
from tiermem.storage.journal import FlushHashRepository
from tiermem.tiers.daily import DailyJournal
from tiermem.tiers.flush import FlushBatch, prepare_flush
from tiermem.tiers.records import extractive_lines, parse_summary, summary_request
from tiermem.tiers.turns import ChatMessage
from tiermem.tiers.worker import BackgroundWorker

if TYPE_CHECKING:
    from tiermem.models.protocols import ChatModel

log = logging.getLogger(__name__)

TRIMMED_KIND = "Trimmed Context"
SESSION_NOTES_KIND = "Session Notes"


class FlushTarget(Protocol):
    """What the flusher needs from a session."""

    @property
    def namespace(self) -> str: ...

    def take_retry(self) -> list[ChatMessage]: ...

    def keep_for_retry(self, messages: Sequence[ChatMessage]) -> None: ...

    def add_summary_piece(self, lines: list[str]) -> int: ...

    def set_summary_piece(self, index: int, lines: list[str]) -> None: ...

    def summary_before(self, index: int) -> str: ...

    def notify_summary(self) -> None: ...


class SessionFlusher:
    """Writes what leaves sessions to one user's journal."""

    def __init__(self, journal: DailyJournal, hashes: FlushHashRepository | None,
                 llm: Callable[[], ChatModel | None], worker: BackgroundWorker) -> None:
        self.journal = journal
        self.hashes = hashes
        self._llm_source = llm
        self.worker = worker

    def _llm(self) -> ChatModel | None:
        try:
            return self._llm_source()
        except TiermemError as exc:
            log.warning("no LLM for session summaries (%s); writing extractive records", exc)
            return None

    def _seen(self, namespace: str, digests: list[str]) -> set[str]:
        return self.hashes.seen(namespace, digests) if self.hashes is not None else set()

    def flush(self, session: FlushTarget, kind: str, messages: Sequence[ChatMessage]) -> None:
        """Record ``messages`` (plus any left over from a failed write) under ``## <kind> (HH:MM)``."""
        batch = prepare_flush([*session.take_retry(), *messages], partial(self._seen, session.namespace))
        if batch.scheduled_dropped or batch.duplicates_dropped:
            log.debug("flush of %s: %d scheduled and %d already flushed messages skipped",
                      session.namespace, batch.scheduled_dropped, batch.duplicates_dropped)
        if not batch.messages:
            return
        at = self.journal.now()
        lines = extractive_lines(batch.messages)
        if not lines:  # only empty messages: nothing to say, but they are done
            self._remember(session.namespace, batch, at)
            return
        piece = session.add_summary_piece(lines)
        llm = self._llm()
        if llm is None:
            self._write(session, kind, lines, at, batch)
        else:
            self.worker.submit(partial(self._summarise_then_write, llm, session, kind, piece, at, batch, lines))

    def _summarise_then_write(self, llm: ChatModel, session: FlushTarget, kind: str, piece: int,
                              at: datetime, batch: FlushBatch, lines: list[str]) -> None:
        try:
            request = summary_request(batch.messages, session.summary_before(piece), at.date())
            lines = parse_summary(llm.complete(request))
            session.set_summary_piece(piece, lines)
        except Exception as exc:  # any LLM failure: the extractive record stands in (R8)
            log.warning("LLM summary of %d messages failed (%s); writing the extractive record",
                        len(batch.messages), exc)
        self._write(session, kind, lines, at, batch)

    def _write(self, session: FlushTarget, kind: str, lines: list[str], at: datetime, batch: FlushBatch) -> None:
        try:
            self.journal.append(kind, lines, at=at)
        except TiermemError as exc:
            log.error("could not write %d messages of %s to the journal (%s); kept for the next flush",
                      len(batch.messages), session.namespace, exc)
            session.keep_for_retry(batch.messages)
            return
        self._remember(session.namespace, batch, at)
        session.notify_summary()

    def _remember(self, namespace: str, batch: FlushBatch, at: datetime) -> None:
        if self.hashes is None:
            return
        try:
            self.hashes.remember(namespace, batch.digests, at)
        except TiermemError as exc:  # the record is written; at worst a replay writes it again
            log.warning("could not record flushed message hashes of %s: %s", namespace, exc)
