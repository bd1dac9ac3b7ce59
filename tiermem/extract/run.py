"""One extraction call: ask, parse, and on a parse failure ask once more quoting the error.

No storage here. A :class:`~tiermem.errors.ProviderError` from the model propagates unchanged
(the caller keeps the batch queued); a reply that is still unusable after the retry raises
:class:`~tiermem.errors.ExtractionError` carrying that reply.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Set
from dataclasses import replace
from typing import Any

from tiermem.calls.trace import call_purpose, note_parse_failure
from tiermem.errors import ExtractionError
from tiermem.extract.parse import Dropped, ExtractionResult, parse_extraction
from tiermem.extract.prompt import EXTRACTION_SCHEMA, prompt_examples
from tiermem.models.protocols import ChatModel

log = logging.getLogger(__name__)

MAX_QUOTED_REPLY_CHARS = 4000
RETRY_TEMPLATE = (
    "Your previous reply could not be used: {error}.\n"
    "Reply again with only the JSON object described in the instructions (keys user, history, "
    "newFacts, factsToRemove), no code fences, no text before or after it."
)


@call_purpose("extraction")  # the LLM call log's purpose of the calls made inside
def extract_once(
    llm: ChatModel,
    messages: list[dict[str, Any]],
    schema: dict[str, Any] | None = EXTRACTION_SCHEMA,
    *,
    valid_short_ids: Set[int] = frozenset(),
) -> ExtractionResult:
    """Call ``llm`` with ``messages`` (from ``build_extraction_messages``) and parse the reply.

    On an :class:`ExtractionError` the model is asked once more: the conversation continues
    with its own (clipped) reply and a user message quoting the error. ``valid_short_ids`` are
    the ids of the existing facts shown in the prompt. Facts that merely repeat the prompt's
    own example sentences are dropped unless the conversation supports them.
    """
    raw = llm.complete(messages, json_schema=schema)
    try:
        return _without_echoes(parse_extraction(raw, valid_short_ids), messages)
    except ExtractionError as exc:
        first = exc
        note_parse_failure(raw, exc)  # the call log's row of this reply: parse_failed
    log.warning("extraction reply unusable (%s); retrying once. Reply began: %r", first, raw[:200])
    retry = [
        *messages,
        {"role": "assistant", "content": _clip(raw)},
        {"role": "user", "content": RETRY_TEMPLATE.format(error=first)},
    ]
    raw_again = llm.complete(retry, json_schema=schema)
    try:
        return _without_echoes(parse_extraction(raw_again, valid_short_ids), messages)
    except ExtractionError as second:
        note_parse_failure(raw_again, second)
        raise ExtractionError(
            f"extraction failed after one retry: {second} (first reply: {first})", raw=raw_again
        ) from second


def _clip(raw: str) -> str:
    if not raw.strip():
        return "(empty reply)"
    if len(raw) <= MAX_QUOTED_REPLY_CHARS:
        return raw
    return raw[:MAX_QUOTED_REPLY_CHARS] + f"\n[... {len(raw) - MAX_QUOTED_REPLY_CHARS} more characters]"


_WORD = re.compile(r"\w+")


def _stems(text: str) -> set[str]:
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in _WORD.findall(text.casefold())}


def _without_echoes(result: ExtractionResult, messages: list[dict[str, Any]]) -> ExtractionResult:
    """Drop new facts that equal an example sentence of the prompt, unless every word of it
    (plural ``s`` ignored) occurs in the non-system messages."""
    examples = prompt_examples()
    echoes = [f for f in result.new_facts if " ".join(f.content.casefold().split()) in examples]
    if not echoes:
        return result
    said = _stems(" ".join(str(m.get("content", "")) for m in messages if m.get("role") != "system"))
    dropped = [f for f in echoes if not _stems(f.content) <= said]
    if not dropped:
        return result
    for fact in dropped:
        log.info("extraction: dropped %r: repeats an example of the prompt", fact.content)
    return replace(
        result,
        new_facts=tuple(f for f in result.new_facts if f not in dropped),
        dropped=result.dropped + tuple(
            Dropped(json.dumps({"content": f.content}, ensure_ascii=False),
                    "repeats an example of the prompt, not the conversation")
            for f in dropped
        ),
    )
