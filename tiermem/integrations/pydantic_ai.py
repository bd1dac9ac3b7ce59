"""tiermem for Pydantic AI (``pip install 'tiermem[pydantic-ai]'``; docs/pydantic-ai.md).

- :func:`memory_toolset`: a ``FunctionToolset`` with ``remember``, ``recall`` and ``forget`` — the
  MCP server's tools (:class:`tiermem.mcp.tools.MemoryTools`), so validation, redaction and the
  answers are the same — which by default also brings the memory text as instructions.
- :func:`memory_instructions`: an instructions function, ``mem.format_for_injection(query=...)``
  ranked for the run's user prompt.

Pydantic AI runs async; the store's work runs in a worker thread (``asyncio.to_thread``), so
the event loop never waits on SQLite or PostgreSQL. Bad tool arguments (an empty fact, an unknown
category, a fact id that does not exist) go back to the model as a retry prompt carrying
tiermem's message, so it can correct itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

try:
    from pydantic_ai import ModelRetry, RunContext
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("tiermem.integrations.pydantic_ai needs Pydantic AI: pip install 'tiermem[pydantic-ai]'") from exc

from tiermem import validate
from tiermem.errors import FactNotFound, InvalidInput, NotFound
from tiermem.mcp.tools import Category, Confidence, Content, FactId, MemoryTools, Query, TopK

if TYPE_CHECKING:
    from tiermem.memory import Memory

__all__ = ["memory_instructions", "memory_toolset"]

Instructions = Callable[[RunContext[Any]], Awaitable[str]]


def prompt_text(prompt: str | Sequence[Any] | None) -> str | None:
    """The text of a run's user prompt (its text parts when it is a list of contents)."""
    if prompt is None:
        return None
    text = prompt if isinstance(prompt, str) else "\n".join(part for part in prompt if isinstance(part, str))
    text = text.strip()[:validate.MAX_QUERY_CHARS]
    return text or None


def memory_instructions(mem: Memory, *, max_tokens: int | None = None) -> Instructions:
    """``Agent(instructions=memory_instructions(mem))``: the memory text for the system prompt,
    ranked for the run's user prompt (``ctx.prompt``)."""

    async def instructions(ctx: RunContext[Any]) -> str:
        query = prompt_text(ctx.prompt)
        return await asyncio.to_thread(mem.format_for_injection, max_tokens, query)

    return instructions


async def _run(call: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``call(*args)`` in a worker thread; bad arguments and unknown ids become a ``ModelRetry`` (the
    model reads tiermem's message and may try again); other failures propagate."""
    try:
        return await asyncio.to_thread(call, *args)
    except (InvalidInput, FactNotFound, NotFound) as exc:  # the model's mistake; a broken store is not
        raise ModelRetry(str(exc)) from exc


def memory_toolset(mem: Memory, *, instructions: bool = True, max_tokens: int | None = None,
                   toolset_id: str = "tiermem") -> FunctionToolset[Any]:
    """A toolset with ``remember``, ``recall`` and ``forget`` over ``mem``; with ``instructions``
    (default) it also adds :func:`memory_instructions` to every run that uses it."""
    tools = MemoryTools(mem)

    async def remember(content: Content, category: Category = "knowledge", confidence: Confidence = 1.0
                       ) -> dict[str, Any]:
        return await _run(tools.remember, content, category, confidence)

    async def recall(query: Query, k: TopK = 5) -> dict[str, Any]:
        return await _run(tools.recall, query, k)

    async def forget(id: FactId) -> dict[str, Any]:  # noqa: A002 - the tool's argument name
        return await _run(tools.forget, id)

    for function, method in ((remember, MemoryTools.remember), (recall, MemoryTools.recall),
                             (forget, MemoryTools.forget)):
        function.__doc__ = method.__doc__  # the tool descriptions the model reads
    extra = memory_instructions(mem, max_tokens=max_tokens) if instructions else None
    return FunctionToolset([remember, recall, forget], id=toolset_id, instructions=extra)
