"""The Context tier: live sessions (R1-R5).

A :class:`Session` holds its messages (either provider's shape, tool-call ids kept) with a token
count per message and in total, and a running summary. When the total passes the session's
limit, the oldest *whole* turns — never the current one, never a tool call without its result —
leave the session at once (down to :data:`TRIM_TO` of the limit) and are flushed to the Daily
tier as ``## Trimmed Context (HH:MM)``; :meth:`Session.end` flushes the rest as
``## Session Notes (HH:MM)``. System (and developer) messages are instructions, not
conversation: they stay while the session lives and are not journalled.

The session id is the conversation id of the journal (shared with a queue thread of the same id,
R9), and each message keeps its position in the conversation: the number of messages added to
the session before it (system messages included), counted across trims.

:class:`SessionStore` holds at most ``max_live`` sessions; adding one more flushes the least
recently used session first, then drops it, so nothing is lost. A dropped :class:`Session` object
stays usable: its next message makes it live again (starting from its summary).
"""

from __future__ import annotations

import copy
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.tiers.conversation import NumberedMessage
from tiermem.tiers.flusher import SESSION_NOTES_KIND, TRIMMED_KIND, SessionFlusher
from tiermem.tiers.turns import PINNED_ROLES, ChatMessage, to_message, turn_spans
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.plans.plan import Plan

log = logging.getLogger(__name__)

SummaryCallback = Callable[[str], None]
TRIM_TO = 0.75  # a trim goes down to this share of the limit, so trims (and LLM calls) stay rare
MIN_SUMMARY_TOKENS = 256
SUMMARY_HEADER = "Summary of the earlier conversation:"


