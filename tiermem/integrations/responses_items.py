"""Responses-API items (what the OpenAI Agents SDK keeps in a session) as chat messages.

The journal and the update queue read chat messages (:mod:`tiermem.tiers.turns`), so each
session item is translated, without importing the SDK:

- a message item (``{"role", "content"}``, with or without ``"type": "message"``) becomes a
  message of that role whose text is its text parts (``input_text``, ``output_text``, a
  ``refusal``; images and files as ``[image]`` / ``[file]``);
- ``function_call`` and ``custom_tool_call`` become an assistant message with one tool call, and so
  does any other ``*_call`` item (web search, file search, computer, shell, MCP ...), named by its
  ``name`` or its type; an MCP call that carries its ``output`` adds the result;
- ``*_call_output`` items (``function_call_output`` ...) become a ``tool`` message answering the
  call with the same ``call_id``;
- everything else (``reasoning``, ``item_reference``, ``compaction``, approval requests, unknown
  types) has no text turn: it is skipped, never an error.

Tool arguments and results are what programs wrote (a shell's colours, a binary dump): their
control characters become U+FFFD and a result longer than the message limit is cut with a notice,
so an agent's run never fails on them. What people and models wrote (message text) is validated
as every message is (:func:`tiermem.validate.messages`). The translation depends only on the items,
so the messages of a growing session grow by appending: a message keeps its position.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.tiers.turns import ROLES

ItemMessage = dict[str, Any]
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text"})
_ARGUMENT_KEYS = ("arguments", "input", "action", "queries", "code", "operation", "command")


def encode_item(item: Any, index: int = 0) -> str:
    """The JSON text an item is stored as; ``InvalidInput`` for what JSON cannot hold exactly
    (non-dicts, NaN, bytes or other objects, lone surrogates, nesting deeper than the limit)."""
    if not isinstance(item, Mapping):
        raise InvalidInput(f"session item {index} must be a dict (a Responses input item), got {type(item).__name__}")
    validate.json_depth(dict(item), f"session item {index}", unicode=True)
    try:
        return json.dumps(item, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"session item {index} is not plain JSON: {exc}") from exc


def item_messages(item: Mapping[str, Any], position: int) -> list[ItemMessage]:
    """The chat messages of one item (``position``: its index in the session, for ids it lacks)."""
    kind = item.get("type")
    role = item.get("role")
    if isinstance(role, str) and kind in (None, "message"):
        content = item.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise InvalidInput(f"session item {position}: message content must be a string or a list of parts,"
                               f" got {type(content).__name__}")
        return [{"role": role, "content": content_text(content)}] if role in ROLES else []
    if not isinstance(kind, str):
        return []
    if kind.endswith("_call_output"):
        return [_result(_call_id(item, position), item.get("output"))]
    if kind.endswith("_call"):
        call_id = _call_id(item, position)
        messages = [_call(call_id, str(item.get("name") or kind.removesuffix("_call")), _arguments(item))]
        if kind == "mcp_call" and (item.get("output") is not None or item.get("error") is not None):
            messages.append(_result(call_id, item.get("output") if item.get("output") is not None else item["error"]))
        return messages
    return []


def session_messages(items: Iterable[Mapping[str, Any]], start: int = 0) -> list[ItemMessage]:
    """The chat messages of a session's items, in order (``start``: the position of the first item)."""
    out: list[ItemMessage] = []
    for position, item in enumerate(items, start=start):
        out += item_messages(item, position)
    return out


def last_user_text(items: Iterable[Mapping[str, Any]]) -> str | None:
    """The text of the most recent user message among ``items`` (``None`` when there is none)."""
    found = None
    for item in items:
        if item.get("role") == "user" and item.get("type") in (None, "message"):
            text = content_text(item.get("content")).strip()
            found = text or found
    return found


def content_text(content: Any) -> str:
    """Readable text of a message's content: a string, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            texts.append(_part_text(part))
    return "\n".join(text for text in texts if text)


def _part_text(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind in _TEXT_PARTS or (kind is None and isinstance(part.get("text"), str)):
        return str(part.get("text") or "")
    if kind == "refusal":
        return str(part.get("refusal") or "")
    if kind in ("input_image", "image", "image_url"):
        return "[image]"
    if kind in ("input_file", "file"):
        return "[file]"
    if kind == "input_audio":
        return "[audio]"
    return ""


def _call_id(item: Mapping[str, Any], position: int) -> str:
    for key in ("call_id", "id"):
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
    return f"item_{position}"


def _program_text(value: Any) -> str:
    """A tool's arguments or output as one text: control characters shown as U+FFFD, cut at the
    message limit."""
    text = value if isinstance(value, str) else content_text(value) if isinstance(value, list) else _json(value)
    text = _CONTROL_RE.sub("\ufffd", text)
    limit = validate.MAX_MESSAGE_CHARS - 100
    if len(text) > limit:
        text = f"{text[:limit]} [… {len(text) - limit} characters omitted]"
    return text


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def _arguments(item: Mapping[str, Any]) -> str:
    for key in _ARGUMENT_KEYS:
        if item.get(key) is not None:
            return _program_text(item[key])
    return "{}"


def _call(call_id: str, name: str, arguments: str) -> ItemMessage:
    function = {"name": name, "arguments": arguments}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}]}


def _result(call_id: str, output: Any) -> ItemMessage:
    return {"role": "tool", "tool_call_id": call_id, "content": "" if output is None else _program_text(output)}
