"""What is left of a batch of messages before it is flushed anywhere (R9, R10).

1. A ``[SCHEDULED]`` user message (one a scheduler injected) is stripped together with the reply
   paired with it — the rest of its turn, tool calls and results included
   (:func:`strip_scheduled`, :func:`kept_indices`). Every flush path applies this rule.
2. :func:`prepare_flush` then drops messages whose MD5 (role, text and tool-call ids,
   :func:`message_digest`) was handled before, or that repeat one earlier in the batch. The update
   queue uses it for its *extraction* hashes (R28). The Daily journal does not: it identifies a
   message by its position in the conversation too (:mod:`tiermem.tiers.conversation`).

:func:`prepare_flush` is pure: the caller says which digests were flushed before and records the
new ones (:attr:`FlushBatch.digests`) only after its work succeeded, so a failure never marks
messages as done.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.tiers.turns import ChatMessage, to_message, turn_spans

SCHEDULED_PREFIX = "[SCHEDULED]"


@dataclass(frozen=True)
class FlushBatch:
    """The messages to flush, their digests (in order), and what was left out."""

    messages: list[ChatMessage]
    digests: list[str]
    scheduled_dropped: int = 0
    duplicates_dropped: int = 0


def is_scheduled(message: ChatMessage) -> bool:
    return message.role == "user" and not message.is_tool_result and message.text.lstrip().startswith(
        SCHEDULED_PREFIX)


def kept_indices(messages: Sequence[ChatMessage]) -> list[int]:
    """Indices of ``messages`` outside scheduler turns (the ``[SCHEDULED]`` message and its
    paired reply), in order."""
    kept: list[int] = []
    for start, end in turn_spans(messages):
        if not is_scheduled(messages[start]):
            kept.extend(range(start, end))
    return kept


def strip_scheduled(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` without scheduler turns (the ``[SCHEDULED]`` message and its paired reply)."""
    return [messages[i] for i in kept_indices(messages)]


def message_digest(message: ChatMessage) -> str:
    """MD5 of the message's content with its role and tool-call ids (hex)."""
    parts = [message.role, message.text, *message.tool_call_ids, "|", *message.tool_result_ids]
    parts += [f"{call.name}:{call.arguments}" for call in message.tool_calls]
    return hashlib.md5("\x1f".join(parts).encode("utf-8"), usedforsecurity=False).hexdigest()


def prepare_flush(
    messages: Sequence[ChatMessage | Mapping[str, Any]],
    already_flushed: Callable[[list[str]], set[str]],
) -> FlushBatch:
    """Strip scheduler pairs, then drop messages whose digest ``already_flushed`` reports (or that
    repeat one earlier in the batch). ``already_flushed`` gets every digest and returns the subset
    that was flushed before."""
    normalised = [to_message(m) for m in messages]
    kept = strip_scheduled(normalised)
    digests = [message_digest(m) for m in kept]
    seen = set(already_flushed(list(dict.fromkeys(digests)))) if digests else set()
    out: list[ChatMessage] = []
    out_digests: list[str] = []
    for message, digest in zip(kept, digests, strict=True):
        if digest in seen:
            continue
        seen.add(digest)
        out.append(message)
        out_digests.append(digest)
    return FlushBatch(out, out_digests, len(normalised) - len(kept), len(kept) - len(out))
