"""Validation of every value that crosses the public API. Each failure is an ``InvalidInput``."""

from __future__ import annotations

import json
import math
import numbers
import re
from typing import Any

from tiermem.errors import InvalidInput
from tiermem.types import CATEGORIES, TIERS

MAX_CONTENT_CHARS = 4000  # one fact; a fact is a sentence, not a document
MAX_QUERY_CHARS = 4000
MAX_MESSAGE_CHARS = 200_000
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
MAX_ID_CHARS = 256  # fact, plan, thread and session ids: stored, never used as paths
MAX_JSON_DEPTH = 64  # nesting of user-supplied JSON (imports, transcripts, message blocks)
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # Cc but tab/LF/CR
_SURROGATE_RE = re.compile("[\ud800-\udfff]")  # Cs: lone surrogates, which UTF-8 cannot store
_ID_JUNK_RE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # every Cc and Cs
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


def identifier(value: Any, what: str, max_chars: int = MAX_ID_CHARS) -> str:
    """An id tiermem stores but never uses as a path (fact, plan, thread and session ids):
    a non-empty string of at most ``max_chars`` printable characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(f"{what} must not be empty")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is {len(value)} characters; the limit is {max_chars}")
    unicode_text(value, what)
    if _ID_JUNK_RE.search(value):
        raise InvalidInput(f"{what} {value[:40]!r} contains control characters (ids are one printable line)")
    return value


def thread_id(value: Any) -> str:
    """Thread (and session) ids are stored, never used as paths, so they may be longer and freer."""
    return identifier(value, "thread_id")


def unicode_text(value: str, what: str) -> str:
    """``value`` unless it holds lone surrogates (``\\udc80``...), which no file or database can
    store: they come from bytes that were not UTF-8 (a shell argument, a file read with
    ``surrogateescape``) or from a JSON ``\\ud800`` escape."""
    found = _SURROGATE_RE.search(value)
    if found is not None:
        raise InvalidInput(f"{what} is not valid Unicode: lone surrogate {found.group()!r} at character"
                           f" {found.start()} (was it bytes that are not UTF-8?)")
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
    unicode_text(value, what)
    if _CONTROL_RE.search(value):
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


_WHOLE_RE = re.compile(r"[0-9]+")
_DECIMAL_RE = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
MAX_NUMBER_CHARS = 32


def whole_number(value: Any, what: str, minimum: int = 0, maximum: int = 2**62) -> int:
    """A whole number written as text (a form field, a query parameter, a header, a config word):
    ASCII digits only, at most :data:`MAX_NUMBER_CHARS`, within [``minimum``, ``maximum``]; anything
    else is an :class:`InvalidInput`. ``str.isdigit`` and ``int`` are not this check: they take
    "²" (then ``int`` fails), "١٢", " 7", "+7" and "1_0"."""
    if not isinstance(value, str) or len(value) > MAX_NUMBER_CHARS or not _WHOLE_RE.fullmatch(value) \
            or not minimum <= int(value) <= maximum:
        raise InvalidInput(f"{what} must be a whole number in [{minimum}, {maximum}], got {_shown(value)}")
    return int(value)


def decimal_number(value: Any, what: str, minimum: float, maximum: float) -> float:
    """A number written as text in plain decimal (``0.5``, ``.5``, ``2``): ASCII digits and one
    point only, within [``minimum``, ``maximum``]; anything else (``nan``, ``inf``, ``1e3``, "١",
    a sign, spaces) is an :class:`InvalidInput`. ``float`` alone takes all of those."""
    if not isinstance(value, str) or len(value) > MAX_NUMBER_CHARS or not _DECIMAL_RE.fullmatch(value) \
            or not minimum <= float(value) <= maximum:
        raise InvalidInput(f"{what} must be a number in [{minimum:g}, {maximum:g}] (digits and a point), got"
                           f" {_shown(value)}")
    return float(value)


def _shown(value: Any) -> str:
    return repr(value[:MAX_NUMBER_CHARS] if isinstance(value, str) else value)


def fact_id(value: Any) -> str:
    """A fact id to look up: any printable id (one the store never made is simply not found)."""
    return identifier(value, "fact id")


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
        json_depth(message, f"message {index}", unicode=True)
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
    unicode_text(value, f"message {index}")
    if _CONTROL_RE.search(value):
        raise InvalidInput(f"message {index} contains control or binary characters")


# --- bytes and JSON from files a person hands over (import, ingest) ---------------------------
def utf8(raw: bytes, what: str) -> str:
    """``raw`` decoded as UTF-8 (a leading byte-order mark dropped); bytes that are not UTF-8 are
    an :class:`InvalidInput` naming the line and column of the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InvalidInput(f"not UTF-8 text: {what}, byte 0x{raw[exc.start]:02x} at line {line}, column"
                           f" {column} (save it as UTF-8 and try again)") from None


def json_value(source: str, what: str) -> Any:
    """``source`` parsed as one JSON value, nested at most :data:`MAX_JSON_DEPTH` deep; anything
    else is an :class:`InvalidInput` that says where."""
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not valid JSON: {what}, {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise InvalidInput(f"{what} nests JSON deeper than {MAX_JSON_DEPTH} levels") from None
    return json_depth(value, what)


def json_depth(value: Any, what: str, limit: int = MAX_JSON_DEPTH, *, unicode: bool = False) -> Any:
    """``value`` unless its lists and dicts nest deeper than ``limit`` (checked without recursion,
    so a hostile value cannot exhaust the stack here or later, when it is stored as JSON);
    ``unicode``: its strings (keys too) must not hold lone surrogates either."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if unicode:
                unicode_text(item, what)
            continue
        if isinstance(item, dict):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple)):
            children = list(item)
        else:
            continue
        if depth > limit:
            raise InvalidInput(f"{what} nests JSON deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)
    return value
