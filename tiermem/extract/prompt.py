"""The extraction request: a system prompt (package data ``tiermem/prompts/extract.md``,
rendered with today's date at call time) and one user message with the current summaries,
the existing facts under short integer ids, and the new turns.

The system prompt changes only with the date, so a provider's prompt cache stays warm within
a day; everything that varies goes into the user message.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from functools import lru_cache
from importlib import resources
from typing import Any

from tiermem.errors import InvalidInput
from tiermem.types import CATEGORIES, HISTORY_SUMMARY_KEYS, SUMMARY_KEYS, USER_SUMMARY_KEYS

PROMPT_RESOURCE = "prompts/extract.md"
MAX_TURN_CHARS = 8000
"""A longer turn is cut (head kept) with a marker, so one pasted log cannot crowd out the rest."""

ExistingFact = tuple[int, str, str, float]
"""(short id, content, category, confidence) of a fact shown to the model."""


def _summary_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"summary": {"type": "string"}, "shouldUpdate": {"type": "boolean"}},
        "required": ["summary", "shouldUpdate"],
        "additionalProperties": False,
    }


def _section_schema(keys: tuple[str, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {key: _summary_schema() for key in keys},
        "required": list(keys),
        "additionalProperties": False,
    }


EXTRACTION_SCHEMA: dict[str, Any] = {
    "title": "tiermem_extraction",
    "type": "object",
    "properties": {
        "user": _section_schema(USER_SUMMARY_KEYS),
        "history": _section_schema(HISTORY_SUMMARY_KEYS),
        "newFacts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "category": {"type": "string", "enum": list(CATEGORIES)},
                    "confidence": {"type": "number", "description": "0.0 to 1.0"},
                },
                "required": ["content", "category", "confidence"],
                "additionalProperties": False,
            },
        },
        "factsToRemove": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["user", "history", "newFacts", "factsToRemove"],
    "additionalProperties": False,
}
"""JSON schema of the reply, valid for OpenAI strict mode and Anthropic structured output
(no numeric bounds: the confidence range is in the description and enforced by the parser)."""


@lru_cache(maxsize=1)
def prompt_template() -> str:
    """The raw template text (with the ``{{today}}`` placeholder)."""
    return resources.files("tiermem").joinpath(PROMPT_RESOURCE).read_text(encoding="utf-8")


def prompt_sha256() -> str:
    """SHA-256 of the template, stored next to the reply fixtures to notice prompt changes."""
    return hashlib.sha256(prompt_template().encode("utf-8")).hexdigest()


def render_system_prompt(today: date) -> str:
    """The system prompt for ``today`` (a ``date``; a ``datetime`` is reduced to its date)."""
    if isinstance(today, datetime):
        today = today.date()
    if not isinstance(today, date):
        raise InvalidInput(f"today must be a date, got {type(today).__name__}")
    return prompt_template().replace("{{today}}", f"{today.isoformat()} ({today:%A})")


def turn_text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of OpenAI/Anthropic content
    blocks (images and tool blocks are left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(block.get("text", "")))
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


def _render_summaries(summaries: Mapping[str, str]) -> list[str]:
    unknown = sorted(set(summaries) - set(SUMMARY_KEYS))
    if unknown:
        raise InvalidInput(f"unknown summary keys {unknown}; expected some of {list(SUMMARY_KEYS)}")
    lines = []
    for key in SUMMARY_KEYS:
        section = "user" if key in USER_SUMMARY_KEYS else "history"
        text = " ".join(str(summaries.get(key) or "").split())
        lines.append(f"{section}.{key}: {text or '(empty)'}")
    return lines


def _render_facts(existing: Sequence[ExistingFact]) -> list[str]:
    lines = []
    seen: set[int] = set()
    for short_id, content, category, confidence in existing:
        if isinstance(short_id, bool) or not isinstance(short_id, int) or short_id in seen:
            raise InvalidInput(f"existing fact ids must be distinct integers, got {short_id!r}")
        seen.add(short_id)
        lines.append(f"[{short_id}] ({category}, {float(confidence):.2f}) {' '.join(content.split())}")
    return lines or ["(none)"]


def _render_turns(turns: Sequence[Mapping[str, Any]]) -> list[str]:
    blocks = []
    for turn in turns:
        role = str(turn.get("role", "user"))
        text = turn_text(turn.get("content")).strip()
        if not text:
            continue
        if len(text) > MAX_TURN_CHARS:
            text = text[:MAX_TURN_CHARS] + f"\n[... {len(text) - MAX_TURN_CHARS} more characters cut]"
        blocks.append(f"[{role}]\n{text}")
    if not blocks:
        raise InvalidInput("no conversation turns with text to extract from")
    return blocks


def build_extraction_messages(
    existing: Sequence[ExistingFact],
    summaries: Mapping[str, str],
    turns: Sequence[Mapping[str, Any]],
    today: date,
) -> list[dict[str, str]]:
    """The two messages of an extraction call: ``[{"role": "system", ...}, {"role": "user", ...}]``.

    ``existing``: (short id, content, category, confidence) tuples, ids distinct integers that
    the caller maps back to fact ids. ``summaries``: current text by flat key
    (``workContext``, ..., ``longTermBackground``; missing = empty). ``turns``: ``{role,
    content}`` dicts, already cleaned (see :func:`tiermem.extract.guard.clean_turns`).
    ``today``: from the caller's clock, in the user's time zone.
    """
    user = "\n".join(
        [
            "CURRENT SUMMARIES",
            *_render_summaries(summaries),
            "",
            "EXISTING FACTS (id, category, confidence)",
            *_render_facts(existing),
            "",
            "NEW CONVERSATION",
            "\n\n".join(_render_turns(turns)),
            "",
            "Reply with the JSON object only.",
        ]
    )
    return [{"role": "system", "content": render_system_prompt(today)}, {"role": "user", "content": user}]


@lru_cache(maxsize=1)
def prompt_examples() -> frozenset[str]:
    """The example sentences quoted in the template, normalised (casefold, whitespace folded).
    Small models sometimes return them as facts; :func:`tiermem.extract.run.extract_once`
    drops such echoes unless the conversation itself says the same."""
    quoted = re.findall(r'"([^"\n{}:]{8,160})"', prompt_template())
    return frozenset(" ".join(q.casefold().split()) for q in quoted)
