"""What a conversation's messages become: Daily records (verbatim, R8) and summary lines.

**Records** (:func:`message_records`) — what the Daily journal keeps, whole and exact:

- ``user: <text>`` (likewise ``assistant:``, ``system:``; ``user (NAME):`` when the message names
  its speaker) with the message's text verbatim — newlines, code and all — never cut;
- ``assistant called NAME(ARGS)`` for each tool call, after the message's own text;
- ``tool result (NAME): TEXT`` for a tool's answer (NAME from the call it answers).

Tool results and tool-call arguments longer than ``tool_max_chars`` (the ``tool_result_max_chars``
setting, default 4,000) keep their first ``tool_max_chars`` characters and end with a visible
``[… N characters omitted]``. Nothing else is ever cut: the only hard limit is the input cap
(``validate.MAX_MESSAGE_CHARS``), which refuses a message with ``InvalidInput`` before it gets
here. Text is normalised as every record is (:func:`~tiermem.tiers.markdown.normalise_text`).

**Summary lines** are for the session's running summary, which is a budgeted digest, not a record:
one line per message (:func:`summary_lines`: whitespace folded, long text cut at a word boundary
with ``…``), or with an LLM the event lines of :func:`summary_request` / :func:`parse_summary`;
a reply without any ``- `` line is an error, never "no summary".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import date
from importlib import resources
from typing import Any

from tiermem.tiers.markdown import normalise_text
from tiermem.tiers.turns import ChatMessage

SPEECH_MAX_CHARS = 1000
TOOL_MAX_CHARS = 300
TOOL_RESULT_MAX_CHARS = 4000  # default of the tool_result_max_chars setting
NAME_MAX_CHARS = 40  # of a speaker's name in a record label
TOOL_NAME_MAX_CHARS = 100
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


_OMITTED = re.compile(r" \[… (\d+) characters omitted\]\Z")


def cap(text: str, max_chars: int) -> str:
    """``text`` itself, or its first ``max_chars`` characters and ``[… N characters omitted]``.
    A text cut before (a coding agent's save cuts tool output before the journal does) is not cut
    again: the note keeps counting from the original, ``cap(cap(t, n), n) == cap(t, n)``."""
    if len(text) <= max_chars:
        return text
    cut = _OMITTED.search(text)
    kept, omitted = (text[:cut.start()], int(cut.group(1))) if cut else (text, 0)
    if len(kept) <= max_chars:
        return text
    return f"{kept[:max_chars]} [… {omitted + len(kept) - max_chars} characters omitted]"


def _speaker(message: ChatMessage) -> str:
    if message.name and message.role in ("user", "assistant"):
        return f"{message.role} ({clean(message.name)[:NAME_MAX_CHARS]})"
    return message.role


def tool_names(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """Tool-call id -> tool name, over every call in ``messages``."""
    return {call.id: call.name for message in messages for call in message.tool_calls}


def _tool_label(message: ChatMessage, names: Mapping[str, str]) -> str:
    labels = [clean(names.get(i, i)) for i in message.tool_result_ids]
    return ", ".join(label for label in labels if label) or clean(message.name or "")


def message_records(message: ChatMessage, names: Mapping[str, str],
                    tool_max_chars: int = TOOL_RESULT_MAX_CHARS) -> list[str]:
    """The Daily records of one message (see the module docstring); ``names`` labels tool results."""
    text = normalise_text(message.text)
    if message.is_tool_result:
        if not text.strip():
            return []
        label = _tool_label(message, names)
        body = cap(text, tool_max_chars)
        return [f"tool result ({label}): {body}" if label else f"tool result: {body}"]
    records = [f"{_speaker(message)}: {text}"] if text.strip() else []
    for call in message.tool_calls:
        name = clean(call.name)[:TOOL_NAME_MAX_CHARS] or "a tool"
        records.append(f"{message.role} called {name}({cap(normalise_text(call.arguments), tool_max_chars)})")
    return records


def summary_lines(messages: Sequence[ChatMessage], speech_max: int = SPEECH_MAX_CHARS,
                  tool_max: int = TOOL_MAX_CHARS) -> list[str]:
    """One condensed line per message (and per tool call), for the running summary."""
    names = tool_names(messages)
    lines: list[str] = []
    for message in messages:
        if message.is_tool_result:
            label = _tool_label(message, names)
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
    transcript = "\n".join(f"- {line}" for line in summary_lines(messages, 4 * SPEECH_MAX_CHARS, SPEECH_MAX_CHARS))
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