class Session:
    """One live conversation. Get it from ``Memory.session(session_id)``."""

    def __init__(self, session_id: str, store: SessionStore, max_tokens: int,
                 on_summary: SummaryCallback | None) -> None:
        self.id = session_id
        self.max_tokens = max_tokens
        self.on_summary = on_summary
        self._store = store
        self._lock = threading.RLock()
        self._entries: list[NumberedMessage] = []  # live messages with their positions
        self._added = 0  # messages added so far: the position of the next one
        self._pieces: list[list[str]] = []
        self._retry: list[NumberedMessage] = []
        self.plan: Plan | None = None  # the scope's active plan when the session started (R55)
        self.continuation: str | None = None  # that plan's continuation prompt

    # --- adding ------------------------------------------------------------------------------
    def add(self, role: str, content: Any, **fields: Any) -> ChatMessage:
        """Add ``{"role": role, "content": content, **fields}`` (e.g. ``tool_call_id=...``)."""
        return self.add_message({"role": role, "content": content, **fields})

    def add_message(self, message: Mapping[str, Any]) -> ChatMessage:
        """Add one message dict (OpenAI or Anthropic shape); may trim the oldest turns."""
        entry = to_message(message)
        self._store.touch(self)
        with self._lock:
            self._entries.append(NumberedMessage(self._added, entry))
            self._added += 1
            trimmed = self._take_oldest_turns()
            if trimmed:
                self._store.flusher.flush(self, TRIMMED_KIND, trimmed)
        return entry

    def add_messages(self, messages: Sequence[Mapping[str, Any]]) -> list[ChatMessage]:
        """Add several messages; all are validated before any is added."""
        entries = [to_message(m) for m in messages]
        return [self.add_message(e.raw) for e in entries]

    def _take_oldest_turns(self) -> list[NumberedMessage]:
        """Remove and return the oldest whole turns while the session is over its limit."""
        total = sum(e.message.tokens for e in self._entries)
        if total <= self.max_tokens:
            return []
        target = int(self.max_tokens * TRIM_TO)
        talk = [e for e in self._entries if e.message.role not in PINNED_ROLES]
        cut = 0
        for start, end in turn_spans([e.message for e in talk])[:-1]:  # the current turn always stays
            if total <= target:
                break
            total -= sum(e.message.tokens for e in talk[start:end])
            cut = end
        if cut == 0:
            return []
        leaving = {e.position for e in talk[:cut]}
        self._entries = [e for e in self._entries if e.position not in leaving]
        return talk[:cut]

    # --- reading -----------------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The live messages as given (deep copies), oldest first."""
        with self._lock:
            return [e.message.to_dict() for e in self._entries]

    @property
    def entries(self) -> list[ChatMessage]:
        """The live messages, normalised (role, text, tool-call ids, tokens)."""
        with self._lock:
            return [e.message for e in self._entries]

    @property
    def message_tokens(self) -> list[int]:
        """Tokens of each live message, in the order of :attr:`messages`."""
        with self._lock:
            return [e.message.tokens for e in self._entries]

    @property
    def token_count(self) -> int:
        """Tokens of all live messages."""
        with self._lock:
            return sum(e.message.tokens for e in self._entries)

    @property
    def summary(self) -> str:
        """The running summary of what left the session (newest lines kept within a budget)."""
        with self._lock:
            return self._render_summary(len(self._pieces))

    def _render_summary(self, pieces: int) -> str:
        from tiermem.tokens import count_tokens

        lines = [f"- {line}" for piece in self._pieces[:pieces] for line in piece]
        budget = max(MIN_SUMMARY_TOKENS, self.max_tokens // 4)
        kept: list[str] = []
        used = 0
        for line in reversed(lines):
            used += count_tokens(line) + 1
            if used > budget and kept:
                break
            kept.append(line)
        return "\n".join(reversed(kept))

    # --- ending ------------------------------------------------------------------------------
    def end(self) -> None:
        """Flush what was not flushed yet as ``## Session Notes (HH:MM)`` and leave the store."""
        self._store.release(self)
        self._flush_rest()

    def _flush_rest(self) -> None:
        with self._lock:
            rest = [e for e in self._entries if e.message.role not in PINNED_ROLES]
            self._entries = []
            if rest or self._retry:
                self._store.flusher.flush(self, SESSION_NOTES_KIND, rest)

    # --- what the flusher needs (FlushTarget) ------------------------------------------------------
    @property
    def conversation_id(self) -> str:
        return self.id

    def take_retry(self) -> list[NumberedMessage]:
        with self._lock:
            retry, self._retry = self._retry, []
            return retry

    def keep_for_retry(self, messages: Sequence[NumberedMessage]) -> None:
        with self._lock:
            self._retry = [*messages, *self._retry]

    def add_summary_piece(self, lines: list[str]) -> int:
        with self._lock:
            self._pieces.append(list(lines))
            return len(self._pieces) - 1

    def set_summary_piece(self, index: int, lines: list[str]) -> None:
        with self._lock:
            self._pieces[index] = list(lines)

    def summary_before(self, index: int) -> str:
        with self._lock:
            return self._render_summary(index)

    def notify_summary(self) -> None:
        callback = self.on_summary
        if callback is None:
            return
        try:
            callback(self.summary)
        except Exception:  # a user's callback never breaks the flush
            log.exception("on_summary callback of session %s failed", self.id)

    def __repr__(self) -> str:
        return f"Session({self.id!r}, messages={len(self._entries)}, tokens={self.token_count})"


class SessionStore:
    """The live sessions of one Memory, least recently used first."""

    def __init__(self, flusher: SessionFlusher, scope: Scope, max_live: int, max_tokens: int) -> None:
        self.flusher = flusher
        self.scope = scope
        self.max_live = max_live
        self.max_tokens = max_tokens
        self._live: OrderedDict[str, Session] = OrderedDict()
        self._known: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.on_start: list[Callable[[Session], None]] = []  # run once for each new session (R55)

    def get(self, session_id: str, *, on_summary: SummaryCallback | None = None,
            max_tokens: int | None = None) -> Session:
        """The session ``session_id`` (created if new); it becomes the most recently used."""
        validate.thread_id(session_id)
        limit = None if max_tokens is None else validate.positive_int(max_tokens, "max_tokens", 100_000_000)
        if on_summary is not None and not callable(on_summary):
            raise InvalidInput("on_summary must be callable")
        created = False
        with self._lock:
            session = self._live.get(session_id) or self._known.get(session_id)
            if session is None:
                session = Session(session_id, self, limit or self.max_tokens, on_summary)
                self._known[session_id] = session
                created = True
        if on_summary is not None:
            session.on_summary = on_summary
        if limit is not None:
            session.max_tokens = limit
        self.touch(session)
        if created:
            for hook in list(self.on_start):
                hook(session)
        return session

    def touch(self, session: Session) -> None:
        """Mark ``session`` most recently used (making it live again if it was dropped)."""
        with self._lock:
            self._live[session.id] = session
            self._live.move_to_end(session.id)
            victims: list[Session] = []
            while len(self._live) > self.max_live:
                victims.append(self._live.popitem(last=False)[1])
        for victim in victims:
            log.info("session %s evicted (more than %d live sessions); flushing it first", victim.id, self.max_live)
            victim._flush_rest()

    def release(self, session: Session) -> None:
        with self._lock:
            if self._live.get(session.id) is session:
                del self._live[session.id]

    def live(self) -> list[str]:
        """Ids of the live sessions, least recently used first."""
        with self._lock:
            return list(self._live)

    def close(self) -> None:
        """End every live session (flushing it)."""
        with self._lock:
            sessions = list(self._live.values())
            self._live.clear()
        for session in sessions:
            session._flush_rest()


def inject_summary(messages: Sequence[Mapping[str, Any]], summary: str, role: str = "system") -> list[dict[str, Any]]:
    """A new message list with ``summary`` as one message after the leading system messages.

    A summary injected before (recognised by its header) is replaced, not repeated; an empty
    summary returns a plain copy. Use ``role="user"`` for providers without system messages in
    the list (Anthropic).
    """
    if role not in ("system", "developer", "user"):
        raise InvalidInput("role must be 'system', 'developer' or 'user'")
    if not isinstance(summary, str):
        raise InvalidInput(f"summary must be a string, got {type(summary).__name__}")
    copies = [copy.deepcopy(dict(m)) for m in messages]
    if not summary.strip():
        return copies
    kept = [m for m in copies if not (isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_HEADER))]
    at = 0
    while at < len(kept) and kept[at].get("role") in PINNED_ROLES:
        at += 1
    kept.insert(at, {"role": role, "content": f"{SUMMARY_HEADER}\n{summary.strip()}"})
    return kept
