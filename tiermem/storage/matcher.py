"""Where a text occurs in what tiermem stores, in whatever encoding it is stored: :class:`Matcher`
(used by :mod:`tiermem.purge` for the files and by :mod:`tiermem.storage.purge` for the rows).

A text matches case-insensitively (Unicode simple case folding, as ``re`` does it), and a run of
white space in the text matches any run of white space, so a text also matches where a record
wraps it onto continuation lines or a line break was folded.

Stored text may hold it JSON-encoded: a logged prompt, a queued message or a session item (JSON
documents), a tool call's arguments (a JSON text inside a JSON string), a model's JSON reply, JSON
pasted into a Daily file, a prompt clipped in the middle of a string. There a line break is
``\\n``, a tab ``\\t``, a quote ``\\"``, any letter may be ``\\uXXXX``. So a text is matched as it
is, and then inside every JSON string literal that holds an escape, decoded (and, inside that,
again: JSON within JSON); an occurrence found there is replaced inside the literal, which is
written back JSON-encoded. A JSON document read whole (:meth:`Matcher.sub_json`) has each of its
strings matched the same way; object keys are its structure and are left alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

PLACEHOLDER = "[purged]"

#: A JSON string literal on one line; the last one of a text may be unterminated (a clipped prompt).
_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)("|\Z)')


class Matcher:
    """Where a text occurs: case-insensitive, any run of white space matching any other, in plain
    text and inside JSON string literals (see the module docstring)."""

    def __init__(self, text: str) -> None:
        words = text.split()
        if not words:
            raise ValueError("nothing to match")
        self.text = text
        self.pattern = re.compile(r"\s+".join(re.escape(word) for word in words), re.IGNORECASE)

    def found(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        return self.pattern.search(value) is not None or ("\\" in value and self.sub(value)[1] > 0)

    def sub(self, value: str) -> tuple[str, int]:
        """``value`` with every occurrence replaced by :data:`PLACEHOLDER`, and how many there were."""
        text, count = self.pattern.subn(PLACEHOLDER, value)
        if "\\" not in text:
            return text, count
        found = 0

        def literal(match: re.Match[str]) -> str:
            nonlocal found
            body, closed = match.group(1), match.group(2) == '"'
            if "\\" not in body:
                return match.group(0)  # nothing decodes differently: the plain match saw it all
            try:
                decoded = json.loads(f'"{body}"')
            except ValueError:  # not JSON (a Windows path, a stray quote): matched as it is, above
                return match.group(0)
            new, inside = self.sub(decoded)
            if not inside:
                return match.group(0)
            found += inside
            encoded = _encode(new)
            return encoded if closed else encoded[:-1]

        text = _LITERAL.sub(literal, text)
        return text, count + found

    def sub_json(self, value: Any) -> tuple[Any, int]:
        """A decoded JSON value with the text replaced in every string (keys left alone)."""
        if isinstance(value, str):
            return self.sub(value)
        if isinstance(value, list):
            pairs = [self.sub_json(v) for v in value]
            return [v for v, _ in pairs], sum(n for _, n in pairs)
        if isinstance(value, dict):
            done = {k: self.sub_json(v) for k, v in value.items()}
            return {k: v for k, (v, _) in done.items()}, sum(n for _, n in done.values())
        return value, 0


def _encode(text: str) -> str:
    """``text`` as a JSON string literal: as it reads, or with ``\\u`` escapes where a lone surrogate
    (decoded from an escape) could not be stored otherwise."""
    encoded = json.dumps(text, ensure_ascii=False)
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)
    return encoded
