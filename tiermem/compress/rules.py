"""The three DCP-style rules. Each edits the working copy in place and reports what it did.

None of them removes a message, a content block, a tool call or an id: they only replace text
(a tool result's content, a message's content, a call's arguments) with a shorter placeholder.
So tool call/result pairs stay whole and user/assistant alternation stays as it was — dropping a
duplicate message instead would leave two messages of one role side by side (Anthropic rejects
that) or orphan a tool pair. A replacement that would not save tokens is not made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tiermem.compress.messages import (
    ToolCall,
    ToolResult,
    canonical_json,
    content_text,
    has_tool_calls,
    is_tool_result_message,
    message_tokens,
)
from tiermem.tokens import count_tokens

SUPERSEDED = "[tiermem: output superseded by a later identical call to {tool}]"
DUPLICATE = "[tiermem: duplicate of a later {role} message]"
PURGED_INPUT = {"_tiermem": "[tiermem: input of this failed call removed; its error is kept]"}


@dataclass(frozen=True)
class CompressionAction:
    """One replacement: which rule, where, and how many tokens it saved.

    ``rule`` is ``"superseded_output"``, ``"duplicate_message"`` or ``"purged_error_input"``;
    ``index`` is the message's position (unchanged: no message is ever removed); ``original``
    is the text that was replaced.
    """

    rule: str
    index: int
    tokens_saved: int
    detail: str
    tool: str | None = None
    tool_call_id: str | None = None
    original: str = field(default="", repr=False)


@dataclass
class Analysis:
    """What the rules need to know about the message list, computed once."""

    work: list[dict[str, Any]]
    editable: list[bool]
    turns: list[int]
    last_turn: int
    calls: list[ToolCall]
    results: dict[str, ToolResult]  # by call id; ids used more than once are left out
    protect_tools: frozenset[str]

    def pair_editable(self, call: ToolCall) -> bool:
        result = self.results.get(call.call_id)
        return (
            result is not None
            and call.name not in self.protect_tools
            and self.editable[call.index]
            and self.editable[result.index]
        )


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _set_result_text(work: list[dict[str, Any]], result: ToolResult, text: str) -> None:
    if result.position is None:
        work[result.index]["content"] = text
    else:
        work[result.index]["content"][result.position]["content"] = text


def supersede_outputs(analysis: Analysis) -> list[CompressionAction]:
    """R50: of identical calls (same tool, same canonical arguments) keep only the latest output."""
    latest: dict[tuple[str, str], ToolCall] = {}
    for call in analysis.calls:
        if call.call_id in analysis.results:
            latest[(call.name, call.key)] = call
    actions: list[CompressionAction] = []
    for call in analysis.calls:
        newest = latest.get((call.name, call.key))
        if newest is None or newest is call or not analysis.pair_editable(call):
            continue
        result = analysis.results[call.call_id]
        placeholder = SUPERSEDED.format(tool=call.name)
        saved = count_tokens(result.text) - count_tokens(placeholder)
        if saved <= 0:
            continue
        _set_result_text(analysis.work, result, placeholder)
        actions.append(
            CompressionAction(
                "superseded_output",
                result.index,
                saved,
                f"{call.name} {_short(call.key)} (latest output in message {analysis.results[newest.call_id].index})",
                call.name,
                call.call_id,
                result.text,
            )
        )
    return actions


def _text_only(message: Mapping[str, Any]) -> bool:
    return (
        message.get("role") in ("user", "assistant")
        and not has_tool_calls(message)
        and not is_tool_result_message(message)
    )


def collapse_duplicates(analysis: Analysis) -> list[CompressionAction]:
    """R50: a text message (no tool calls or results) repeated later with the same role and
    content becomes a placeholder pointing at the later copy; the latest copy stays."""
    last_seen: dict[str, int] = {}
    for index, message in enumerate(analysis.work):
        if _text_only(message):
            last_seen[f"{message['role']}:{canonical_json(message.get('content'))}"] = index
    actions: list[CompressionAction] = []
    for index, message in enumerate(analysis.work):
        if not (analysis.editable[index] and _text_only(message)):
            continue
        later = last_seen[f"{message['role']}:{canonical_json(message.get('content'))}"]
        if later == index:
            continue
        placeholder = DUPLICATE.format(role=message["role"])
        saved = message_tokens(message) - count_tokens(placeholder)
        if saved <= 0:
            continue
        original = content_text(message.get("content"))
        message["content"] = placeholder
        actions.append(
            CompressionAction("duplicate_message", index, saved, f"same as message {later}", original=original)
        )
    return actions


def purge_error_inputs(analysis: Analysis, after_turns: int) -> list[CompressionAction]:
    """R51: the arguments of a failed call at least ``after_turns`` turns old become a placeholder;
    the error text in its result stays."""
    actions: list[CompressionAction] = []
    for call in analysis.calls:
        result = analysis.results.get(call.call_id)
        if result is None or not result.is_error or not analysis.pair_editable(call):
            continue
        if analysis.last_turn - analysis.turns[call.index] < after_turns:
            continue
        message = analysis.work[call.index]
        if call.anthropic:
            block = message["content"][call.position]
            original = canonical_json(block.get("input"))
            replacement: Any = dict(PURGED_INPUT)
            replacement_text = canonical_json(replacement)
        else:
            function = message["tool_calls"][call.position]["function"]
            raw = function.get("arguments")
            original = raw if isinstance(raw, str) else canonical_json(raw)
            replacement = replacement_text = json.dumps(PURGED_INPUT)
        saved = count_tokens(original) - count_tokens(replacement_text)
        if saved <= 0:
            continue
        if call.anthropic:
            block["input"] = replacement
        else:
            function["arguments"] = replacement
        actions.append(
            CompressionAction(
                "purged_error_input",
                call.index,
                saved,
                f"{call.name} failed in message {result.index}",
                call.name,
                call.call_id,
                original,
            )
        )
    return actions
