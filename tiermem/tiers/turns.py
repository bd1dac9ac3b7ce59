"""Chat messages in either provider's shape, seen the same way; and turns.

Understood shapes:

- OpenAI: ``{"role", "content"}`` with ``content`` a string, ``None`` or a list of parts
  (``{"type": "text", "text"}``, images, ...); an assistant message may carry ``tool_calls``
  (``{"id", "type": "function", "function": {"name", "arguments"}}``); each result is a
  ``{"role": "tool", "tool_call_id", "content"}`` message.
- Anthropic: ``content`` is a string or a list of blocks: ``text``, ``tool_use`` (``id``,
  ``name``, ``input``), ``tool_result`` (``tool_use_id``, ``content``, ``is_error``), images,
  ``thinking`` ...; tool results travel in a user message.

A *turn* is a user message with everything that answers it: assistant replies, tool calls and
their results. A user message that only carries tool results continues its turn, and no turn
starts while a tool call is still waiting for its result, so cutting a list at turn boundaries
never separates a call from its result.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tiermem.errors import InvalidInput
from tiermem.tokens import count_tokens
from tiermem.validate import MAX_MESSAGE_CHARS, json_depth

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
PINNED_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class ToolCall:
    """A call an assistant message makes (OpenAI ``tool_calls`` entry or Anthropic ``tool_use``)."""

    id: str
    name: str
    arguments: str  # JSON text (OpenAI sends text; Anthropic's ``input`` is serialised)


@dataclass(frozen=True)
class ChatMessage:
    """One message, whatever its shape: role, readable text, tool-call ids, tokens, original dict."""

    role: str
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_result_ids: tuple[str, ...] = ()  # the calls this message answers
    name: str | None = None
    tokens: int = 0
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def tool_call_ids(self) -> tuple[str, ...]:
        return tuple(call.id for call in self.tool_calls)

    @property
    def is_tool_result(self) -> bool:
        return bool(self.tool_result_ids) or self.role in ("tool", "function")

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the message as it was given."""
        return copy.deepcopy(dict(self.raw))


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def block_text(content: Any) -> str:
    """Readable text of a content value: a string, or a list of text/result/media blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text") or (kind is None and "text" in block):
            parts.append(str(block.get("text", "")))
        elif kind == "tool_result":
            parts.append(block_text(block.get("content")))
        elif kind in ("image", "image_url", "input_image"):
            parts.append("[image]")
        elif kind in ("document", "file", "input_file"):
            parts.append("[file]")
    return "\n".join(p for p in parts if p)


def _openai_calls(raw: Any) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidInput("tool_calls must be a list")
    calls: list[ToolCall] = []
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            raise InvalidInput("each tool call needs a string 'id'")
        function = item.get("function")
        function = function if isinstance(function, Mapping) else {}
        calls.append(ToolCall(item["id"], str(function.get("name", "")), _json_text(function.get("arguments", ""))))
    return calls


def _anthropic_calls(content: Any) -> tuple[list[ToolCall], list[str]]:
    calls: list[ToolCall] = []
    results: list[str] = []
    if not isinstance(content, list):
        return calls, results
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_use":
            if not isinstance(block.get("id"), str):
                raise InvalidInput("each tool_use block needs a string 'id'")
            calls.append(ToolCall(block["id"], str(block.get("name", "")), _json_text(block.get("input", {}))))
        elif block.get("type") == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise InvalidInput("each tool_result block needs a string 'tool_use_id'")
            results.append(block["tool_use_id"])
    return calls, results


def to_message(data: Mapping[str, Any] | ChatMessage, *, count: bool = True) -> ChatMessage:
    """Read one message dict of either shape; a wrong shape raises ``InvalidInput``. ``count=False``
    leaves ``tokens`` at 0 (a caller that only journals the message need not load the tokenizer)."""
    if isinstance(data, ChatMessage):
        return data
    if not isinstance(data, Mapping):
        raise InvalidInput(f"a message must be a dict, got {type(data).__name__}")
    json_depth(dict(data), "a message")  # it is deep-copied and stored as JSON
    role = data.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidInput(f"message role {role!r} is not one of {', '.join(sorted(ROLES))}")
    content = data.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise InvalidInput("message content must be a string, a list of blocks or None")
    text = block_text(content)
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidInput(f"message is {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}")
    calls = _openai_calls(data.get("tool_calls"))
    block_calls, results = _anthropic_calls(content)
    calls += block_calls
    if role == "tool":
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str):
            raise InvalidInput("a 'tool' message needs a string 'tool_call_id'")
        results.append(call_id)
    name = data.get("name")
    name = name if isinstance(name, str) else None
    tokens = count_tokens(text) + sum(count_tokens(c.name) + count_tokens(c.arguments) for c in calls) if count else 0
    return ChatMessage(role, text, tuple(calls), tuple(results), name, tokens, copy.deepcopy(dict(data)))


def turn_spans(messages: Sequence[ChatMessage]) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges of the turns of ``messages``, in order, covering all of them.

    A new turn starts at a user message that carries no tool results, unless a tool call is
    still waiting for its result. Messages before the first user message form a turn of their own.
    """
    spans: list[tuple[int, int]] = []
    pending: set[str] = set()
    start = 0
    for index, message in enumerate(messages):
        opens = message.role == "user" and not message.is_tool_result
        if opens and index > start and not pending:
            spans.append((start, index))
            start = index
        pending.difference_update(message.tool_result_ids)
        pending.update(message.tool_call_ids)
    if start < len(messages):
        spans.append((start, len(messages)))
    return spans
