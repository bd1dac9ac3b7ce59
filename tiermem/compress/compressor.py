"""``compress``: DCP-style context compression of a chat message list (R50-R53).

A pure function: it copies the input, replaces text in the copy and reports what it did. What is
never touched: system/developer messages, the first user message, everything before it, the
last ``protect_turns`` turns, and any tool pair whose call or result lies in that protected part
or whose tool is listed in ``protect_tools``. Messages, content blocks and ids are never removed,
so every tool call keeps its result (see :func:`tiermem.compress.pairs.check_tool_pairs`).
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.compress.messages import (
    SYSTEM_ROLES,
    ToolResult,
    is_turn_start,
    message_tokens,
    tool_calls,
    tool_results,
    turn_numbers,
)
from tiermem.compress.rules import (
    Analysis,
    CompressionAction,
    collapse_duplicates,
    purge_error_inputs,
    supersede_outputs,
)
from tiermem.compress.summary import summarise
from tiermem.errors import InvalidInput, ProviderError

if TYPE_CHECKING:
    from tiermem.models.protocols import ChatModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompressionResult:
    """The compressed copy and what it cost.

    ``summary`` is the updated running summary when an ``llm`` was given (else None);
    ``summary_error`` says why it could not be updated (the compression itself still stands).
    """

    messages: list[dict[str, Any]]
    tokens_before: int
    tokens_after: int
    actions: list[CompressionAction]
    summary: str | None = None
    summary_error: str | None = None

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


def _validate(messages: Any, protect_turns: Any, purge_errors_after: Any) -> None:
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise InvalidInput(f"messages must be a list of dicts, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidInput(f"message {index} must be a dict with a string 'role'")
    for name, value in (("protect_turns", protect_turns), ("purge_errors_after", purge_errors_after)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{name} must be an integer >= 0, got {value!r}")


def _editable(messages: Sequence[Mapping[str, Any]], turns: list[int], protect_turns: int) -> list[bool]:
    last_turn = turns[-1] if turns else -1
    first_protected = last_turn - protect_turns + 1
    first_user = next((i for i, m in enumerate(messages) if is_turn_start(m)), len(messages))
    return [
        index > first_user and turns[index] < first_protected and message.get("role") not in SYSTEM_ROLES
        for index, message in enumerate(messages)
    ]


def analyse(
    messages: Sequence[Mapping[str, Any]], work: list[dict[str, Any]], protect_turns: int, protect_tools: Iterable[str]
) -> Analysis:
    """Turns, editable positions, tool calls and their (unambiguous) results."""
    turns = turn_numbers(messages)
    calls = [call for index, message in enumerate(messages) for call in tool_calls(index, message)]
    id_counts = Counter(call.call_id for call in calls)
    results: dict[str, ToolResult] = {}
    for index, message in enumerate(messages):
        for result in tool_results(index, message):
            if id_counts[result.call_id] == 1 and result.call_id not in results:
                results[result.call_id] = result
    # a result must come after its call; anything else is left alone
    call_at = {call.call_id: call.index for call in calls}
    results = {cid: r for cid, r in results.items() if r.index > call_at[cid]}
    return Analysis(
        work=work,
        editable=_editable(messages, turns, protect_turns),
        turns=turns,
        last_turn=turns[-1] if turns else -1,
        calls=calls,
        results=results,
        protect_tools=frozenset(protect_tools),
    )


def compress(
    messages: Sequence[Mapping[str, Any]],
    protect_turns: int = 4,
    *,
    purge_errors_after: int = 2,
    llm: ChatModel | None = None,
    summary: str = "",
    protect_tools: Iterable[str] = (),
    dedup_tool_outputs: bool = True,
    dedup_messages: bool = True,
    purge_errors: bool = True,
) -> CompressionResult:
    """Compress ``messages`` (OpenAI- or Anthropic-style) into a new list.

    - identical tool calls (same tool, same canonical arguments) keep only the latest output;
      earlier outputs become ``[tiermem: output superseded by a later identical call to T]``;
    - a text message repeated later with the same role and content becomes a placeholder;
    - the arguments of failed calls at least ``purge_errors_after`` turns old become a
      placeholder, their error text stays (failure: Anthropic ``is_error``; for OpenAI the
      heuristic of :func:`tiermem.compress.messages.looks_failed`);
    - the last ``protect_turns`` turns, system messages and the first user message are kept.

    With ``llm``, what was lost is folded into ``summary`` (the running summary so far) and the
    result's ``summary`` holds the new text. The input is never mutated.
    """
    _validate(messages, protect_turns, purge_errors_after)
    if isinstance(protect_tools, str):  # one tool name, not its letters
        protect_tools = (protect_tools,)
    work: list[dict[str, Any]] = [copy.deepcopy(dict(message)) for message in messages]
    analysis = analyse(messages, work, protect_turns, protect_tools)
    actions: list[CompressionAction] = []
    if dedup_tool_outputs:
        actions += supersede_outputs(analysis)
    if dedup_messages:
        actions += collapse_duplicates(analysis)
    if purge_errors:
        actions += purge_error_inputs(analysis, purge_errors_after)
    actions.sort(key=lambda action: action.index)
    tokens_before = sum(message_tokens(message) for message in messages)
    tokens_after = sum(message_tokens(message) for message in work)
    new_summary: str | None = None
    summary_error: str | None = None
    if llm is not None:
        try:
            new_summary = summarise(llm, summary, actions)
        except ProviderError as exc:
            log.warning("compression summary not updated: %s", exc)
            new_summary, summary_error = summary, str(exc)
    if actions:
        log.debug(
            "compressed %d messages: %d actions, %d -> %d tokens",
            len(messages),
            len(actions),
            tokens_before,
            tokens_after,
        )
    return CompressionResult(work, tokens_before, tokens_after, actions, new_summary, summary_error)
