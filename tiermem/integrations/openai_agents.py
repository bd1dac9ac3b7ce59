"""tiermem for the OpenAI Agents SDK (``pip install 'tiermem[openai-agents]'``; docs/openai-agents.md).

- :class:`TiermemSession` satisfies the SDK's ``Session`` protocol: the SDK's items are kept
  in their own table (:mod:`tiermem.storage.session_items`), so ``get_items`` returns exactly
  what was added, across restarts - except secrets: the strings of an item are redacted before it
  is stored, as every write is (R68, ``redact_secrets``), so an item that held an API key comes
  back with ``[REDACTED:<kind>]`` in its place (and a session id holding one is stored redacted
  with a short hash); and each ``add_items`` feeds the conversation so far
  to ``mem.queue.add`` — the same call an agent loop makes — so the Daily journal records it
  (redacted, each message once) and the update queue extracts facts from it. Tool calls and
  results become tool records; items without a text turn (``reasoning`` ...) are kept but not
  journaled (:mod:`tiermem.integrations.responses_items`).
- :func:`memory_tools`: ``remember`` and ``recall`` as SDK function tools (the MCP server's
  tools, :class:`tiermem.mcp.tools.MemoryTools`: same validation, same answers).
- :func:`memory_instructions`: the injection text (``mem.format_for_injection(query=...)``, the
  query being the session's latest user message) as the agent's instructions.

The SDK is async: every method here that touches the store runs it in a worker thread
(``asyncio.to_thread``), so the event loop never waits on SQLite or PostgreSQL; the ``*_sync``
methods do the same work for synchronous callers.

Journal ids: the session id is the conversation id; after :meth:`TiermemSession.clear_session`
the conversation goes on as ``<session id>#<generation>``, and every :data:`SEGMENT_MESSAGES`
messages a long session continues as ``...~<segment>`` so no queued item outgrows the queue's limits.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

try:
    from agents import Agent, FunctionTool, RunContextWrapper, function_tool
    from agents.memory import SessionSettings
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("tiermem.integrations.openai_agents needs the OpenAI Agents SDK:"
                      " pip install 'tiermem[openai-agents]'") from exc

from tiermem import validate
from tiermem.errors import FactNotFound, InvalidInput, NotFound
from tiermem.integrations.responses_items import encode_item, last_user_text, session_messages
from tiermem.mcp.tools import Category, Confidence, Content, MemoryTools, Query, TopK
from tiermem.queue.process import prepare_messages
from tiermem.storage.session_items import SessionHistory, SessionItemRepository

if TYPE_CHECKING:
    from tiermem.memory import Memory

__all__ = ["SEGMENT_MESSAGES", "TiermemSession", "memory_instructions", "memory_tools"]

SEGMENT_MESSAGES = 500  # messages per queued conversation (far below the queue's 10,000 and 4 MB)
Item = Any  # a Responses input item (``agents.items.TResponseInputItem``): a JSON object
Segment = tuple[str, list[dict[str, Any]]]  # a conversation id and its messages so far


def _nothing(history: SessionHistory) -> list[Segment]:
    return []


class TiermemSession:
    """An Agents SDK session whose history lives in ``mem``'s store, scoped to ``mem``'s user and agent.

    ``session_settings.limit`` (SDK) is the default ``limit`` of :meth:`get_items`. ``journal=False``
    keeps the items only (nothing reaches the journal or the queue)."""

    def __init__(self, mem: Memory, session_id: str, *, session_settings: SessionSettings | None = None,
                 journal: bool = True) -> None:
        self.mem = mem
        self.session_id = validate.thread_id(session_id)
        self.session_settings = session_settings
        self.journal = bool(journal)
        self._repo = SessionItemRepository(mem.db)
        self._lock = threading.Lock()  # one add/pop/clear at a time: the queue sees histories in order

    # --- the SDK's protocol (async) --------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The session's items, oldest first; with ``limit``, the latest ``limit`` of them."""
        return await asyncio.to_thread(self.get_items_sync, limit)

    async def add_items(self, items: list[Item]) -> None:
        """Append ``items`` (kept as added, secrets redacted) and queue the conversation so far for the journal."""
        await asyncio.to_thread(self.add_items_sync, items)

    async def pop_item(self) -> Item | None:
        """Remove and return the most recent item (``None`` when the session is empty)."""
        return await asyncio.to_thread(self.pop_item_sync)

    async def clear_session(self) -> None:
        """Remove every item; what was journaled stays in the journal."""
        await asyncio.to_thread(self.clear_session_sync)

    # --- the same, synchronous -------------------------------------------------------------
    def get_items_sync(self, limit: int | None = None) -> list[Item]:
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is None:
            return [json.loads(text) for text in self._repo.history(self.mem.scope, self.session_id).items]
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput(f"limit must be None or an integer >= 0, got {limit!r}")
        if limit == 0:
            return []
        return [json.loads(text) for text in self._repo.latest(self.mem.scope, self.session_id, limit)]

    def add_items_sync(self, items: list[Item]) -> None:
        if not isinstance(items, list):
            raise InvalidInput(f"items must be a list of session items, got {type(items).__name__}")
        texts = [encode_item(item, index) for index, item in enumerate(items)]
        if not texts:
            return
        with self._lock:
            plan = partial(self._segments, added=texts) if self.journal else _nothing
            segments = self._repo.append(self.mem.scope, self.session_id, texts, self.mem.clock.now(), plan)
            for thread, part in segments:
                self.mem.queue.add(thread, part)

    def pop_item_sync(self) -> Item | None:
        with self._lock:
            text = self._repo.pop(self.mem.scope, self.session_id)
        return None if text is None else json.loads(text)

    def clear_session_sync(self) -> None:
        with self._lock:
            self._repo.clear(self.mem.scope, self.session_id, self.mem.clock.now())

    # --- feeding the journal and the update queue -----------------------------------------
    def _segments(self, history: SessionHistory, added: list[str]) -> list[Segment]:
        """(conversation id, its messages so far) of each segment the ``added`` items reach after
        ``history``: what ``mem.queue.add`` gets. Raises ``InvalidInput`` for what the queue would
        refuse, before anything is stored."""
        messages = session_messages(json.loads(text) for text in history.items)
        before = len(messages)
        messages += session_messages((json.loads(text) for text in added), start=len(history.items))
        if before >= len(messages):
            return []  # the new items have no text turn (reasoning ...)
        base = self.session_id if history.generation == 0 else f"{self.session_id}#{history.generation}"
        out = []
        for segment in range(before // SEGMENT_MESSAGES, (len(messages) - 1) // SEGMENT_MESSAGES + 1):
            thread = base if segment == 0 else f"{base}~{segment}"
            part = messages[segment * SEGMENT_MESSAGES:(segment + 1) * SEGMENT_MESSAGES]
            prepare_messages(part, scrub=False)
            out.append((thread, part))
        return out

    def last_user_text(self) -> str | None:
        """The text of the session's latest user message (what :func:`memory_instructions` asks about)."""
        return last_user_text(json.loads(t) for t in self._repo.latest(self.mem.scope, self.session_id, 200))


def memory_instructions(mem: Memory, session: TiermemSession | None = None, *, preamble: str = "",
                        max_tokens: int | None = None
                        ) -> Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]:
    """An ``instructions`` function for ``Agent(instructions=...)``: ``preamble``, then the memory
    text (``mem.format_for_injection``) ranked for the session's latest user message when a
    ``session`` is given (the SDK stores the new input in the session before it asks for the
    instructions), else unranked."""
    if not isinstance(preamble, str):
        raise InvalidInput("preamble must be a string")

    def build() -> str:
        query = session.last_user_text() if session is not None else None
        query = query[:validate.MAX_QUERY_CHARS] if query else None
        text = mem.format_for_injection(max_tokens=max_tokens, query=query)
        return "\n\n".join(part for part in (preamble.strip(), text) if part)

    async def instructions(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        return await asyncio.to_thread(build)

    return instructions


def _tool_error(context: RunContextWrapper[Any], error: Exception) -> str:
    """What the model reads when a memory tool fails: tiermem's own message for bad arguments (it
    says what to fix), a generic one for anything else (a broken store is not the model's to know)."""
    for cause in (error, error.__cause__):
        if isinstance(cause, (InvalidInput, FactNotFound, NotFound)):
            return f"The memory tool failed: {cause}"
    return "The memory tool failed. Please try again."


def memory_tools(mem: Memory) -> list[FunctionTool]:
    """``remember`` and ``recall`` as SDK function tools over ``mem`` (bad input, e.g. an empty
    fact, comes back to the model as the error's message)."""
    tools = MemoryTools(mem)

    async def remember(content: Content, category: Category = "knowledge", confidence: Confidence = 1.0) -> str:
        return _json(await asyncio.to_thread(tools.remember, content, category, confidence))

    async def recall(query: Query, k: TopK = 5) -> str:
        return _json(await asyncio.to_thread(tools.recall, query, k))

    return [
        function_tool(remember, name_override="remember", failure_error_function=_tool_error, strict_mode=False,
                      description_override=_description(MemoryTools.remember)),
        function_tool(recall, name_override="recall", failure_error_function=_tool_error, strict_mode=False,
                      description_override=_description(MemoryTools.recall)),
    ]


def _json(answer: dict[str, Any]) -> str:
    """A tool's answer as JSON text (the SDK would send a dict as its Python ``str``)."""
    return json.dumps(answer, ensure_ascii=False)


def _description(method: Callable[..., Any]) -> str:
    return " ".join((method.__doc__ or "").split())
