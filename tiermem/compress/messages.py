"""A shape-agnostic view of chat messages: where the tool calls, tool results and turns are.

Two shapes are understood, and may even be mixed in one list:

- OpenAI: an assistant message carries ``tool_calls`` (``{id, type, function: {name,
  arguments}}``, ``arguments`` a JSON string); each result is a ``{"role": "tool",
  "tool_call_id", "content"}`` message.
- Anthropic: an assistant message's ``content`` holds ``tool_use`` blocks (``{id, name,
  input}``); the results are ``tool_result`` blocks (``{tool_use_id, content, is_error}``) in
  the next user message.

A *turn* starts at a user message that is not a tool result (a user message holding
``tool_result`` blocks continues the turn it answers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.tokens import count_tokens

SYSTEM_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class ToolCall:
    """One tool call: in ``messages[index]``, at ``position`` of its ``tool_calls`` list (OpenAI)
    or of its content blocks (Anthropic)."""

    index: int
    position: int
    call_id: str
    name: str
    key: str  # canonical JSON of the arguments: two calls are identical when name and key match
    anthropic: bool


@dataclass(frozen=True)
class ToolResult:
    """One tool result: ``position`` is the content-block index (Anthropic) or None (OpenAI)."""

    index: int
    position: int | None
    call_id: str
    text: str
    is_error: bool


def canonical_json(value: Any) -> str:
    """Sorted-key, compact JSON; values JSON cannot hold are written with ``repr``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def arguments_key(arguments: Any) -> str:
    """Canonical form of a call's arguments: a JSON string is parsed first (OpenAI sends them as
    text, so ``{"a":1,"b":2}`` and ``{"b": 2, "a": 1}`` are the same call); text that is not JSON
    is compared as it is."""
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = json.loads(text)
        except ValueError:
            return "raw:" + text
    try:
        return canonical_json(arguments)
    except (TypeError, ValueError):  # e.g. dict keys of mixed types cannot be sorted
        return "repr:" + repr(arguments)


def blocks(message: Mapping[str, Any]) -> list[Any]:
    """The content blocks of a message (empty when the content is a plain string)."""
    content = message.get("content")
    return content if isinstance(content, list) else []


def content_text(content: Any) -> str:
    """The readable text of a message's (or a tool result's) content."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "tool_result":
                    parts.append(content_text(block.get("content")))
        return "\n".join(parts)
    return str(content)


def is_tool_result_message(message: Mapping[str, Any]) -> bool:
    """A ``role: tool`` message, or a user message holding ``tool_result`` blocks."""
    if message.get("role") == "tool":
        return True
    return message.get("role") == "user" and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in blocks(message)
    )


def has_tool_calls(message: Mapping[str, Any]) -> bool:
    return bool(message.get("tool_calls")) or any(
        isinstance(b, Mapping) and b.get("type") == "tool_use" for b in blocks(message)
    )


def is_turn_start(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and not is_tool_result_message(message)


def turn_numbers(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """For each message, the number of the turn it belongs to (-1 before the first user turn)."""
    numbers: list[int] = []
    turn = -1
    for message in messages:
        if is_turn_start(message):
            turn += 1
        numbers.append(turn)
    return numbers


def tool_calls(index: int, message: Mapping[str, Any]) -> list[ToolCall]:
    """The tool calls an (assistant) message makes, in order."""
    found: list[ToolCall] = []
    raw_calls = message.get("tool_calls")
    for position, call in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and isinstance(call.get("id"), str):
            name = str(function.get("name", ""))
            found.append(ToolCall(index, position, call["id"], name, arguments_key(function.get("arguments")), False))
    for position, block in enumerate(blocks(message)):
        if isinstance(block, Mapping) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            name = str(block.get("name", ""))
            found.append(ToolCall(index, position, block["id"], name, arguments_key(block.get("input")), True))
    return found


def tool_results(index: int, message: Mapping[str, Any]) -> list[ToolResult]:
    """The tool results a message carries, with the error flag of :func:`result_failed`."""
    if message.get("role") == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            return []
        text = content_text(message.get("content"))
        flag = message.get("is_error")
        failed = flag if isinstance(flag, bool) else looks_failed(text)
        return [ToolResult(index, None, call_id, text, failed)]
    found: list[ToolResult] = []
    if message.get("role") != "user":
        return found
    for position, block in enumerate(blocks(message)):
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if isinstance(call_id, str):
                text = content_text(block.get("content"))
                found.append(ToolResult(index, position, call_id, text, block.get("is_error") is True))
    return found


# OpenAI tool messages carry no error flag, so failure is guessed from the text, conservatively:
# the first non-empty line opens like an error report ("Error: ...", "error[E0432]: ...",
# "fatal: ...", "Traceback (most recent call last):", "FileNotFoundError: ..."), or the first
# line or one of the last two lines ends with a non-zero exit code report ("[exit code: 1]",
# "Process exited with code 2", "exit status 127", "returncode=1"). Anything else counts as a
# success, so a failure reported only in the middle of an output is missed (never the reverse).
_ERROR_OPENING = re.compile(
    r"^(?:(?:error|fatal|exception)(?:\[[^\]]*\])?\s*:|traceback \(most recent call last\))", re.IGNORECASE
)
_PY_EXCEPTION_OPENING = re.compile(r"^[A-Z]\w*(?:Error|Exception):")
_EXIT_CODE = re.compile(
    r"\b(?:exit(?:ed)?(?:\s+with)?\s+(?:code|status)|return\s*code|returncode)\s*[:=]?\s*(-?\d+)\W{0,3}$",
    re.IGNORECASE,
)


def looks_failed(text: str) -> bool:
    """Whether an OpenAI-style tool result reads like a failure (see the rules above)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    if _ERROR_OPENING.match(lines[0]) or _PY_EXCEPTION_OPENING.match(lines[0]):
        return True
    for line in {lines[0], *lines[-2:]}:
        match = _EXIT_CODE.search(line)
        if match and int(match.group(1)) != 0:
            return True
    return False


def message_tokens(message: Mapping[str, Any]) -> int:
    """Tokens of a message's content text plus its tool calls' names and arguments."""
    total = 0
    content = message.get("content")
    if isinstance(content, str):
        total += count_tokens(content)
    for block in blocks(message):
        if isinstance(block, str):
            total += count_tokens(block)
        elif isinstance(block, Mapping):
            if isinstance(block.get("text"), str):
                total += count_tokens(block["text"])
            elif block.get("type") == "tool_result":
                total += count_tokens(content_text(block.get("content")))
            elif block.get("type") == "tool_use":
                total += count_tokens(str(block.get("name", ""))) + count_tokens(canonical_json(block.get("input")))
    raw_calls = message.get("tool_calls")
    for call in raw_calls if isinstance(raw_calls, list) else []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            arguments = function.get("arguments")
            args_text = arguments if isinstance(arguments, str) else canonical_json(arguments)
            total += count_tokens(str(function.get("name", ""))) + count_tokens(args_text)
    return total
