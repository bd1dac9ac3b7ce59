"""Finding the JSON in what a model actually wrote.

Real replies wrap the object in ``<think>`` blocks (deepseek-r1, qwen3; sometimes with only
the closing tag, sometimes cut off before it), code fences (often unterminated), prose before
and after, trailing commas, single quotes, comments, or stop mid-array at the token limit.
:func:`json_candidates` yields every plausible JSON value in reading order (fenced blocks
first), parsed strictly when possible and with ``json-repair`` otherwise, together with the
scanner state at the end of the text when the value was cut off, so that the caller can drop
the one item that was being written when the reply stopped (see :func:`cut_partial_tail`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)\b[^>]*>", re.IGNORECASE)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_ARRAY_OF_OBJECTS = re.compile(r"\[\s*(?:\{|\])")
MAX_STARTS = 40


@dataclass
class Frame:
    """One open container while scanning: ``{`` or ``[``."""

    kind: str
    key: str | None = None  # object: the key whose value is being read
    expect_key: bool = True  # object: the next string is a key
    completed: int = 0  # array: elements finished by a comma
    pending: bool = False  # array: an element started since the last comma
    value_closed: bool = False  # the current element/value ended with a quote or bracket


@dataclass
class Candidate:
    """A JSON value found in the reply."""

    value: Any
    repaired: bool
    truncated: bool
    open_frames: list[Frame] = field(default_factory=list)


def strip_thinking(text: str) -> tuple[str, bool]:
    """Remove reasoning blocks. Returns the rest and whether an unterminated block was cut.

    ``<think>...</think>`` blocks go; a lone ``</think>`` (the opening tag was part of the chat
    template) drops everything before it; a ``<think>`` that never closes drops the rest.
    """
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:
        return text[: opened.start()], True
    return text, False


def scan(text: str, start: int) -> tuple[int | None, list[Frame]]:
    """Walk a JSON-ish value from ``text[start]`` (``{`` or ``[``), string-aware (double or
    single quotes). Returns ``(end, [])`` when it closes at ``end`` (exclusive), or
    ``(None, open_frames)`` when the text ends first."""
    stack: list[Frame] = []
    quote: str | None = None
    key_chars: list[str] | None = None
    prev = ""  # last significant character outside strings
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if quote is not None:
            if c == "\\":
                if key_chars is not None and i + 1 < n:
                    key_chars.append(text[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
                _string_closed(stack, key_chars)
                key_chars = None
                prev = c
            elif key_chars is not None:
                key_chars.append(c)
            i += 1
            continue
        if c == '"' or (c == "'" and prev != "" and prev in "{[,:"):
            quote = c
            top = stack[-1] if stack else None
            key_chars = [] if top is not None and top.kind == "{" and top.expect_key else None
            _value_started(top)
        elif c in "{[":
            _value_started(stack[-1] if stack else None)
            stack.append(Frame(kind=c))
        elif c in "}]":
            if stack:
                stack.pop()
            if not stack:
                return i + 1, []
            stack[-1].value_closed = True
        elif c == "," and stack:
            _comma(stack[-1])
        elif c == ":" and stack and stack[-1].kind == "{":
            stack[-1].expect_key = False
        elif not c.isspace() and stack:
            _value_started(stack[-1])
            stack[-1].value_closed = False
        if not c.isspace():
            prev = c
        i += 1
    return None, stack


def _value_started(top: Frame | None) -> None:
    if top is not None and top.kind == "[":
        top.pending = True
        top.value_closed = False


def _string_closed(stack: list[Frame], key_chars: list[str] | None) -> None:
    if not stack:
        return
    top = stack[-1]
    if key_chars is not None:
        top.key = "".join(key_chars)
        top.expect_key = False
        top.value_closed = False
    else:
        top.value_closed = True


def _comma(top: Frame) -> None:
    if top.kind == "[":
        top.completed += int(top.pending)
        top.pending = False
    else:
        top.key = None
        top.expect_key = True
    top.value_closed = False


def _loads(snippet: str) -> tuple[Any, bool]:
    try:
        return json.loads(snippet), False
    except ValueError:
        pass
    import json_repair

    return json_repair.loads(snippet, skip_json_loads=True), True


def _regions(text: str) -> list[str]:
    fenced = [m.group(1) for m in _FENCE.finditer(text) if "{" in m.group(1) or "[" in m.group(1)]
    return [*fenced, text]


def json_candidates(raw: str) -> Iterator[Candidate]:
    """Every JSON object (or array of objects) in ``raw`` after reasoning blocks are removed,
    fenced blocks first, then the whole text in reading order. Nested values of a candidate are
    not yielded again."""
    text, _ = strip_thinking(raw)
    for region in _regions(text):
        starts = 0
        skip_until = -1
        for match in re.finditer(r"[{\[]", region):
            pos = match.start()
            if pos < skip_until or (region[pos] == "[" and not _ARRAY_OF_OBJECTS.match(region, pos)):
                continue
            starts += 1
            if starts > MAX_STARTS:
                break
            end, frames = scan(region, pos)
            value, repaired = _loads(region[pos:end] if end is not None else region[pos:])
            if isinstance(value, (dict, list)):
                yield Candidate(value, repaired or end is None, end is None, frames)
            if end is None:
                break  # the rest of the region is inside this cut-off value
            skip_until = end


def cut_partial_tail(candidate: Candidate, is_droppable_key: Callable[[str], bool]) -> Any | None:
    """In a cut-off reply, remove the value that was being written when the text ended.

    Walking the open containers from the outside in, the first one that is mid-element decides:
    an array loses its last element (if the repaired value still has it), an object whose key
    passes ``is_droppable_key`` loses that key. Returns what was removed, or ``None``.
    """
    node: Any = candidate.value
    for frame in candidate.open_frames:
        if frame.kind == "[":
            if not isinstance(node, list):
                return None
            if frame.pending and not frame.value_closed:
                if node and len(node) == frame.completed + 1:
                    return node.pop()
                return None
            if not node:
                return None
            node = node[-1]
        else:
            if not isinstance(node, dict) or frame.key is None or frame.key not in node:
                return None
            if is_droppable_key(frame.key) and not frame.value_closed:
                return {frame.key: node.pop(frame.key)}
            node = node[frame.key]
    return None
