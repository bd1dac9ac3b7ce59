"""Daily records of conversation turns: extractive (no LLM) or summarised by an LLM (R8).

Without an LLM — or when the LLM fails — every message becomes one deterministic line:
the speaker and the condensed text (whitespace folded, control characters removed, long text cut
at a word boundary and marked with ``…``; tool output is cut shorter than what people said).
With an LLM, :func:`summary_request` asks for one ``- `` line per event and
:func:`parse_summary` reads them back; a reply without any such line is an error, never "no
records".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import date
from importlib import resources
from typing import Any

from tiermem.tiers.turns import ChatMessage

SPEECH_MAX_CHARS = 1000
TOOL_MAX_CHARS = 300
SUMMARY_MAX_LINES = 12
PROMPT_RESOURCE = "prompts/session_summary.md"
_LINE_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+(.*\S)\s*$")
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def clean(text: str) -> str:
    """One printable line: control characters dropped, whitespace folded."""
    printable = "".join(
        " " if c in "\t\n\r" else c
        for c in text
        if c in "\t\n\r" or unicodedata.category(c) not in ("Cc", "Cs")
    )
    return " ".join(printable.split())


def condense(text: str, max_chars: int) -> str:
    """``text`` on one line, cut at a word boundary to at most about ``max_chars`` characters."""
    line = clean(text)
    if len(line) <= max_chars:
        return line
    cut = line[:max_chars]
    space = cut.rfind(" ")
    if space > max_chars // 2:
        cut = cut[:space]
    return cut.rstrip() + " …"


def _speaker(message: ChatMessage) -> str:
    if message.name and message.role in ("user", "assistant"):
        return f"{message.role} ({clean(message.name)[:40]})"
    return message.role


def extractive_lines(messages: Sequence[ChatMessage], speech_max: int = SPEECH_MAX_CHARS,
                     tool_max: int = TOOL_MAX_CHARS) -> list[str]:
    """One line per message (and per tool call): speaker, then condensed text."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for message in messages:
        for call in message.tool_calls:
            names[call.id] = call.name
        if message.is_tool_result:
            label = ", ".join(clean(names.get(i, i)) for i in message.tool_result_ids) or clean(message.name or "")
            text = condense(message.text, tool_max)
            if text:
                lines.append(f"tool result ({label}): {text}" if label else f"tool result: {text}")
            continue
        text = condense(message.text, speech_max)
        if text:
            lines.append(f"{_speaker(message)}: {text}")
        for call in message.tool_calls:
            arguments = condense(call.arguments, tool_max)
            lines.append(f"{message.role} called {clean(call.name) or 'a tool'}({arguments})")
    return lines


def summary_request(messages: Sequence[ChatMessage], previous_summary: str, today: date) -> list[dict[str, Any]]:
    """The chat request that asks an LLM for one ``- `` line per event of ``messages``."""
    template = resources.files("tiermem").joinpath(PROMPT_RESOURCE).read_text(encoding="utf-8")
    system = template.format(today=today.isoformat(), max_lines=SUMMARY_MAX_LINES)
    transcript = "\n".join(f"- {line}" for line in extractive_lines(messages, 4 * SPEECH_MAX_CHARS, SPEECH_MAX_CHARS))
    user = f"Earlier summary:\n{previous_summary or '(none)'}\n\nTurns leaving the context:\n{transcript}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_summary(reply: str) -> list[str]:
    """The event lines of an LLM reply; ``ValueError`` when it holds none."""
    if not isinstance(reply, str):
        raise ValueError(f"expected text from the model, got {type(reply).__name__}")
    body = _THINK_RE.sub("", reply)
    lines: list[str] = []
    for raw in body.splitlines():
        match = _LINE_RE.match(raw)
        if match:
            line = clean(match.group(1))
            if line:
                lines.append(line)
    if not lines:
        raise ValueError(f"no '- ' lines in the model's summary: {reply[:200]!r}")
    return lines[:SUMMARY_MAX_LINES * 2]
