"""Validation of every value that crosses the public API. Each failure is an ``InvalidInput``."""

from __future__ import annotations

import math
import numbers
import re
import unicodedata
from typing import Any

from tiermem.errors import InvalidInput
from tiermem.types import CATEGORIES, TIERS

MAX_CONTENT_CHARS = 4000  # one fact; a fact is a sentence, not a document
MAX_QUERY_CHARS = 4000
MAX_MESSAGE_CHARS = 200_000
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_JUNK_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")  # Cc but tab/CR/LF, Cs
_FACT_ID_RE = re.compile(r"^fact_[0-9a-f]{8}$")


def name(value: Any, what: str) -> str:
    """A user id, agent name or thread id used in file names: no separators, no ``..``."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    if not _ID_RE.match(value) or ".." in value:
        raise InvalidInput(
            f"{what} {value[:80]!r} is not allowed: use 1-64 letters, digits, '_', '-', '.', '@'"
            " (no path separators, no '..')"
        )
    return value


def thread_id(value: Any) -> str:
    """Thread ids are stored, never used as paths, so they may be longer and freer."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("thread_id must be a non-empty string")
    if len(value) > 256 or any(unicodedata.category(c) == "Cc" for c in value):
        raise InvalidInput("thread_id must be at most 256 printable characters")
    return value


def text(value: Any, what: str, max_chars: int) -> str:
    """Non-empty text without binary junk (NUL or other control characters but tab/newline)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    stripped = value.strip()
    if not stripped:
        raise InvalidInput(f"{what} must not be empty")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is {len(value)} characters; the limit is {max_chars}")
    if _JUNK_RE.search(value):
        raise InvalidInput(f"{what} contains control or binary characters")
    return stripped


def content(value: Any) -> str:
    return text(value, "content", MAX_CONTENT_CHARS)


def category(value: Any) -> str:
    if not isinstance(value, str) or value not in CATEGORIES:
        raise InvalidInput(f"category {value!r} is not one of {', '.join(CATEGORIES)}")
    return value


def confidence(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy floats are Real too
        raise InvalidInput(f"confidence must be a number, got {type(value).__name__}")
    result = float(value)
    if math.isnan(result) or not 0.0 <= result <= 1.0:
        raise InvalidInput(f"confidence must be within [0, 1], got {value!r}")
    return result


def tier(value: Any) -> str:
    if not isinstance(value, str) or value not in TIERS:
        raise InvalidInput(f"tier {value!r} is not one of {', '.join(TIERS)}")
    return value


def positive_int(value: Any, what: str, maximum: int = 1_000_000) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidInput(f"{what} must be an integer in [1, {maximum}], got {value!r}")
    return value


def fact_id(value: Any) -> str:
    """A fact id as the store makes them; anything else cannot exist."""
    if not isinstance(value, str):
        raise InvalidInput(f"fact id must be a string, got {type(value).__name__}")
    return value


def is_fact_id(value: str) -> bool:
    return bool(_FACT_ID_RE.match(value))


def normalise(content_text: str) -> str:
    """The dedup key of R16: casefold and fold runs of whitespace."""
    return " ".join(content_text.casefold().split())


MAX_MESSAGES = 10_000


def messages(value: Any) -> list[dict[str, Any]]:
    """A conversation: a list of dicts with a string ``role`` and a string or block-list ``content``
    (OpenAI or Anthropic shape). Text is checked for size and binary junk."""
    if not isinstance(value, list):
        raise InvalidInput(f"messages must be a list of dicts, got {type(value).__name__}")
    if len(value) > MAX_MESSAGES:
        raise InvalidInput(f"{len(value)} messages; the limit is {MAX_MESSAGES}")
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidInput(f"message {index} must be a dict with a string 'role'")
        body = message.get("content")
        if body is None and message.get("tool_calls"):
            continue
        if isinstance(body, list):
            for block in body:
                if not isinstance(block, dict):
                    raise InvalidInput(f"message {index}: content blocks must be dicts")
                if isinstance(block.get("text"), str):
                    _message_text(block["text"], index)
        elif isinstance(body, str):
            _message_text(body, index)
        else:
            raise InvalidInput(f"message {index}: content must be a string or a list of blocks")
    return value


def _message_text(value: str, index: int) -> None:
    if len(value) > MAX_MESSAGE_CHARS:
        raise InvalidInput(f"message {index} is {len(value)} characters; the limit is {MAX_MESSAGE_CHARS}")
    if _JUNK_RE.search(value):
        raise InvalidInput(f"message {index} contains control or binary characters")
