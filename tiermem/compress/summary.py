"""Fold what compression removed into a running summary with an LLM (optional).

Only what was actually lost is sent: superseded tool outputs and purged inputs of failed calls.
Collapsed duplicates are left out, since their latest copy is still in the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from tiermem.calls.trace import call_purpose, note_parse_failure
from tiermem.compress.rules import CompressionAction
from tiermem.errors import ProviderError
from tiermem.tokens import count_tokens, truncate_to_tokens

if TYPE_CHECKING:
    from tiermem.models.protocols import ChatModel

ITEM_TOKENS = 300  # each removed item is shown up to this many tokens
TOTAL_TOKENS = 6000  # all removed items together
MAX_WORDS = 250
_REASONS = {
    "superseded_output": "output of {detail}; superseded by a later identical call",
    "purged_error_input": "input of a failed {tool} call ({detail})",
}


@lru_cache(maxsize=1)
def _instructions() -> str:
    text = resources.files("tiermem").joinpath("prompts/compress_summary.md").read_text(encoding="utf-8")
    return text.replace("{max_words}", str(MAX_WORDS)).strip()


def _excerpt(text: str, budget: int) -> str:
    """``text`` if it fits in ``budget`` tokens, else its head (a third) and its last whole lines
    (the rest): tool outputs tend to put the verdict (test summary, exit code) at the end."""
    if count_tokens(text) <= budget:
        return text
    head = truncate_to_tokens(text, budget // 3)
    tail: list[str] = []
    used = 0
    for line in reversed(text.splitlines()):
        cost = count_tokens(line) + 1
        if used + cost > budget - budget // 3:
            break
        tail.append(line)
        used += cost
    return head + "\n[...]\n" + "\n".join(reversed(tail))


def summary_request(previous: str, actions: Sequence[CompressionAction]) -> list[dict[str, Any]] | None:
    """The messages to send, or None when nothing worth summarising was removed."""
    items: list[str] = []
    used = 0
    lost = [a for a in actions if a.rule in _REASONS]
    for number, action in enumerate(lost, start=1):
        excerpt = _excerpt(action.original, ITEM_TOKENS)
        reason = _REASONS[action.rule].format(detail=action.detail, tool=action.tool)
        item = f"### {number}. {reason}\n{excerpt}"
        cost = count_tokens(item)
        if used + cost > TOTAL_TOKENS:
            items.append(f"({len(lost) - number + 1} more removed items not shown)")
            break
        items.append(item)
        used += cost
    if not items:
        return None
    user = f"Previous summary:\n{previous.strip() or '(none yet)'}\n\nRemoved items:\n\n" + "\n\n".join(items)
    return [{"role": "system", "content": _instructions()}, {"role": "user", "content": user}]


@call_purpose("compression")  # the LLM call log's purpose
def summarise(llm: ChatModel, previous: str, actions: Sequence[CompressionAction]) -> str:
    """The updated running summary (``previous`` unchanged when nothing was lost).

    Raises :class:`ProviderError` when the model fails or answers with nothing.
    """
    request = summary_request(previous, actions)
    if request is None:
        return previous
    try:
        reply = llm.complete(request)
    except ProviderError:
        raise
    except Exception as exc:  # a ChatModel may raise anything; convert at the boundary
        raise ProviderError(f"summary request failed: {exc}") from exc
    text = reply.strip() if isinstance(reply, str) else ""
    if not text:
        note_parse_failure(reply, "the model returned an empty summary")
        raise ProviderError("the model returned an empty summary")
    return text
