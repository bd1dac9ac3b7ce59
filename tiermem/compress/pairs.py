"""Validate that every tool call has exactly one result where the providers expect it.

OpenAI rejects an assistant message with ``tool_calls`` that is not followed by one ``role: tool``
message per call id; Anthropic rejects ``tool_use`` blocks whose ``tool_result`` blocks are not all
in the very next user message (results first in that message). Both reject a result that answers
no call. :func:`check_tool_pairs` reports every such problem; compression must never create one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tiermem.compress.messages import blocks, tool_calls, tool_results


def _result_blocks_first(message: Mapping[str, Any]) -> bool:
    kinds = [b.get("type") == "tool_result" for b in blocks(message) if isinstance(b, Mapping)]
    return kinds == sorted(kinds, reverse=True)


def check_tool_pairs(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every problem with the tool call/result pairing of ``messages``; empty when all is well.

    Checked: each call id is unique; each call is answered before the next non-result message
    (OpenAI) or in the next message (Anthropic); each result answers a pending call; Anthropic
    ``tool_result`` blocks come before any other block of their message.
    """
    problems: list[str] = []
    pending: dict[str, int] = {}
    seen: set[str] = set()

    def unanswered(before: int) -> None:
        for call_id, at in pending.items():
            where = f"before message {before}" if before < len(messages) else "at the end"
            problems.append(f"message {at}: tool call {call_id!r} has no result {where}")
        pending.clear()

    for index, message in enumerate(messages):
        results = tool_results(index, message)
        for result in results:
            if pending.pop(result.call_id, None) is None:
                problems.append(f"message {index}: tool result {result.call_id!r} answers no pending call")
        if message.get("role") == "tool":
            if not results:
                problems.append(f"message {index}: tool message without a tool_call_id")
            continue
        if results:  # Anthropic: the one user message answering the previous tool_use blocks
            if not _result_blocks_first(message):
                problems.append(f"message {index}: tool_result blocks must come before other blocks")
            unanswered(index)
            continue
        unanswered(index)
        for call in tool_calls(index, message):
            if call.call_id in seen:
                problems.append(f"message {index}: duplicate tool call id {call.call_id!r}")
            seen.add(call.call_id)
            pending[call.call_id] = index
        for problem in _calls_without_ids(index, message):
            problems.append(problem)
    unanswered(len(messages))
    return problems


def _calls_without_ids(index: int, message: Mapping[str, Any]) -> list[str]:
    raw_calls = message.get("tool_calls")
    missing = sum(
        1
        for call in (raw_calls if isinstance(raw_calls, list) else [])
        if not (isinstance(call, Mapping) and isinstance(call.get("id"), str))
    )
    missing += sum(
        1
        for b in blocks(message)
        if isinstance(b, Mapping) and b.get("type") == "tool_use" and not isinstance(b.get("id"), str)
    )
    return [f"message {index}: {missing} tool call(s) without an id"] if missing else []
